"""The results suite's sections of research/results.md (the 7 STS tasks, the papers' gains, ConSERT's curves, speed)
from tracked per-pair outputs (issue 41, item 6).

    python -m research.experiments.suite_stored --run [--reuse]   # every job of research/experiments/results_suite, then --store
    python -m research.experiments.suite_stored --store           # what the studies read of runs/suite → research/results/suite
    python -m research.experiments.suite_stored --render          # redraw the section from research/results/suite alone

`--run` trains what research/experiments/results_suite.py trains (the same commands: each recipe and peer a subprocess with
its own peak RSS), but scores each model with `--score`: the library's `sentadapt.evaluate` on the 7 STS test sets
(and STS-B dev for a model that no adapt run scored on it), keeping every pair's cosine. `--store` keeps, per
model, those cosines rounded to 6 decimals; per adapt run, its dev_outputs.json (each evaluated step's STS-B dev
cosines) and metrics.json; per job, its command, wall time and peak RSS; the gold scores once; and the speed
benchmarks' JSON. `--render` recomputes every score from the cosines and the gold scores with the library's STS
task (Spearman × 100, one correlation over a task's pairs) and draws the tables with research/experiments/results_render.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from tools.doc_sections import write_atomically, write_section

from research.experiments.results_render import render as render_document
from research.experiments.results_suite import REPO, Suite, full_plan
from research.experiments.stored_runs import rounded

SECTION = "suite"
RESULTS = Path("research/results/suite")
WORK = Path("runs/suite")
DEV_TASK = "stsb"  # the selection set: STS-B dev
COMMAND = "python -m research.experiments.suite_stored --run"
NOTE = ("The runs were made again on 2026-11-27 with the code of that day, one job at a time on a quiet machine: the "
        "first edition (2026-11-21) kept no per-pair outputs and ran before the tuned-base preset existed, so its "
        "sentadapt rows had the papers' settings (`--preset paper` today); these have each recipe's defaults for a "
        "sentence-tuned base, which the checkpoint lines name. The peers' and the base rows' task scores are the first "
        "edition's. Scores do not depend on load (the runs are deterministic); train times and the speed "
        "section do.")
SOURCE = ("every score is recomputed from the per-pair cosines tracked in `research/results/suite/` "
          "(`python -m research.experiments.suite_stored --render` redraws this section without training; each job's command, "
          "wall time and peak RSS are in `research/results/suite/suite.json`)")


# ---------------------------------------------------------------------------------------------- scoring (a job)
def score(model: str, data_dir: Path, tasks: list[str], with_dev: bool) -> dict[str, Any]:
    """Every pair's cosine of `model` on the STS test sets (and STS-B dev), as `sentadapt eval` computes them: the
    model loaded once, each split scored by the library's STS evaluator."""
    from sentadapt import Encoder
    from sentadapt.evaluation.sts import StsEvaluator

    started = time.perf_counter()
    encoder = Encoder.load(model, device="cpu")
    test = StsEvaluator.from_sts(tasks, "test", data_dir, resamples=0)(encoder, batch_size=128)
    record: dict[str, Any] = {"model": model, "pooling": test.pooling,
                              "test": {result.task: result.outputs["cosine"].tolist() for result in test.tasks}}
    if with_dev:
        dev = StsEvaluator.from_sts([DEV_TASK], "dev", data_dir, resamples=0)(encoder, batch_size=128)
        record["dev"] = dev.tasks[0].outputs["cosine"].tolist()
    record["seconds"] = time.perf_counter() - started
    return rounded(record)


def gold_scores(data_dir: Path, tasks: list[str]) -> dict[str, list[float]]:
    """The gold score of every pair, in the order the tasks score them (test sets, then STS-B dev)."""
    from sentadapt.evaluation.tasks import load_task

    gold = {task: list(load_task(task, "test", data_dir).scores) for task in tasks}
    gold[f"{DEV_TASK}-dev"] = list(load_task(DEV_TASK, "dev", data_dir).scores)
    return gold


class StoredSuite(Suite):
    """research/experiments/results_suite.Suite whose evaluations keep every pair's cosine (`--score` jobs)."""

    def evaluate(self, tag: str, model: Path | str, dev: float | None = None) -> dict[str, Any]:
        out = self.work / "scores" / f"{tag}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        job = self.runner.run(f"score-{tag}", [
            sys.executable, "-m", "research.experiments.suite_stored", "--score", str(model), "--out", str(out),
            "--data-dir", str(self.data_dir), "--tasks", ",".join(self.plan.tasks),
            *(["--dev"] if dev is None else [])])
        return {"scores": str(out), "eval_seconds": job.seconds}

    def adapt(self, tag: str, recipe: str, model: str, corpus: list[Path], *extra: str) -> dict[str, Any]:
        row = super().adapt(tag, recipe, model, corpus, *extra)
        return {**row, "run": str(self.work / tag)}

    def run(self, jobs: tuple[str, ...] = ("quality", "curves", "speed")) -> None:
        super().run(jobs)


# ---------------------------------------------------------------------------------------------- store
ROW_KEYS = ("train_seconds", "peak_rss_mb", "command", "sentences_per_s")


def store(work: Path, results: Path) -> None:
    """What `--render` reads of the suite in `work` (its results.json and the files it names) → `results`."""
    suite = json.loads((work / "results.json").read_text(encoding="utf-8"))
    data_dir = Path(suite["data_dir"])
    (results / "scores").mkdir(parents=True, exist_ok=True)
    (results / "runs").mkdir(parents=True, exist_ok=True)
    write_atomically(results / "gold.json", json.dumps(rounded(gold_scores(data_dir, suite["plan"]["tasks"]))))

    def keep(row: dict[str, Any]) -> dict[str, Any]:
        tag = Path(row["scores"]).stem
        shutil.copy(row["scores"], results / "scores" / f"{tag}.json")
        kept = {key: row[key] for key in ROW_KEYS if row.get(key) is not None}
        kept["scores"] = tag
        if "run" in row:
            run = Path(row["run"])
            (results / "runs" / tag).mkdir(parents=True, exist_ok=True)
            outputs = json.loads((run / "dev_outputs.json").read_text(encoding="utf-8"))
            write_atomically(results / "runs" / tag / "dev_outputs.json", json.dumps(rounded(outputs)))
            shutil.copy(run / "metrics.json", results / "runs" / tag / "metrics.json")
            kept["run"] = tag
        return kept

    stored: dict[str, Any] = {key: suite[key] for key in ("plan", "machine", "finished", "seconds") if key in suite}
    stored["job_seconds"] = sum(json.loads(path.read_text())["seconds"] for path in (work / "jobs").glob("*.json"))
    stored["quality"] = {model: {key: keep(row) for key, row in rows.items()}
                         for model, rows in suite["quality"].items()}
    stored["curves"] = {model: {"base": keep(curves["base"]),
                                "few_shot": {size: keep(row) for size, row in curves["few_shot"].items()},
                                "temperature": {t: keep(row) for t, row in curves["temperature"].items()}}
                        for model, curves in suite["curves"].items()}
    stored["speed"] = suite["speed"]
    write_atomically(results / "suite.json", json.dumps(stored, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------- render
class Scorer:
    """Scores recomputed from stored cosines with the library's STS task (the gold read once)."""

    def __init__(self, results: Path) -> None:
        from sentadapt.data.pair_files import ScoredPairs

        self.results = results
        self.tasks = {}
        for name, scores in json.loads((results / "gold.json").read_text(encoding="utf-8")).items():
            pairs = ScoredPairs(source=name)
            for value in scores:
                pairs.append("", "", float(value), name)
            self.tasks[name] = pairs

    def spearman(self, task: str, cosines: list[float]) -> float:
        from sentadapt.evaluation.sts import score_task

        return score_task(task, self.tasks[task], cosines, "all").metrics["spearman"]

    def dev(self, cosines: list[float]) -> float:
        return self.spearman(f"{DEV_TASK}-dev", cosines)

    def row(self, kept: dict[str, Any]) -> dict[str, Any]:
        """results_suite's row (test scores, average, dev, pooling; an adapt run's selection) from stored outputs."""
        scores = json.loads((self.results / "scores" / f"{kept['scores']}.json").read_text(encoding="utf-8"))
        tasks = {task: self.spearman(task, cosines) for task, cosines in scores["test"].items()}
        row = {**kept, "tasks": tasks, "average": sum(tasks.values()) / len(tasks), "pooling": scores["pooling"]}
        if "run" in kept:
            row.update(self.selection(kept["run"]))
            row["dev"] = row["dev_best"]
        else:
            row["dev"] = self.dev(scores["dev"])
        return row

    def selection(self, run: str) -> dict[str, Any]:
        """An adapt run's dev scores: the base's and the published step's (the step as adapt recorded it)."""
        folder = self.results / "runs" / run
        outputs = json.loads((folder / "dev_outputs.json").read_text(encoding="utf-8"))
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        step = metrics["best_step"]
        base = self.dev(outputs["base"][DEV_TASK]["cosine"])
        best = self.dev(outputs["evaluations"][str(step)][DEV_TASK]["cosine"])
        return {"dev_base": base, "dev_best": best, "best_step": step, "improved": best > base,
                "preset": metrics.get("preset")}


def rebuilt(results: Path) -> dict[str, Any]:
    """results_suite's results.json, every score recomputed from the stored outputs."""
    stored = json.loads((results / "suite.json").read_text(encoding="utf-8"))
    scorer = Scorer(results)
    rebuilt = {**stored, "note": NOTE, "source": SOURCE}
    rebuilt["quality"] = {model: {key: scorer.row(row) for key, row in rows.items()}
                          for model, rows in stored["quality"].items()}
    rebuilt["curves"] = {model: {"base": scorer.row(curves["base"]),
                                 "few_shot": {size: scorer.row(row) for size, row in curves["few_shot"].items()},
                                 "temperature": {t: scorer.row(row) for t, row in curves["temperature"].items()}}
                         for model, curves in stored["curves"].items()}
    return rebuilt


def section(results: Path) -> str:
    """The suite's part of research/results.md (its header to its speed tables; the footer is the doc's own)."""
    text = render_document(rebuilt(results), COMMAND)
    return text[:text.index("\n## GPU")].removeprefix("# Results\n").strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true", help="train and score every job, then --store and --render")
    parser.add_argument("--reuse", action="store_true", help="--run: skip jobs that finished in an earlier run")
    parser.add_argument("--store", action="store_true", help="keep what --render reads of WORK in RESULTS")
    parser.add_argument("--render", action="store_true", help="redraw the section from RESULTS")
    parser.add_argument("--score", help="(a job) score this model; write its cosines to --out")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dev", action="store_true", help="--score: STS-B dev too")
    parser.add_argument("--tasks", default="sts12,sts13,sts14,sts15,sts16,stsb,sickr")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data/sts"))
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--doc", type=Path, default=Path("research/results.md"))
    args = parser.parse_args()
    if args.score:
        record = score(args.score, args.data_dir, args.tasks.split(","), args.dev)
        write_atomically(args.out, json.dumps(record) + "\n")
        return
    os.chdir(REPO)  # ../shared and the logged commands are relative to the repository
    if args.run:
        suite = StoredSuite(full_plan(), args.work, args.data_dir, args.reuse)
        suite.results["data_dir"] = str(args.data_dir)
        suite.run()
    if args.run or args.store:
        store(args.work, args.results)
    if args.run or args.store or args.render:
        write_section(args.doc, SECTION, section(args.results))
        print(f"wrote the {SECTION} section of {args.doc}")


if __name__ == "__main__":
    main()
