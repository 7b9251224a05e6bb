"""Length grouping on (the default) against off, on the domain suite: ConSERT on both shared models (issue 41, item 6:
the section regenerates from tracked per-pair outputs).

    python -m research.experiments.grouping_suite --train    # grouping off on both models × the 4 domains (runs/grouping)
    python -m research.experiments.grouping_suite --store    # their per-pair outputs → research/results/grouping (tracked)
    python -m research.experiments.grouping_suite --study    # research/results/grouping/study.json, then the section
    python -m research.experiments.grouping_suite --render   # redraw the section from research/results/grouping/study.json

Grouping on is not trained here: it is the decision study's ConSERT run (research/experiments/decision_runs.py, stored in
research/results/decision), and grouping off is the same command with `--set length_grouping=false`. Each run scored its
domain's pool at every evaluated step; the study applies what `adapt --dev dev.jsonl` does (the step with the best
score on the pool's first 100 pairs, the default decision on them) and scores that step on the test pairs, with the
functions of the domain-suite section (research/experiments/domain_stored.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from research.experiments import decision_runs, decision_study, domain_stored
from research.experiments.domain_data import DOMAINS
from research.experiments.domain_render import applied_delta
from research.experiments.results_suite import REPO, Runner, machine_summary, short
from research.experiments.stored_runs import add_study_options, check_pools, job_record, run_study_stages, store_run

SECTION = "grouping"
WORK = Path("runs/grouping")
RESULTS = Path("research/results/grouping")
STUDY = "study.json"
RECIPE = "consert"
OFF_FLAGS = ["--set", "length_grouping=false"]
SETTINGS = ("on", "off")
TEST_KEYS = ("delta", "ci", "ci_excludes_0")


def off_folder(root: Path, model: str, domain: str) -> Path:
    return root / "runs" / model / domain


def stored_folder(results: Path, model: str, domain: str, setting: str) -> Path:
    """Where a stored run lies: grouping on is the decision study's ConSERT run."""
    if setting == "on":
        return REPO / decision_study.RESULTS / "runs" / model / domain / RECIPE
    return off_folder(results, model, domain)


def off_argv(work: Path, model: str, domain: str) -> list[str]:
    """The decision runs' ConSERT command with grouping off, writing into `work`."""
    argv = decision_runs.adapt_argv(work, decision_runs.SHARED, model, domain, RECIPE)
    argv[argv.index("--output") + 1] = str(off_folder(work, short(model), domain))
    return [*argv, *OFF_FLAGS]


def train(work: Path) -> None:
    data = work / "data"
    if not (data / "manifest.json").is_file():
        Runner(work, False).run("data", [sys.executable, "-m", "research.experiments.domain_data", "--shared",
                                         str(decision_runs.SHARED), "--out", str(data), "--seed", "0"])
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # as the decision runs: two jobs, one core each
    runner = Runner(work, reuse=True)
    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(runner.run, f"adapt-{short(model)}-{domain}-off", off_argv(work, model, domain))
                       for model in decision_runs.MODELS for domain in DOMAINS]:
            future.result()


def store(work: Path, results: Path) -> None:
    check_pools(work, REPO / decision_study.POOLS, DOMAINS)
    for model in map(short, decision_runs.MODELS):
        for domain in DOMAINS:
            target = off_folder(results, model, domain)
            if store_run(off_folder(work, model, domain), target):
                job_record(work / "jobs" / f"adapt-{model}-{domain}-off.json", target / "job.json")
    print(f"stored in {results}")


def study(results: Path, resamples: int = 1000) -> dict[str, Any]:
    """Each model × domain × setting: the kept step, the default decision, the test Δ with its paired CI."""
    pools = {d: decision_study.load_pool(REPO / decision_study.POOLS / d / "pool.jsonl") for d in DOMAINS}
    first = next(iter(DOMAINS))
    job = json.loads((off_folder(results, short(decision_runs.MODELS[0]), first) / "job.json").read_text())
    # the runner's argv: this machine's interpreter, paths relative to the repository; one domain's → any domain's
    command = re.sub(rf"/{first}(?=/|\s|$)", "/DOMAIN", " ".join(["python", *job["argv"][1:]]))
    out: dict[str, Any] = {"models": {}, "machine": machine_summary(), "command": command}
    for model in map(short, decision_runs.MODELS):
        out["models"][model] = {}
        for setting in SETTINGS:
            cells = {}
            for domain in DOMAINS:
                run = decision_study.load_run(stored_folder(results, model, domain, setting), model, domain, RECIPE)
                if run is None:
                    raise SystemExit(f"{stored_folder(results, model, domain, setting)}: no stored run; --train and "
                                     "--store first")
                cell = domain_stored.cell(run, pools[domain], "sentadapt", resamples)
                cells[domain] = {"step": cell["step"], "decision": cell["decision"],
                                 "test": {key: cell["test"][key] for key in TEST_KEYS}}
            out["models"][model][setting] = cells
    return out


def averages(cells: dict[str, Any]) -> tuple[float, float]:
    """(mean raw test Δ, mean test Δ with the decision applied) over the domains."""
    rows = list(cells.values())
    return sum(r["test"]["delta"] for r in rows) / len(rows), sum(applied_delta(r) for r in rows) / len(rows)


def render(results: dict[str, Any]) -> str:
    lines = ["## Length grouping: on (default) vs off, on the domain suite", "",
             f"Generated by `python -m research.experiments.grouping_suite --study` ({results['machine']}) from the per-pair "
             "outputs in `research/results/grouping/` (grouping off) and the decision study's ConSERT runs in "
             "`research/results/decision/` (grouping on: the same command without `--set length_grouping=false`); "
             "`--render` redraws it. ConSERT with each model's defaults (the tuned-base preset), batch 32, max length "
             "64, 100 steps, dev every 25 steps, seed 42. Each cell: the step the pool's first "
             f"{domain_stored.DEV_PAIRS} pairs (dev.jsonl) keep and its Δ on the test pairs (Spearman × 100 against "
             "the base, paired 95 % CI, * when it excludes 0); decision applied: the default decision on those dev "
             "pairs, keep-base → 0.", "",
             "| model | grouping | " + " | ".join(DOMAINS) + " | avg test Δ | avg, decision applied | used |",
             "|---|---|" + "---:|" * (len(DOMAINS) + 3)]
    for model, settings in results["models"].items():
        for setting, cells in settings.items():
            raw, kept = averages(cells)
            used = sum(cell["decision"] == "use-adapted" for cell in cells.values())
            lines.append(f"| {model} | {setting} | " + " | ".join(
                f"{c['test']['delta']:+.2f} [{c['test']['ci'][0]:+.2f}, {c['test']['ci'][1]:+.2f}]"
                f"{' *' if c['test']['ci_excludes_0'] else ''}" for c in cells.values())
                + f" | {raw:+.2f} | {kept:+.2f} | {used} of {len(cells)} |")
    gaps = ", ".join(f"{model} {averages(s['on'])[0] - averages(s['off'])[0]:+.2f}"
                     for model, s in results["models"].items())
    lines += ["", f"Mean raw test Δ, grouping on minus off: {gaps}. What grouping saves in work (useful token "
              "positions, linear-layer work): `bench/bench_padding.py`, in [bench/README.md](../bench/README.md). "
              "`--set length_grouping=false` turns it off.", "", "```bash",
              "python -m research.experiments.decision_runs --recipes consert   # grouping on",
              "python -m research.experiments.grouping_suite --train             # grouping off",
              "python -m research.experiments.decision_study --store && python -m research.experiments.grouping_suite --store",
              "python -m research.experiments.grouping_suite --study",
              results["command"], "```"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="grouping off on both models × the 4 domains")
    add_study_options(parser, WORK, RESULTS, STUDY)
    args = parser.parse_args()
    os.chdir(REPO)
    if args.train:
        train(args.work)
    if run_study_stages(args, SECTION, STUDY, store, study, render) is not None:
        print(f"wrote the {SECTION} section of {args.doc}")

if __name__ == "__main__":
    main()
