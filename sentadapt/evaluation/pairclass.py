"""Pair classification (MTEB PairClassification, USEB): cosine as the score of 'these two are similar'.

Metrics × 100: average precision (main, as MTEB and USEB report), best-threshold F1 and best-threshold
accuracy, with the thresholds (raw cosines) that reach them. Definitions follow sentence-transformers'
BinaryClassificationEvaluator: pairs sorted by cosine, thresholds only between groups of *equal*
cosines (a tie is never split), AP as sklearn's `average_precision_score` (Σ recall gain × precision
over distinct scores), the threshold is the midpoint to the next lower cosine. Bootstrap units: pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.pair_files import LabelledPairs, labels_are_graded, read_labelled_pairs, sniff_columns
from sentadapt.evaluation import weighted_stats
from sentadapt.evaluation.contract import TASK_TYPES, CosinePairTask, Outputs
from sentadapt.options import TEST_SPLIT


@TASK_TYPES.register("pair-classification")
class PairClassificationTask(CosinePairTask):
    kind = "pair-classification"
    title = "pair classification"
    metric_names = ("ap", "f1", "accuracy")
    description = "sentence1, sentence2, label (1 = similar, 0 = not)"
    detection_rank = 20  # before STS: the same columns, 0/1 labels

    def __init__(self, name: str, pairs: LabelledPairs) -> None:
        super().__init__(name, pairs.source)
        self.pairs = pairs
        self.labels = np.asarray(pairs.labels, dtype=np.float64)
        self.gold = self.labels

    @classmethod
    def sniff(cls, path: Path) -> bool:
        # 0/1 labels; a 'label' column of graded scores (and no 'score' column) is STS instead
        columns = sniff_columns(path)
        return "label" in columns and ("score" in columns or not labels_are_graded(path))

    @classmethod
    def read(cls, path: Path, split: str = TEST_SPLIT) -> PairClassificationTask:
        # forced onto a file without a 'label' column, a 0/1 'score' column is the label
        column = "label" if "label" in sniff_columns(path) or "score" not in sniff_columns(path) else "score"
        return cls(path.name, read_labelled_pairs(path, label_column=column))

    def metrics(self, outputs: Outputs) -> tuple[dict[str, float], dict[str, Any]]:
        cosines = outputs["cosine"]
        groups = weighted_stats.TieGroups(cosines, descending=True)
        counts = np.ones((1, len(cosines)), dtype=np.int32) if self.weights is None else self.weights[None, :]
        positives, negatives = weighted_stats.threshold_sweep(counts, self.labels, groups)
        ap = weighted_stats.average_precision_rows(positives, negatives)[0]
        accuracy, accuracy_threshold = _best_accuracy(positives[0], negatives[0], groups.values)
        f1, f1_threshold = _best_f1(positives[0], negatives[0], groups.values)
        metrics = {"ap": 100 * float(ap), "f1": 100 * f1, "accuracy": 100 * accuracy}
        extras = {"f1_threshold": f1_threshold, "accuracy_threshold": accuracy_threshold,
                  "positives": int(self.labels.sum())}
        return metrics, extras if self.weights is None else {**extras, "weighted": True}

    def resampled(self, outputs: Outputs) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
        groups = weighted_stats.TieGroups(outputs["cosine"], descending=True)

        def metric(rows: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
            return lambda counts: 100 * rows(*weighted_stats.threshold_sweep(counts, self.labels, groups))

        return {"ap": metric(weighted_stats.average_precision_rows), "f1": metric(weighted_stats.best_f1_rows),
                "accuracy": metric(weighted_stats.best_accuracy_rows)}


def _threshold(values: np.ndarray, group: int) -> float:
    """Midpoint between score group `group` and the next lower one (the group itself when last or rounding
    would land on the next group's score)."""
    if group == len(values) - 1:
        return float(values[group])
    middle = (values[group] + values[group + 1]) / 2
    return float(values[group] if middle == values[group + 1] else middle)


def _best_accuracy(positives: np.ndarray, negatives: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    total_negatives = negatives[-1]
    total = positives[-1] + total_negatives
    accuracy = (positives + total_negatives - negatives) / total
    best = int(np.argmax(accuracy))  # the first (highest) threshold reaching the maximum
    if accuracy[best] > total_negatives / total:
        return float(accuracy[best]), _threshold(values, best)
    # 'every pair dissimilar' is as good: a threshold just above the highest cosine
    return float(total_negatives / total), float(np.nextafter(values[0], np.inf))


def _best_f1(positives: np.ndarray, negatives: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    f1 = np.where(positives > 0, 2 * positives / (positives + negatives + positives[-1]), 0.0)
    best = int(np.argmax(f1))
    return (float(f1[best]), _threshold(values, best)) if f1[best] > 0 else (0.0, 0.0)
