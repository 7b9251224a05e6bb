"""Scored pairs (STS): Spearman × 100 (main) and Pearson × 100 between cosine similarity and gold scores.

Protocol (as ConSERT, SimCSE and SentEval report): for each task one correlation over every pair of
the split ('all'); per-subset mean ('mean') and pair-weighted mean ('wmean') on request; the
7-task average is the plain mean of the task scores. Every unique sentence across all requested
tasks is encoded once (by the Evaluator). Bootstrap units are pairs: for 'all' the correlation is
recomputed over the resampled pairs; for 'mean'/'wmean' each subset's correlation over its resampled pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.pair_files import (
    PAIR_COLUMNS,
    ScoredPairs,
    labels_are_graded,
    read_user_scored_pairs,
    sniff_columns,
)
from sentadapt.errors import ConfigError
from sentadapt.evaluation import STS_AGGREGATE
from sentadapt.evaluation.contract import TASK_TYPES, CosinePairTask, Outputs, TaskResult, cosine_scores
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.evaluation.tasks import AGGREGATIONS, load_task
from sentadapt.evaluation.weighted_stats import TieGroups, weighted_pearson, weighted_spearman
from sentadapt.options import TEST_SPLIT


def spearman100(predicted: Sequence[float] | np.ndarray, gold: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(predicted, gold).statistic) * 100


@TASK_TYPES.register("sts")
class ScoredPairsTask(CosinePairTask):
    kind = "sts"
    title = "STS (scored pairs)"
    metric_names = ("spearman", "pearson")
    description = "sentence1, sentence2, score (a number, e.g. 0–5)"
    detection_rank = 30  # scored pairs: the most general layout, tried last

    def __init__(self, name: str, pairs: ScoredPairs, aggregate: str = STS_AGGREGATE) -> None:
        super().__init__(name, pairs.source)
        if aggregate not in AGGREGATIONS:
            raise ConfigError(f"--aggregate: '{aggregate}' is not one of {', '.join(AGGREGATIONS)}")
        pairs.check_usable()
        self.pairs = pairs
        self.aggregate = aggregate
        self.gold = np.asarray(pairs.scores, dtype=np.float64)
        by_subset: dict[str, list[int]] = {}
        for index, subset in enumerate(pairs.subsets):
            by_subset.setdefault(subset or name, []).append(index)
        self.subsets = {subset: np.asarray(rows) for subset, rows in by_subset.items()}

    @classmethod
    def sniff(cls, path: Path) -> bool:
        columns = sniff_columns(path)
        if "label" in columns:  # a 'label' column of graded scores is STS (see labels_are_graded)
            return "score" not in columns and labels_are_graded(path)
        return "score" in columns

    @classmethod
    def read(cls, path: Path, split: str = TEST_SPLIT, aggregate: str = STS_AGGREGATE) -> ScoredPairsTask:
        return cls(path.name, read_user_scored_pairs(path), aggregate)

    def metrics(self, outputs: Outputs) -> tuple[dict[str, float], dict[str, Any]]:
        from scipy.stats import pearsonr

        cosines = outputs["cosine"]
        if self.weights is not None:  # a chosen dev set: the pool's correlations, estimated (pairs/design.py)
            return self._weighted_metrics(cosines, self.weights)
        subsets = {subset: spearman100(cosines[rows], self.gold[rows]) for subset, rows in self.subsets.items()
                   if len(set(self.gold[rows].tolist())) > 1}
        if self.aggregate == "all":
            headline = spearman100(cosines, self.gold)  # type: ignore[arg-type]
        elif self.aggregate == "mean":
            headline = float(np.mean(list(subsets.values())))
        else:  # wmean: subsets weighted by their number of pairs
            sizes = {s: len(self.subsets[s]) for s in subsets}
            headline = float(sum(subsets[s] * sizes[s] for s in subsets) / sum(sizes.values()))
        pearson = float(pearsonr(cosines, self.gold).statistic) * 100
        return {"spearman": headline, "pearson": pearson}, {"pairs": self.units, "subsets": subsets,
                                                            "aggregate": self.aggregate}

    def _weighted_metrics(self, cosines: np.ndarray, weights: np.ndarray) -> tuple[dict[str, float], dict[str, Any]]:
        """The metrics with each pair counted `weight` times: the resampled statistics on one 'resample' whose counts
        are the weights, so the point value and its bootstrap are one formula."""
        statistics = self.resampled({"cosine": cosines})
        values = {name: float(statistic(weights[None, :])[0]) for name, statistic in statistics.items()}
        return values, {"pairs": self.units, "aggregate": self.aggregate, "weighted": True}

    def resampled(self, outputs: Outputs) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
        cosines = outputs["cosine"]

        def spearman_all(counts: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
            x, y = (cosines, self.gold) if rows is None else (cosines[rows], self.gold[rows])
            block = counts if rows is None else counts[:, rows]
            return 100 * weighted_spearman(block, TieGroups(x), TieGroups(y))

        def spearman(counts: np.ndarray) -> np.ndarray:
            if self.aggregate == "all":
                return spearman_all(counts)
            usable = [rows for rows in self.subsets.values() if len(set(self.gold[rows].tolist())) > 1]
            per_subset = np.stack([spearman_all(counts, rows) for rows in usable])
            if self.aggregate == "mean":
                return per_subset.mean(axis=0)
            sizes = np.array([len(rows) for rows in usable], dtype=np.float64)[:, None]
            return (per_subset * sizes).sum(axis=0) / sizes.sum()

        return {"spearman": spearman,
                "pearson": lambda counts: 100 * weighted_pearson(counts, cosines, self.gold)}


def score_task(name: str, pairs: ScoredPairs, cosines: np.ndarray, aggregate: str) -> TaskResult:
    """Metrics of one STS task from its pair cosines (no bootstrap)."""
    return ScoredPairsTask(name, pairs, aggregate).result({"cosine": np.asarray(cosines, dtype=np.float64)})


class StsEvaluator(Evaluator):
    """The STS tasks (or a scored-pairs file) as an Evaluator; the same object serves `eval` and training."""

    @classmethod
    def from_sts(cls, names: list[str], split: str, data_dir: Path | None, aggregate: str = STS_AGGREGATE,
                 **options: Any) -> StsEvaluator:
        tasks = [ScoredPairsTask(name, load_task(name, split, data_dir), aggregate) for name in names]
        return cls(tasks, split=split, title=f"STS ({split})", **options)

    @classmethod
    def from_pairs(cls, tasks: dict[str, ScoredPairs], aggregate: str = STS_AGGREGATE, split: str = "pairs",
                   **options: Any) -> StsEvaluator:
        return cls([ScoredPairsTask(name, pairs, aggregate) for name, pairs in tasks.items()], split=split, **options)

    @classmethod
    def from_pairs_file(cls, path: str | Path, aggregate: str = STS_AGGREGATE, **options: Any) -> StsEvaluator:
        return cls([ScoredPairsTask(Path(path).name, read_user_scored_pairs(path), aggregate)], split="pairs",
                   **options)


__all__ = ["PAIR_COLUMNS", "ScoredPairsTask", "StsEvaluator", "cosine_scores", "score_task", "spearman100"]
