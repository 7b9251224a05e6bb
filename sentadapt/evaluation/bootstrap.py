"""Percentile bootstrap over a task's units (pairs or queries), vectorised with resampling *counts*.

A resample of n units drawn with replacement is a count vector c (c_i = how often unit i was drawn,
Σ c_i = n). Every statistic is computed from the original per-unit values and c, never by materialising the
resampled rows (evaluation/weighted_stats.py), so B resamples cost a few (B, n) array operations. This module is
the resampling alone: the counts, the loop over blocks of them (`replicate`, which calls each task's statistics),
the intervals read from the replicates.

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
