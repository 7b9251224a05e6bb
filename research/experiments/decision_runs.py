"""The runs behind the decision study (research/experiments/decision_study.py): every sentadapt recipe on both shared models and
the four suite domains, with EVERY dev evaluation's per-pair outputs kept on all the pairs no run trains on.

    python -m research.experiments.decision_runs [--work runs/decision] [--parallel 2] [--models ...] [--recipes ...]

Per domain (research/experiments/domain_data.py --seed 0), the pool is dev-200.jsonl + test.jsonl: pairs whose sentences no
run trains on (domain_data.py excludes them from every corpus). Each run gets the pool as its `--dev`, so its
dev_outputs.json holds a cosine per pool pair for the base model and for every evaluated step (25, 50, 75,
100). The decision study then re-draws dev and test sets from the pool (many seeds, 100 or 200 dev pairs),
selects each run's checkpoint on the drawn dev pairs and decides with each rule, and scores the choice on the
drawn test pairs — what `adapt --dev DEV` would have done with that dev set, without training again: the
training of a run does not depend on its dev set (patience never stops these 4-evaluation runs early).

Settings: those of the domain suite (100 steps, dev every 25, max length 64, ConSERT at batch 32, SG-OPT and
CLSR at their recipes' batches, CLSR on the NLI entailment pairs), each recipe's defaults otherwise (the
tuned-base preset). Jobs run `--parallel` at a time at one thread each; `--reuse` skips finished ones.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from research.experiments.domain_data import DOMAINS
from research.experiments.results_suite import REPO, Runner, sentadapt, short

SHARED = Path("../shared")
MODELS = [str(SHARED / "models/all-minilm-l6-v2"), str(SHARED / "models/paraphrase-minilm-l3-v2")]
RECIPES = ("consert", "sg-opt", "clsr")
CLSR_PAIRS = ["nli/allnli.dev.jsonl.gz", "nli/snli.test.jsonl.gz"]
STEPS, EVAL_EVERY, MAX_LENGTH, CONSERT_BATCH = 100, 25, 64, 32


def pool_file(data: Path, domain: str) -> Path:
    """dev-200.jsonl + test.jsonl of a domain, written once."""
    pool = data / domain / "pool.jsonl"
    if not pool.is_file():
        text = "".join((data / domain / name).read_text(encoding="utf-8") for name in ("dev-200.jsonl", "test.jsonl"))
        pool.write_text(text, encoding="utf-8")
    return pool


def run_folder(work: Path, model: str, domain: str, recipe: str) -> Path:
    return work / "runs" / short(model) / domain / recipe


def adapt_argv(work: Path, shared: Path, model: str, domain: str, recipe: str) -> list[str]:
    data = work / "data"
    if recipe == "clsr":
        inputs, sized = [str(shared / "data" / name) for name in CLSR_PAIRS], ["--set", "min_score=4"]
    else:
        inputs, sized = [str(data / domain / "corpus.txt")], ["--max-length", str(MAX_LENGTH)]
        if recipe == "consert":
            sized += ["--batch-size", str(CONSERT_BATCH)]
    return sentadapt("adapt", *inputs, "--recipe", recipe, "--base", model, "--dev", str(pool_file(data, domain)),
                     "--max-steps", str(STEPS), "--eval-every", str(EVAL_EVERY),
                     "--output", str(run_folder(work, model, domain, recipe)), "--overwrite", *sized)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("runs/decision"))
    parser.add_argument("--shared", type=Path, default=SHARED)
    parser.add_argument("--models", help="comma list of model folders (default both shared MiniLMs)")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--parallel", type=int, default=2, help="jobs at a time, one thread each (default 2)")
    parser.add_argument("--reuse", action="store_true", help="skip jobs that finished in an earlier run")
    args = parser.parse_args()
    os.chdir(REPO)
    data = args.work / "data"
    if not (data / "manifest.json").is_file():
        Runner(args.work, False).run("data", [sys.executable, "-m", "research.experiments.domain_data", "--shared",
                                              str(args.shared), "--out", str(data), "--seed", "0"])
    models = args.models.split(",") if args.models else MODELS
    jobs = [(recipe, model, domain) for recipe in args.recipes.split(",") for model in models
            for domain in args.domains.split(",")]
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # inherited by every job: one core each
    runner = Runner(args.work, args.reuse)
    with ThreadPoolExecutor(args.parallel) as pool:
        for future in [pool.submit(runner.run, f"adapt-{short(model)}-{domain}-{recipe}",
                                   adapt_argv(args.work, args.shared, model, domain, recipe))
                       for recipe, model, domain in jobs]:
            future.result()


if __name__ == "__main__":
    main()
