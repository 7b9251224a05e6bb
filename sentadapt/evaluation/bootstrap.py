"""Percentile bootstrap over a task's units (pairs or queries), vectorised with resampling *counts*.

A resample of n units drawn with replacement is a count vector c (c_i = how often unit i was drawn,
Σ c_i = n). Every statistic here is computed from the original per-unit values and c, never by
materialising the resampled rows, so B resamples cost a few (B, n) array operations:

- a mean over queries (MAP, MRR, nDCG, recall) is c · v / n;
- Pearson is the c-weighted Pearson;
- Spearman needs the ranks of the resampled values: a unit drawn c_i times ties with itself, so its
  average rank is (weight of all smaller values) + (weight of its tie group + 1) / 2 — a cumulative sum
  over the groups of equal values, sorted once, not once per resample;
- AP and best-threshold F1/accuracy are cumulative sums of positive and negative weight down the
  score groups (sorted once).

Counts come from a seeded generator that depends only on (units, resamples, seed), so two models
scored on the same task get the same resamples: the Δ of their replicates is a *paired* bootstrap.
Identical per-unit outputs give bitwise identical replicates, so a model against itself is exactly [0, 0].
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
# Resamples per block: (block, n) float64 temporaries of ~8 MB (100 resamples at n = 10,000 pairs).
_BLOCK_ELEMENTS = 1_000_000


def task_seed(task: str, seed: int = DEFAULT_SEED) -> int:
    """A per-task seed: tasks differ from each other, and every model gets the same one (paired)."""
    return (seed * 1_000_003 + zlib.crc32(task.encode("utf-8"))) % (2**32)


def resample_counts(units: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, units) float64 counts of each unit in each resample drawn with replacement."""
    return np.concatenate(list(_count_blocks(units, resamples, seed)))


def _count_blocks(units: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The counts in blocks of rows (one generator, drawn in order: the same counts whatever reads them).
    Blocks of ~1M entries keep the (block, n) temporaries in cache instead of paging in 80 MB arrays."""
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ELEMENTS // max(units, 1))
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        drawn = rng.integers(0, units, size=(rows, units), dtype=np.int64)
        drawn += np.arange(rows, dtype=np.int64)[:, None] * units
        yield np.bincount(drawn.ravel(), minlength=rows * units).reshape(rows, units).astype(np.float64)


def replicate(units: int, resamples: int, seed: int,
              statistics: dict[str, Callable[[np.ndarray], np.ndarray]]) -> dict[str, np.ndarray]:
    """Each statistic(counts block) → (block,) values, over all resamples; every statistic sees the same
    resamples, and so does every model scored with the same (units, resamples, seed)."""
    values: dict[str, list[np.ndarray]] = {name: [] for name in statistics}
    for counts in _count_blocks(units, resamples, seed):
        for name, statistic in statistics.items():
            values[name].append(statistic(counts))
    return {name: np.concatenate(parts) for name, parts in values.items()}


# Fewer labelled units than this and a figure's spread is itself a guess: the standard deviation estimated from n
# values is off by about 1/√(2(n − 1)) of itself (13 % at 30, 71 % at 2), and resamples of a handful of pairs repeat
# them (2 pairs: every resample ranks them alike, so a Spearman interval reads [100.00, 100.00]).
FEW_LABELS = 30


def few_labels_note(source: str, units: int, unit_name: str) -> str | None:
    """The warning a figure, an interval or a decision from fewer than FEW_LABELS labelled units carries; None at
    FEW_LABELS or more."""
    if units >= FEW_LABELS:
        return None
    proposes = ": sentadapt pairs" if unit_name == "pairs" else ""  # it proposes pairs to label, not queries
    return (f"{source}: {units} labelled {unit_name}, too few for its intervals or a decision to mean much (at "
            f"least {FEW_LABELS}; 100 or more from your domain to decide on{proposes})")


def interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval; resamples where the statistic is undefined (e.g. no positive drawn) are skipped."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def excludes_zero(bounds: tuple[float, float]) -> bool:
    return bool(bounds[0] > 0 or bounds[1] < 0)


def weighted_by(statistic: Callable[[np.ndarray], np.ndarray], weights: np.ndarray,
                ) -> Callable[[np.ndarray], np.ndarray]:
    """The statistic of a design-weighted sample: each resample's counts times the units' design weights.

    A chosen dev set (pairs/design.py) is n draws, each standing for 1/π_i pairs of the population it was drawn
    from; resampling the draws with replacement and weighting each by 1/π_i is the with-replacement bootstrap of
    the weighted (Hájek) estimator. Every statistic below takes real-valued weights: the average rank of a tie group
    of weight t after weight s is s + (t + 1)/2, whose sum over groups is still T(T + 1)/2 for T = Σ weights."""
    return lambda counts: statistic(counts * weights)


# ---------------------------------------------------------------- weighted statistics (rows = resamples)
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
