"""The statistics of a resample given as counts (rows = resamples): each is computed from the original per-unit
values and the (B, n) count block c, never by materialising the resampled rows (evaluation/bootstrap.py draws c).

- a mean over queries (MAP, MRR, nDCG, recall) is c · v / n;
- Pearson is the c-weighted Pearson;
- Spearman needs the ranks of the resampled values: a unit drawn c_i times ties with itself, so its
  average rank is (weight of all smaller values) + (weight of its tie group + 1) / 2 — a cumulative sum
  over the groups of equal values, sorted once, not once per resample;
- AP and best-threshold F1/accuracy are cumulative sums of positive and negative weight down the
  score groups (sorted once).

Counts may be real-valued (a design-weighted dev set: bootstrap.weighted_by).
"""

from __future__ import annotations

import numpy as np


def weighted_mean(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    return counts @ values / counts.shape[1]


def _correlation(total: np.ndarray, sx: np.ndarray, sy: np.ndarray, sxx: np.ndarray, syy: np.ndarray,
                 sxy: np.ndarray) -> np.ndarray:
    """Pearson from weighted sums (float64; ranks up to 1e4 keep ~1e-12 relative accuracy)."""
    covariance = sxy - sx * sy / total
    with np.errstate(invalid="ignore", divide="ignore"):
        return covariance / np.sqrt((sxx - sx * sx / total) * (syy - sy * sy / total))


def weighted_pearson(counts: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson of each resampled row of fixed (n,) values x and y: five matrix-vector products."""
    weights = counts
    x = x - x.mean()  # centred once: smaller sums, better conditioned
    y = y - y.mean()
    return _correlation(weights.sum(axis=1), weights @ x, weights @ y, weights @ (x * x), weights @ (y * y),
                        weights @ (x * y))


class TieGroups:
    """The groups of equal values of x, sorted once (ascending or descending)."""

    def __init__(self, values: np.ndarray, descending: bool = False) -> None:
        keys = -values if descending else values
        self.order = np.argsort(keys, kind="stable")
        ordered = values[self.order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        self.starts = starts
        self.has_ties = len(starts) < len(values)
        self.values = ordered[starts]  # one value per group, in sorted order
        self.group_of_unit = np.empty(len(values), dtype=np.int64)
        self.group_of_unit[self.order] = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(values)]))

    def group_totals(self, weights: np.ndarray) -> np.ndarray:
        """(B, n) per-unit weights → (B, groups) sums per tie group, in sorted order."""
        ordered = np.take(weights, self.order, axis=1)
        return np.add.reduceat(ordered, self.starts, axis=1) if self.has_ties else ordered

    def group_ranks(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(group totals, average rank of each group) within each resample: a tie group of total weight t
        after weight s of smaller values holds ranks s+1 … s+t, on average s + (t + 1) / 2."""
        totals = self.group_totals(weights)
        return totals, np.cumsum(totals, axis=1) - totals + (totals + 1) / 2


def weighted_spearman(counts: np.ndarray, x_groups: TieGroups, y_groups: TieGroups) -> np.ndarray:
    """Spearman of each resample = Pearson of average ranks. Σ rank and Σ rank² come from the group level;
    only Σ c·rank_x·rank_y needs the (B, n) unit level."""
    weights = counts
    total = weights.sum(axis=1)
    x_totals, x_ranks = x_groups.group_ranks(weights)
    y_totals, y_ranks = y_groups.group_ranks(weights)
    unit_x = np.take(x_ranks, x_groups.group_of_unit, axis=1)
    unit_y = np.take(y_ranks, y_groups.group_of_unit, axis=1)
    rank_sum = total * (total + 1) / 2  # the ranks of a resample always sum to 1 + … + n
    return _correlation(total, rank_sum, rank_sum, (x_totals * x_ranks * x_ranks).sum(axis=1),
                        (y_totals * y_ranks * y_ranks).sum(axis=1), np.einsum("ij,ij,ij->i", weights, unit_x, unit_y))


def threshold_sweep(counts: np.ndarray, labels: np.ndarray, groups: TieGroups) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative positive and negative weight predicted positive at each score group, highest score first."""
    weights = counts
    positives = np.cumsum(groups.group_totals(weights * labels), axis=1)
    negatives = np.cumsum(groups.group_totals(weights * (1 - labels)), axis=1)
    return positives, negatives


def average_precision_rows(positives: np.ndarray, negatives: np.ndarray) -> np.ndarray:
    """AP = Σ over score groups of (recall gain) × (precision at that group) — sklearn's definition."""
    total = positives[:, -1:]
    gained = np.diff(positives, axis=1, prepend=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = positives / (positives + negatives)
        return np.where(gained > 0, gained * precision, 0.0).sum(axis=1) / total[:, 0]


def best_accuracy_rows(positives: np.ndarray, negatives: np.ndarray) -> np.ndarray:
    """Best accuracy over thresholds (between score groups), predicting 'all negative' included."""
    total_negatives = negatives[:, -1:]
    total = positives[:, -1:] + total_negatives
    accuracy = (positives + total_negatives - negatives) / total
    return np.maximum(accuracy.max(axis=1), (total_negatives / total)[:, 0])


def best_f1_rows(positives: np.ndarray, negatives: np.ndarray) -> np.ndarray:
    """Best F1 over thresholds: 2·TP / (TP + FP + P); 0 where nothing positive is predicted correctly."""
    total_positives = positives[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(positives > 0, 2 * positives / (positives + negatives + total_positives), 0.0)
    return f1.max(axis=1)
