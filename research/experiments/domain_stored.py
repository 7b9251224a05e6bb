"""The domain-suite section from tracked per-pair outputs (issue 41, item 6): no training, no model, no ../shared.

    python -m research.experiments.decision_runs && python -m research.experiments.peer_runs   # the runs (runs/decision)
    python -m research.experiments.decision_study --store                             # their outputs → research/results/decision
    python -m research.experiments.domain_stored --study                               # research/results/decision/domain-suite.json
    python -m research.experiments.domain_stored --render                              # redraw the section from it

Every sentadapt recipe (research/experiments/decision_runs.py) and sentence-transformers peer (research/experiments/peer_runs.py)
scored its domain's pool (dev-200 + test) at every evaluated step. Each table cell is what the domain suite measured
with `adapt --dev dev.jsonl` and `sentadapt eval --pairs test.jsonl --pairs test-pairclass.tsv`, recomputed from
those cosines with the library's functions: a recipe keeps the step with the best score on the 100 dev pairs (the
pool's first 100, dev.jsonl), a peer its last step; `adapt`'s default decision on the dev pairs (a peer's one step
weighed as one option); the kept step's Δ on the test pairs (the pool after dev-200) with its paired 95 % CI, and
its average-precision Δ on the test pairs read as pair classification (gold ≥ 4 → 1, ≤ 1.5 → 0, the middle dropped,
as research/experiments/domain_data.py writes test-pairclass.tsv). research/experiments/domain_render.py draws the tables.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
from sentadapt.data.pair_files import LabelledPairs
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.evaluation.pairclass import PairClassificationTask
from tools.doc_sections import write_atomically, write_section

from research.experiments import decision_study
from research.experiments.domain_data import DOMAINS
from research.experiments.domain_render import render
from research.experiments.make_eval_tasks import NEGATIVE_MAX, POSITIVE_MIN
from research.experiments.results_suite import REPO, machine_summary

SECTION = "domain-suite"
STUDY = "domain-suite.json"
MANIFEST = "manifest.json"  # research/experiments/domain_data.py's counts of the split, stored beside the runs
DEV_PAIRS, DEV_POOL = 100, 200  # dev.jsonl: the pool's first 100 pairs; test.jsonl: the pool after dev-200
PLAN = {"steps": 100, "batch_size": 32, "max_length": 64, "eval_every": 25, "dev_size": DEV_PAIRS}
DEFAULT_RULE = "risk ≤ 0.20 (default)"
TEST_NAME = "test.jsonl"  # keys the bootstrap resamples: the CIs `sentadapt eval --pairs test.jsonl` gives
PLAIN_CI = "strict (95 % CI excludes 0)"  # one candidate's plain CI: the reference rule's test
AUTO, REFERENCE = "auto", "best-dev"  # research/experiments/domain_render.py's row names
AUTO_SECTION = "domain-suite-auto"
AUTO_NOTE = ("`sentadapt auto` is `adapt --recipe auto` with ConSERT, SG-OPT and CLSR as its candidates (the "
             "single-recipe rows here ARE its candidates, same settings, steps and seed): today's default rule, the "
             "candidate with the largest dev Δ used when the risk that it is no better than the base is at most 0.20, "
             "that risk paying for the choice among every checkpoint of every candidate (docs/decision.md). The "
             "reference row takes the largest dev Δ and uses it when its plain 95 % CI excludes 0: the multiple "
             "comparison not paid for. Where nothing is used, a row's raw test Δ is the best-dev candidate's. False "
             "use: the decision said use and the held-out test Δ is ≤ 0.")
COMMAND = "python -m research.experiments.domain_stored --study"
NOTE = ("The runs were made again on 2026-11-27 with the code of that day (the section's first edition, 2026-11-23, "
        "kept no per-pair outputs). Two jobs at a time at one thread each, beside other work on the same 2 cores: "
        "train times are upper bounds and include each run's dev evaluations of the pool (1,000-odd pairs, 5 times); "
        "scores do not depend on load (the runs are deterministic). Every sentadapt, SimCSE and CT cell reproduces "
        "the first edition's test Δ to the hundredth but one (all-MiniLM-L6-v2 CLSR forums, +0.10 then); TSDAE did "
        "not: its decoder's new cross-attention layers were initialised from an unseeded generator (bench/peers.py "
        "seeds them since), and the first edition's TSDAE averaged −20.80 (L6) and −5.91 (L3). The decision is "
        "today's default, risk ≤ 0.20 (the first edition used the strict rule).")


def pairclass_task(pool: decision_study.Pool, rows: np.ndarray) -> tuple[PairClassificationTask, np.ndarray]:
    """The test pairs read as pair classification, and the pool rows they are."""
    kept = np.array([i for i in rows if pool.gold[i] >= POSITIVE_MIN or pool.gold[i] <= NEGATIVE_MAX], dtype=int)
    pairs = LabelledPairs([pool.first[i] for i in kept], [pool.second[i] for i in kept],
                          [int(pool.gold[i] >= POSITIVE_MIN) for i in kept], "test-pairclass.tsv")
    return PairClassificationTask("test-pairclass.tsv", pairs), kept


def delta_record(evaluator: Evaluator, name: str, rows: np.ndarray, base: np.ndarray,
                 other: np.ndarray) -> dict[str, Any]:
    """The other model's Δ over the base on `rows` with its paired CI, as `sentadapt eval --json` records one."""
    first, second = ({name: {"cosine": cosines[rows].tolist()}} for cosines in (base, other))
    delta = evaluator.compare_outputs(first, second)
    return {"delta": delta.value, "ci": list(delta.interval) if delta.interval else None,
            "ci_excludes_0": delta.significant}


def cell(run: decision_study.Run, pool: decision_study.Pool, kind: str, resamples: int) -> dict[str, Any]:
    """One row × domain: the kept step, the decision, the test and AP Δs."""
    dev = decision_study.DevSet(pool, np.arange(DEV_PAIRS), resamples)
    test = np.arange(DEV_POOL, len(pool))
    chosen = decision_study.single_run(run, pool, dev, test)
    adapted = run.steps[chosen["step"]]
    sts = decision_study.DevSet(pool, test, resamples, name=TEST_NAME)
    task, labelled = pairclass_task(pool, test)
    ap = Evaluator([task], resamples=resamples)
    return {"kind": kind, "step": chosen["step"], "decision": chosen["decisions"][DEFAULT_RULE],
            "dev": {"value": dev.score(adapted), "delta": chosen["dev_change"]},
            "test": {"value": sts.score(adapted), **delta_record(sts.evaluator, TEST_NAME, test, run.base, adapted)},
            "test_ap": {"value": ap.from_outputs({task.name: {"cosine": adapted[labelled].tolist()}}).average,
                        **delta_record(ap, task.name, labelled, run.base, adapted)}}


def selection_rows(runs: list[decision_study.Run], pool: decision_study.Pool, rows: dict[str, Any],
                   resamples: int) -> dict[str, Any]:
    """`adapt --recipe auto` over the three recipes' runs (decision_study.auto_run: each candidate's kept step, then
    the default rule's choice with the choice among candidates paid for) and the reference rule (the largest dev Δ,
    used when its plain 95 % CI excludes 0). A row shows the chosen candidate's scores, or the best-dev candidate's
    when nothing is used (what would have shipped)."""
    dev = decision_study.DevSet(pool, np.arange(DEV_PAIRS), resamples)
    test = np.arange(DEV_POOL, len(pool))
    auto = decision_study.auto_run(runs, pool, dev, test)
    best = auto["best"]
    reference = best if rows[best]["dev"]["delta"] > 0 and decision_study.single_run(
        next(run for run in runs if run.recipe == best), pool, dev, test)["decisions"][PLAIN_CI] == "use-adapted" \
        else None
    seconds = sum(rows[run.recipe]["train_seconds"] for run in runs)
    peak = max(rows[run.recipe]["peak_rss_mb"] for run in runs)

    def row(chosen: str | None) -> dict[str, Any]:
        source = rows[chosen or best]
        return {"kind": "selection", "train_seconds": seconds, "peak_rss_mb": peak, "test": source["test"],
                "test_ap": source["test_ap"], "dev": source["dev"], "chosen": chosen,
                "decision": "use-adapted" if chosen else "keep-base"}

    return {AUTO: row(auto["chosen"][DEFAULT_RULE]), REFERENCE: row(reference)}


def points(run: decision_study.Run, pool: decision_study.Pool) -> tuple[int, float, float]:
    """(kept step, test Δ, AP Δ) without a bootstrap (none of the three depends on one): what the staleness tests
    recompute from the stored outputs."""
    test = np.arange(DEV_POOL, len(pool))
    task, labelled = pairclass_task(pool, test)
    step = decision_study.selected_step(run, decision_study.DevSet(pool, np.arange(DEV_PAIRS), 0))
    adapted = run.steps[step]
    return (step, decision_study.test_change(pool, test, run.base, adapted),
            delta_record(Evaluator([task], resamples=0), task.name, labelled, run.base, adapted)["delta"])


def point_values(results: Path) -> dict[tuple[str, str, str], tuple[int, float, float]]:
    """(model, domain, row) → `points` of every stored run."""
    values = {}
    for model in decision_study.MODELS:
        for domain in DOMAINS:
            pool = decision_study.load_pool(REPO / decision_study.POOLS / domain / "pool.jsonl")
            for name in (*decision_study.RECIPES, *decision_study.PEERS):
                run = decision_study.load_run(results / "runs" / model / domain / name, model, domain, name)
                if run is not None:
                    values[(model, domain, name)] = points(run, pool)
    return values


def base_row(run: decision_study.Run, pool: decision_study.Pool) -> dict[str, Any]:
    dev = decision_study.DevSet(pool, np.arange(DEV_PAIRS), 0)
    test = decision_study.DevSet(pool, np.arange(DEV_POOL, len(pool)), 0)
    task, labelled = pairclass_task(pool, np.arange(DEV_POOL, len(pool)))
    ap = Evaluator([task], resamples=0).from_outputs({task.name: {"cosine": run.base[labelled].tolist()}}).average
    return {"dev": {"value": dev.score(run.base)}, "test": {"value": test.score(run.base)}, "test_ap": {"value": ap}}


def command_of(argv: list[str]) -> str:
    """A stored job's command as a user types it: `python -m ...`, paths relative to the repository."""
    text = " ".join(["python", *argv[1:]])
    return re.sub(r"/\S*?/(runs)/", lambda match: f"{match[1]}/", text)


def study(results: Path, resamples: int = 1000) -> dict[str, Any]:
    models: dict[str, dict[str, Any]] = {}
    seconds = 0.0
    for model in decision_study.MODELS:
        for domain in DOMAINS:
            pool = decision_study.load_pool(REPO / decision_study.POOLS / domain / "pool.jsonl")
            rows: dict[str, Any] = {}
            recipes: list[decision_study.Run] = []  # auto's candidates, in RECIPES order
            for name in (*decision_study.RECIPES, *decision_study.PEERS):
                folder = results / "runs" / model / domain / name
                run = decision_study.load_run(folder, model, domain, name)
                if run is None:
                    continue
                if name in decision_study.RECIPES:
                    recipes.append(run)
                job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
                if "base" not in rows:  # every run of a model × domain holds the same base cosines
                    rows["base"] = base_row(run, pool)
                rows[name] = {**cell(run, pool, "peer" if name in decision_study.PEERS else "sentadapt", resamples),
                              "train_seconds": job["seconds"], "peak_rss_mb": job["peak_rss_mb"],
                              "command": command_of(job["argv"])}
                seconds += job["seconds"]
            if len(recipes) == len(decision_study.RECIPES):
                rows.update(selection_rows(recipes, pool, rows, resamples))
            if rows:
                models.setdefault(model, {})[domain] = {"rows": rows, "eval": {"command": COMMAND}}
    manifest = json.loads((results / MANIFEST).read_text(encoding="utf-8"))
    return {"variants": {"default": {"plan": PLAN, "models": models,
                                     "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}},
            "data": {"manifest": manifest,
                     "command": "python -m research.experiments.domain_data --shared ../shared --out runs/decision/data "
                                "--seed 0"},
            "machine": machine_summary(), "job_seconds": seconds, "note": NOTE}


def average_delta(data: dict[str, Any], model: str, name: str, applied: bool = False) -> float:
    """A row's test Δ averaged over the domains (applied: a keep-base decision counts 0)."""
    rows = [entry["rows"][name] for entry in data["variants"]["default"]["models"][model].values()]
    return float(np.mean([row["test"]["delta"] if not applied or row["decision"] == "use-adapted" else 0.0
                          for row in rows]))


def typeset(value: float) -> str:
    """A signed figure as the README prints it (a true minus sign)."""
    return f"{value:+.2f}".replace("-", "−")


def readme_rows(data: dict[str, Any]) -> list[str]:
    """The README's "What to expect" rows that quote this study (a test keeps them equal)."""
    l6, l3 = decision_study.MODELS
    peers = " / ".join(typeset(average_delta(data, l6, name)) for name in decision_study.PEERS)
    recipes = " / ".join(typeset(average_delta(data, l3, name)) for name in decision_study.RECIPES)
    link = "[recipes](docs/recipes.md#which-defaults-apply)"
    return [f"| sentence-transformers SimCSE / CT / TSDAE, 100 steps | all-MiniLM-L6-v2 | {peers} | — | {link} |",
            f"| ConSERT / SG-OPT / CLSR, tuned-base, 100 steps | paraphrase-MiniLM-L3-v2 | {recipes} | — | {link} |"]


def only(data: dict[str, Any], kinds: set[str]) -> dict[str, Any]:
    """The study with only the rows of these kinds (the domain suite: recipes and peers; the auto section: recipes
    and the selections)."""
    models = {model: {domain: {**entry, "rows": {name: row for name, row in entry["rows"].items()
                                                 if name == "base" or row["kind"] in kinds}}
                      for domain, entry in domains.items()}
              for model, domains in data["variants"]["default"]["models"].items()}
    return {**data, "variants": {"default": {**data["variants"]["default"], "models": models}},
            **({"auto_note": AUTO_NOTE} if "selection" in kinds else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=decision_study.RESULTS)
    parser.add_argument("--study", action="store_true", help=f"derive RESULTS/{STUDY} from the stored runs")
    parser.add_argument("--render", action="store_true", help=f"redraw the section from RESULTS/{STUDY}")
    parser.add_argument("--doc", type=Path, default=Path("research/results.md"))
    args = parser.parse_args()
    results = REPO / args.results
    if args.study:
        write_atomically(results / STUDY, json.dumps(study(results), indent=1) + "\n")
    if args.study or args.render:
        data = json.loads((results / STUDY).read_text(encoding="utf-8"))
        doc = REPO / args.doc if not args.doc.is_absolute() else args.doc
        write_section(doc, SECTION, render(only(data, {"sentadapt", "peer"}), COMMAND))
        write_section(doc, AUTO_SECTION, render(only(data, {"sentadapt", "selection"}), COMMAND))
        print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
