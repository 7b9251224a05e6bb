"""STS evaluation: Spearman × 100 between cosine similarity and gold scores.

Protocol (as ConSERT, SimCSE and SentEval report): for each task one correlation over every pair of
the split ('all'); per-subset mean ('mean') and pair-weighted mean ('wmean') on request; the
7-task average is the plain mean of the task scores. Every unique sentence across all requested
tasks is encoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr

from sentadapt.data.pairs import ScoredPairs, read_scored_pairs
from sentadapt.errors import ConfigError, DataError
from sentadapt.evaluation.tasks import (  # noqa: F401  (re-exported: the task table lives with the scorer's users)
    AGGREGATIONS,
    DATA_DIR_ENV,
    TASKS,
    StsTask,
    parse_task_list,
    resolve_data_dir,
)


def load_task(name: str, split: str, data_dir: Path | None) -> ScoredPairs:
    task = TASKS[name]
    if data_dir is not None:
        path = data_dir / f"{name}.{split}.jsonl"
        if not path.is_file():
            raise DataError(f"{path}: missing; the data directory needs {name}.{split}.jsonl (JSON Lines: "
                            "sentence1, sentence2, score)")
        pairs = read_scored_pairs(path, score_range=task.score_range)
        pairs.source = f"{path} (SentEval pairs)"
    else:
        pairs = _load_from_hub(task, split)
    pairs.check_usable()
    return pairs


def _load_from_hub(task: StsTask, split: str) -> ScoredPairs:
    from sentadapt.resolve import hub_is_reachable

    if split not in task.hub_splits:
        raise DataError(f"{task.name}: the hub dataset {task.hub_dataset} has no '{split}' split; use --data-dir")
    if not hub_is_reachable():
        raise DataError(
            f"no STS data for {task.name}: pass --data-dir DIR (or set ${DATA_DIR_ENV}) with files such as "
            f"{task.name}.{split}.jsonl; the Hugging Face Hub ({task.hub_dataset}) is unreachable"
        )
    from datasets import load_dataset

    dataset = load_dataset(task.hub_dataset, split=task.hub_splits[split])
    pairs = ScoredPairs(source=f"hub:{task.hub_dataset}[{task.hub_splits[split]}] (MTEB pairs)")
    for row in dataset:
        pairs.append(row["sentence1"], row["sentence2"], float(row["score"]), task.name)
    return pairs


@dataclass
class TaskScore:
    task: str
    spearman: float  # × 100, the headline number
    pearson: float  # × 100
    pairs: int
    subsets: dict[str, float] = field(default_factory=dict)  # subset → spearman × 100
    source: str = ""


@dataclass
class StsReport:
    model: str
    pooling: str
    aggregate: str
    split: str
    tasks: list[TaskScore]
    seconds: float = 0.0

    @property
    def average(self) -> float:
        return float(np.mean([task.spearman for task in self.tasks])) if self.tasks else float("nan")

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model, "pooling": self.pooling, "aggregate": self.aggregate, "split": self.split,
            "seconds": round(self.seconds, 3),
            "tasks": {t.task: {"spearman": t.spearman, "pearson": t.pearson, "pairs": t.pairs,
                               "subsets": t.subsets, "source": t.source} for t in self.tasks},
            "average": self.average,
        }


def cosine_scores(left: torch.Tensor, right: torch.Tensor) -> np.ndarray:
    return torch.nn.functional.cosine_similarity(left.double(), right.double(), dim=-1).numpy()


def spearman100(predicted: Sequence[float] | np.ndarray, gold: Sequence[float]) -> float:
    return float(spearmanr(predicted, gold).statistic) * 100


def score_task(name: str, pairs: ScoredPairs, cosines: np.ndarray, aggregate: str) -> TaskScore:
    gold = np.asarray(pairs.scores)
    by_subset: dict[str, list[int]] = {}
    for index, subset in enumerate(pairs.subsets):
        by_subset.setdefault(subset or name, []).append(index)
    subsets = {subset: spearman100(cosines[idx], gold[idx]) for subset, idx in by_subset.items()
               if len(set(gold[idx].tolist())) > 1}
    if aggregate == "all":
        headline = spearman100(cosines, gold)
    elif aggregate == "mean":
        headline = float(np.mean(list(subsets.values())))
    else:  # wmean: subsets weighted by their number of pairs
        headline = float(sum(subsets[s] * len(by_subset[s]) for s in subsets) / sum(len(by_subset[s]) for s in subsets))
    return TaskScore(name, headline, float(pearsonr(cosines, gold).statistic) * 100, len(pairs), subsets,
                     pairs.source)


class StsEvaluator:
    """Scores an encoder on fixed sets of pairs; the same object serves `eval` and training's dev checks."""

    def __init__(self, tasks: dict[str, ScoredPairs], aggregate: str = "all", split: str = "test") -> None:
        if aggregate not in AGGREGATIONS:
            raise ConfigError(f"--aggregate: '{aggregate}' is not one of {', '.join(AGGREGATIONS)}")
        for pairs in tasks.values():
            pairs.check_usable()
        self.tasks = tasks
        self.aggregate = aggregate
        self.split = split
        # Each unique sentence once, across every task (37,700 test sentences → 26,126 unique).
        self.sentences = list(dict.fromkeys(s for p in tasks.values() for s in (*p.sentence1, *p.sentence2)))

    @classmethod
    def from_sts(cls, names: list[str], split: str, data_dir: Path | None, aggregate: str = "all") -> StsEvaluator:
        return cls({name: load_task(name, split, data_dir) for name in names}, aggregate, split)

    @classmethod
    def from_pairs_file(cls, path: str | Path, aggregate: str = "all") -> StsEvaluator:
        pairs = read_scored_pairs(path)
        return cls({Path(path).name: pairs}, aggregate, split="pairs")

    def __call__(
        self,
        encoder: object,
        batch_size: int = 128,
        max_length: int | None = None,
        dtype: str = "fp32",
        pooling: object | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> StsReport:
        import time

        from sentadapt.encoder import Encoder

        assert isinstance(encoder, Encoder)
        started = time.perf_counter()
        vectors = encoder.encode(self.sentences, batch_size=batch_size, max_length=max_length, dtype=dtype,
                                 pooling=pooling, progress=progress)  # type: ignore[arg-type]
        row_of = {sentence: row for row, sentence in enumerate(self.sentences)}
        scores = []
        for name, pairs in self.tasks.items():
            left = vectors[[row_of[s] for s in pairs.sentence1]]
            right = vectors[[row_of[s] for s in pairs.sentence2]]
            scores.append(score_task(name, pairs, cosine_scores(left, right), self.aggregate))
        pooling_name = pooling.name(encoder.num_layers) if pooling is not None else encoder.pooling_name  # type: ignore[attr-defined]
        return StsReport(encoder.name, pooling_name, self.aggregate, self.split, scores,
                         time.perf_counter() - started)
