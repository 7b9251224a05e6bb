"""The eval-tasks section of research/results.md from tracked per-unit outputs (issue 41, item 6).

    python -m research.experiments.eval_tasks_stored --run      # build the tasks from ../shared, score both base models, store
    python -m research.experiments.eval_tasks_stored --render   # redraw the section from research/results/eval-tasks/ alone

`--run` builds the pair-classification, reranking and retrieval tasks (research/experiments/make_eval_tasks.py) and scores each
shared base model on them with the library's Evaluator, one per file as `sentadapt eval --pairs/--rerank/--retrieval`
builds them, and keeps every task's per-unit outputs (a pair's cosine and label, a query's metric values) in
research/results/eval-tasks/MODEL.json, rounded to 6 decimals. `--render` rebuilds each task's metrics and bootstrap CIs
from those outputs alone — a `StoredTask` computes what the task type computes from its outputs, with the same
bootstrap keys — and draws the tables with research/experiments/results_render.py.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sentadapt.data.pair_files import LabelledPairs
from sentadapt.evaluation import weighted_stats
from sentadapt.evaluation.contract import EvalTask, Outputs
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.evaluation.pairclass import PairClassificationTask
from tools.doc_sections import write_atomically, write_section

from research.experiments.results_render import eval_tasks_section
from research.experiments.results_suite import REPO, machine_summary
from research.experiments.stored_runs import rounded

RESULTS = Path("research/results/eval-tasks")
WORK = Path("runs/eval-tasks")
SHARED = Path("../shared")
SECTION = "eval-tasks"
MODELS = ("all-minilm-l6-v2", "paraphrase-minilm-l3-v2")
FILES = (("pairclass/sickr.test.tsv", "pair-classification"), ("pairclass/stsb.test.tsv", "pair-classification"),
         ("rerank/snli.test.jsonl", "reranking"), ("retrieval/sts-nli", "retrieval"))
OPTIONS = {"pair-classification": "--pairs", "reranking": "--rerank", "retrieval": "--retrieval"}
METRICS = {"pair-classification": PairClassificationTask.metric_names, "reranking": ("map", "mrr@10", "ndcg@10"),
           "retrieval": ("ndcg@10", "mrr@10", "recall@10", "recall@100", "map@100")}


class StoredTask(EvalTask):
    """A task rebuilt from its stored per-unit outputs: the metrics and bootstrap replicates its type computes from
    them (pair classification: from the cosines and the labels; reranking and retrieval: the mean of each query's
    values), under its own name (the bootstrap's key)."""

    title = "stored"
    description = "stored per-unit outputs"
    metric_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, record: dict[str, Any]) -> None:
        self.kind = record["type"]  # type: ignore[misc]
        self.metric_names = METRICS[self.kind]  # type: ignore[misc]
        self.unit_name = "pairs" if self.kind == "pair-classification" else "queries"  # type: ignore[misc]
        super().__init__(name, record["source"])
        self._units = record["units"]
        self.pairs: PairClassificationTask | None = None
        if self.kind == "pair-classification":
            labels = record["labels"]
            blank = [""] * len(labels)
            self.pairs = PairClassificationTask(name, LabelledPairs(blank, blank, labels, record["source"]))

    @classmethod
    def sniff(cls, path: Path) -> bool:
        return False

    @classmethod
    def read(cls, path: Path, split: str = "test") -> EvalTask:
        raise NotImplementedError("a stored task is built from its record")

    @property
    def units(self) -> int:
        return self._units

    def texts(self) -> list[str]:
        return []

    def outputs(self, table: Any) -> Outputs:
        raise NotImplementedError("a stored task has its outputs already")

    def metrics(self, outputs: Outputs) -> tuple[dict[str, float], dict[str, Any]]:
        if self.pairs is not None:
            return self.pairs.metrics(outputs)
        return {name: 100 * float(np.mean(outputs[name])) for name in self.metric_names}, {}

    def resampled(self, outputs: Outputs) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
        if self.pairs is not None:
            return self.pairs.resampled(outputs)
        return {name: (lambda counts, values=outputs[name]: 100 * weighted_stats.weighted_mean(counts, values))
                for name in self.metric_names}


def task_record(task: Any, result: Any) -> dict[str, Any]:
    """What is kept of one scored task: its type, source, units, per-unit outputs (and a pair task's labels)."""
    record = {"type": task.kind, "source": Path(task.source).name, "units": task.units,
              "outputs": {key: np.asarray(values, dtype=np.float64).tolist() for key, values in result.outputs.items()}}
    if task.kind == "pair-classification":
        record["labels"] = [int(label) for label in task.labels]
    return rounded(record)


def score_model(model: str, data: Path) -> dict[str, Any]:
    """Every task file scored for one model, as `sentadapt eval` scores it (one evaluator per file)."""
    from sentadapt import Encoder
    from sentadapt.evaluation.task_types import read_task

    started = time.perf_counter()
    encoder = Encoder.load(str(SHARED / "models" / model), device="cpu")
    tasks = {}
    for name, kind in FILES:
        task = read_task(data / name, kind)
        report = Evaluator([task], resamples=0)(encoder, batch_size=128)
        tasks[task.name] = task_record(task, report.tasks[0])
    args = " ".join(f"{OPTIONS[kind]} runs/eval-tasks/{name}" for name, kind in FILES)
    return {"model": model, "tasks": tasks, "seconds": time.perf_counter() - started,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "command": f"sentadapt eval ../shared/models/{model} {args}", "machine": machine_summary(),
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def report_of(stored: dict[str, Any], resamples: int = 1000) -> dict[str, Any]:
    """`sentadapt eval --json`'s entry for the base model, recomputed from the stored outputs."""
    reports = []
    for name, record in stored["tasks"].items():
        evaluator = Evaluator([StoredTask(name, record)], resamples=resamples)
        report = evaluator.from_outputs({name: record["outputs"]}, stored["model"])
        reports.append(report.to_dict())
    return {"model": stored["model"], "reports": reports, "delta_vs_first": None}


def section(results: Path) -> str:
    stored = {model: json.loads((results / f"{model}.json").read_text(encoding="utf-8")) for model in MODELS}
    first = stored[MODELS[0]]
    entries = {model: {"rows": ["base"], "report": [report_of(data)], "seconds": data["seconds"],
                       "peak_rss_mb": data["peak_rss_mb"], "command": data["command"],
                       "data_command": "python -m research.experiments.make_eval_tasks --shared ../shared --out DIR"}
               for model, data in stored.items()}
    return eval_tasks_section({"eval_tasks": entries, "eval_tasks_generated": (
        f"generated by `python -m research.experiments.eval_tasks_stored --run`, finished {first['finished']} "
        f"({first['machine']}), from the per-unit outputs in `research/results/eval-tasks/` (`--render` redraws it); each "
        "model scored in one process, one task after another, two at a time on the 2 cores")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true", help="build the tasks, score the base models, store")
    parser.add_argument("--render", action="store_true", help="redraw the section from RESULTS")
    parser.add_argument("--model", choices=MODELS, help="--run: this model only")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--doc", type=Path, default=Path("research/results.md"))
    args = parser.parse_args()
    os.chdir(REPO)  # ../shared and the stored paths are relative to the repository
    results = args.results
    if args.run:
        data = WORK
        if not (data / "manifest.json").is_file():  # built once (deterministic), then every --model run reads it
            subprocess.check_call([sys.executable, "-m", "research.experiments.make_eval_tasks", "--shared", str(SHARED),
                                   "--out", str(data)])
        results.mkdir(parents=True, exist_ok=True)
        for model in [args.model] if args.model else MODELS:
            write_atomically(results / f"{model}.json", json.dumps(score_model(model, data)) + "\n")
    if (args.run or args.render) and all((results / f"{model}.json").is_file() for model in MODELS):
        write_section(args.doc, SECTION, section(results))
        print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
