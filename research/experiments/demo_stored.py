"""`make demo`'s row of README.md ("What to expect"), from the demo's stored per-pair outputs.

    make demo && python -m research.experiments.demo_stored --store   # runs/demo → research/results/demo (tracked)
    python -m research.experiments.demo_stored                        # prints the README row from the stored outputs

Stored: the run's dev_outputs.json (the base's and every evaluated step's cosine of each dev pair) and metrics.json,
and test_outputs.json: each model's cosine of each pair of examples/it-support-test.tsv. The row recomputes the
held-out Δ with its paired CI (`sentadapt eval`'s: 1,000 resamples, the file's name as the task seed) and the dev Δ
with its risk (the default decision: the best of the run's evaluations, paid for by max-T) from those outputs alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

RESULTS = Path("research/results/demo")
DEV, TEST = Path("examples/it-support-dev.tsv"), Path("examples/it-support-test.tsv")
BASE = "sentence-transformers/all-MiniLM-L6-v2"
LINK = "[usage](docs/usage.md#the-demo)"


def store(run: Path, results: Path) -> None:
    """Copy the run's records and score the test pairs with the base and the run's model (their cosines only)."""
    from sentadapt.evaluation.sts import StsEvaluator
    from sentadapt.model.encoder import Encoder

    results.mkdir(parents=True, exist_ok=True)
    for name in ("dev_outputs.json", "metrics.json"):
        shutil.copy(run / name, results / name)
    evaluator = StsEvaluator.from_pairs_file(TEST, resamples=0)
    outputs = {name: evaluator.outputs_of(evaluator(Encoder.load(model, device="cpu")))
               for name, model in (("base", BASE), ("adapted", str(run)))}
    (results / "test_outputs.json").write_text(json.dumps(outputs) + "\n", encoding="utf-8")


def figures(results: Path = RESULTS) -> dict[str, Any]:
    """The test Δ with its CI and the dev Δ with its risk, recomputed from the stored outputs."""
    from sentadapt.decision.rule import DecisionRule, decide
    from sentadapt.evaluation.evaluator import dev_evidence
    from sentadapt.evaluation.sts import StsEvaluator

    test = json.loads((results / "test_outputs.json").read_text(encoding="utf-8"))
    held_out = StsEvaluator.from_pairs_file(TEST).compare_outputs(test["base"], test["adapted"])
    dev = json.loads((results / "dev_outputs.json").read_text(encoding="utf-8"))
    metrics = json.loads((results / "metrics.json").read_text(encoding="utf-8"))
    evaluator = StsEvaluator.from_pairs_file(DEV)
    steps = sorted(dev["evaluations"], key=int)
    chosen = steps.index(str(metrics["best_step"]))
    options = [dev["evaluations"][step] for step in steps]
    delta = evaluator.compare_outputs(dev["base"], options[chosen])
    evidence = dev_evidence(evaluator, dev["base"], options, chosen)
    decision = decide(delta.value, delta.interval, DEV.name, evidence, DecisionRule())
    return {"test": held_out, "dev": delta.value, "risk": decision.risk, "decision": decision.decision,
            "steps": metrics["steps"]}


def readme_row(results: Path = RESULTS) -> str:
    found = figures(results)
    test = found["test"]
    low, high = test.interval
    return (f"| `make demo`: ConSERT, tuned-base, {found['steps']} steps, IT-support examples | all-MiniLM-L6-v2 | "
            f"{test.value:+.2f} [{low:+.2f}, {high:+.2f}] | {found['decision']} (dev {found['dev']:+.2f}, risk "
            f"{found['risk']:.2f}) | {LINK} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", action="store_true", help="copy runs/demo's outputs into RESULTS first")
    parser.add_argument("--run", type=Path, default=Path("runs/demo"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.store:
        store(args.run, args.results)
    print(readme_row(args.results))


if __name__ == "__main__":
    main()
