"""LoRA against full fine-tuning on the domain suite (issue 27): all-MiniLM-L6-v2, ConSERT, the four domains.

    python -m research.experiments.lora_suite --train lora-r16       # one setting on the 4 domains
    python -m research.experiments.lora_suite --train lora-r16-all
    python -m research.experiments.lora_suite --store                # the runs' per-pair outputs → research/results/lora (tracked)
    python -m research.experiments.lora_suite --study                # research/results/lora/study.json, then the section
    python -m research.experiments.lora_suite --render               # redraw the section from research/results/lora/study.json

Every setting is the domain suite's ConSERT row (batch 32, max length 64, 100 steps, dev every 25 steps, the
tuned-base preset); LoRA adds `--lora r=16` (alpha 32) and a 10× learning rate (5e-4 vs the preset's 5e-5), the
usual ratio for LoRA: with ~1 % of the weights and B starting at zero, the preset's rate barely moves the adapters.
Full fine-tuning is not trained here: it is the decision study's ConSERT run on all-MiniLM-L6-v2 (the same
command; research/experiments/decision_runs.py), stored in research/results/decision.

Each run gets its domain's pool (dev-200 + test of research/experiments/domain_data.py --seed 0) as `--dev`, so its
dev_outputs.json holds every evaluated step's cosine of every pool pair; the dev set never steers training (four
evaluations: patience never stops a run). `--study` then does what `adapt --dev dev.jsonl` and `sentadapt eval
--pairs test.jsonl` did before issue 41 (item 6), from the stored cosines alone: the step with the best score on the
100 dev pairs (the pool's first 100, dev.jsonl), `adapt`'s default decision on them (the library's `decide` and
`dev_evidence`), and that step's Δ on the test pairs (the pool after dev-200) with its paired 95 % CI.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from research.experiments import decision_study, domain_stored
from research.experiments.decision_runs import pool_file
from research.experiments.domain_data import DOMAINS
from research.experiments.domain_render import applied_delta
from research.experiments.results_suite import REPO, Runner, machine_summary, sentadapt
from research.experiments.stored_runs import add_study_options, check_pools, job_record, run_study_stages, store_run

MODEL = "all-minilm-l6-v2"
RECIPE = "consert"
SECTION = "lora"
WORK = Path("runs/lora")
RESULTS = Path("research/results/lora")
STUDY = "study.json"
SHARED = Path("../shared")
STEPS, EVAL_EVERY, BATCH, MAX_LENGTH = 100, 25, 32, 64  # the domain suite's ConSERT row
FULL = "full"
TEST_KEYS = ("delta", "ci", "ci_excludes_0")  # of a cell's test record (research/experiments/domain_stored.py)
# name → (what it is, adapt flags beyond the domain suite's ConSERT row)
SETTINGS: dict[str, tuple[str, list[str]]] = {
    FULL: ("full fine-tuning (every weight; lr 5e-5, the tuned-base preset)", []),
    "lora-r16": ("LoRA r 16, alpha 32, attention projections (lr 5e-4)",
                 ["--lora", "r=16,alpha=32,targets=attention", "--set", "lr=5e-4"]),
    # every linear layer (the feed-forward ones too): the setting that matched full fine-tuning in QLoRA's study
    "lora-r16-all": ("LoRA r 16, alpha 32, every linear layer (lr 5e-4)",
                     ["--lora", "r=16,alpha=32,targets=all-linear", "--set", "lr=5e-4"]),
}


def stored_run_folder(results: Path, name: str, domain: str) -> Path:
    """Where a setting's stored run lies: full fine-tuning is the decision study's ConSERT run."""
    if name == FULL:
        return REPO / decision_study.RESULTS / "runs" / MODEL / domain / RECIPE
    return results / "runs" / name / domain


def adapt_args(data: str, name: str, domain: str, output: str) -> list[str]:
    """`sentadapt adapt`'s arguments for one setting on one domain (data: the folder domain_data.py wrote)."""
    return ["adapt", f"{data}/{domain}/corpus.txt", "--recipe", RECIPE, "--base", f"{SHARED}/models/{MODEL}",
            "--dev", f"{data}/{domain}/pool.jsonl", "--max-steps", str(STEPS), "--eval-every", str(EVAL_EVERY),
            "--output", output, "--overwrite", "--max-length", str(MAX_LENGTH), "--batch-size", str(BATCH),
            *SETTINGS[name][1]]


def train(name: str, work: Path) -> None:
    """One LoRA setting on the four domains, one job after another (the decision runs' data and pools)."""
    if name == FULL:
        raise SystemExit("full fine-tuning is the decision study's ConSERT run: python -m research.experiments.decision_runs")
    data = work / "data"
    if not (data / "manifest.json").is_file():
        Runner(work, False).run("data", [sys.executable, "-m", "research.experiments.domain_data", "--shared", str(SHARED),
                                         "--out", str(data), "--seed", "0"])
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    runner = Runner(work, reuse=True)
    for domain in DOMAINS:
        pool_file(data, domain)  # dev-200 + test, as the decision runs have it
        output = work / "runs" / name / domain
        runner.run(f"adapt-{name}-{domain}", sentadapt(*adapt_args(str(data), name, domain, str(output))))


def store(work: Path, results: Path) -> None:
    check_pools(work, REPO / decision_study.POOLS, DOMAINS)
    for name in SETTINGS:
        for domain in DOMAINS:
            target = stored_run_folder(results, name, domain)
            if name != FULL and store_run(work / "runs" / name / domain, target):
                job_record(work / "jobs" / f"adapt-{name}-{domain}.json", target / "job.json")
    print(f"stored in {results}")


def trainable_parameters(name: str) -> tuple[int, int]:
    """(trained, total) parameters of the setting's training module, counted on the model itself."""
    from sentadapt import Encoder, lora
    from sentadapt.config.merging import train_config

    encoder = Encoder.load(str(SHARED / "models" / MODEL), device="cpu")
    flags = SETTINGS[name][1]
    spec = flags[flags.index("--lora") + 1] if "--lora" in flags else None
    settings = lora.settings_of(train_config(**lora.lora_flags(spec)))
    if settings is not None:
        lora.attach(encoder, settings)
    return lora.trainable_parameters(encoder)


def stored_names(results: Path) -> list[str]:
    """The settings whose four domains are stored."""
    return [name for name in SETTINGS
            if all((stored_run_folder(results, name, d) / "dev_outputs.json").is_file() for d in DOMAINS)]


def study(results: Path, resamples: int = 1000, parameters: dict[str, tuple[int, int]] | None = None,
          ) -> dict[str, Any]:
    """Every stored setting's cells, as the domain-suite section computes them (research/experiments/domain_stored.py: the
    step dev.jsonl keeps, the default decision, the test Δ with its paired CI); parameters: the trained-parameter
    counts, counted on the model when None."""
    names = stored_names(results)
    pools = {d: decision_study.load_pool(REPO / decision_study.POOLS / d / "pool.jsonl") for d in DOMAINS}
    out: dict[str, Any] = {"settings": {}, "domains": {d: {} for d in DOMAINS}, "machine": machine_summary()}
    for name in names:
        counted = parameters[name] if parameters else trainable_parameters(name)
        out["settings"][name] = {"what": SETTINGS[name][0], "parameters": list(counted)}
        for domain in DOMAINS:
            folder = stored_run_folder(results, name, domain)
            pool = pools[domain]
            run = decision_study.load_run(folder, MODEL, domain, RECIPE)
            job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
            cell = domain_stored.cell(run, pool, "sentadapt", resamples)
            out["domains"][domain][name] = {"step": cell["step"], "dev_delta": cell["dev"]["delta"],
                                            "decision": cell["decision"], "base_test": base_test(run, pool),
                                            "test": {key: cell["test"][key] for key in TEST_KEYS},
                                            "train_seconds": job["seconds"], "peak_rss_mb": job["peak_rss_mb"]}
    return out


def base_test(run: decision_study.Run, pool: decision_study.Pool) -> float:
    return domain_stored.base_row(run, pool)["test"]["value"]


def readme_rows(results: dict[str, Any]) -> list[str]:
    """The README's "What to expect" rows that quote this study (a test keeps them equal)."""
    link = "[recipes](docs/recipes.md#big-bases-on-modest-hardware---lora)"
    lines = []
    for name, what in ((FULL, "ConSERT, tuned-base, 100 steps, domain suite"), ("lora-r16", "ConSERT + LoRA r 16, "
                                                                                             "100 steps")):
        rows = [results["domains"][domain][name] for domain in DOMAINS]
        raw = sum(row["test"]["delta"] for row in rows) / len(rows)
        kept = sum(applied_delta(row) for row in rows) / len(rows)
        used = sum(row["decision"] == "use-adapted" for row in rows)
        lines.append(f"| {what} | all-MiniLM-L6-v2 | {domain_stored.typeset(raw)} | {domain_stored.typeset(kept)} "
                     f"({used} of {len(rows)} used) | {link} |")
    return lines


def render(results: dict[str, Any]) -> str:
    names = list(results["settings"])
    domains = results["domains"]
    lines = [
        f"## LoRA vs full fine-tuning: ConSERT on {MODEL}, the domain suite",
        "",
        "Generated by `python -m research.experiments.lora_suite --study` from the per-pair outputs in `research/results/lora/` and, "
        "for full fine-tuning, the decision study's ConSERT runs in `research/results/decision/` (the same command; "
        f"`--render` redraws it) ({results['machine']}). The domain suite's ConSERT settings (batch {BATCH}, max "
        f"length {MAX_LENGTH}, {STEPS} steps, dev every {EVAL_EVERY}); each run scored its domain's pool at every "
        f"evaluated step, and the table applies what `adapt --dev dev.jsonl` does: the step with the best score on "
        f"the {domain_stored.DEV_PAIRS} dev pairs, `adapt`'s default decision on them. Test Δ: Spearman × 100 on "
        "the held-out test pairs against the base, paired 95 % CI (* when it excludes 0); decision applied: "
        "keep-base → 0. Train time and peak RSS: the runner's wall time and the job's peak RSS, with two jobs "
        "sharing the 2 cores at one thread each.",
        "",
        "| setting | trained parameters | " + " | ".join(f"{d} test Δ" for d in DOMAINS) +
        " | avg test Δ | avg, decision applied | decisions (use) | train time (4 domains) | peak RSS |",
        "|---|---:|" + "---:|" * (len(DOMAINS) + 5),
        "| base model (Spearman × 100) | – | " + " | ".join(
            f"{domains[d][names[0]]['base_test']:.2f}" for d in DOMAINS) + " | – | – | – | – | – |",
    ]
    for name in names:
        rows = [domains[d][name] for d in DOMAINS]
        trained, total = results["settings"][name]["parameters"]
        cells = [f"{r['test']['delta']:+.2f} [{r['test']['ci'][0]:+.2f}, {r['test']['ci'][1]:+.2f}]"
                 f"{' *' if r['test']['ci_excludes_0'] else ''}" for r in rows]
        uses = sum(r["decision"] == "use-adapted" for r in rows)
        lines.append(
            f"| {results['settings'][name]['what']} | {trained:,} of {total:,} ({100 * trained / total:.1f} %) | "
            + " | ".join(cells) + f" | {sum(r['test']['delta'] for r in rows) / len(rows):+.2f} | "
            f"{sum(applied_delta(r) for r in rows) / len(rows):+.2f} | {uses} of {len(rows)} | "
            f"{sum(r['train_seconds'] for r in rows) / 60:.1f} min | "
            f"{max(r['peak_rss_mb'] for r in rows) / 1000:.2f} GB |")
    data = "runs/decision/data"
    lines += ["", "```bash", "python -m research.experiments.decision_runs --recipes consert   # full fine-tuning",
              *(f"python -m research.experiments.lora_suite --train {name}" for name in names if name != FULL),
              "python -m research.experiments.decision_study --store && python -m research.experiments.lora_suite --store",
              "python -m research.experiments.lora_suite --study",
              *("python -m sentadapt " + " ".join(adapt_args(data, name, "DOMAIN", f"runs/lora/runs/{name}/DOMAIN"))
                for name in names if name != FULL),
              "```"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", choices=[name for name in SETTINGS if name != FULL],
                        help="train one setting on the 4 domains")
    add_study_options(parser, WORK, RESULTS, STUDY)
    args = parser.parse_args()
    os.chdir(REPO)
    if args.train:
        train(args.train, args.work)
    text = run_study_stages(args, SECTION, STUDY, store, study, render)
    if text is not None:
        print(text)

if __name__ == "__main__":
    main()
