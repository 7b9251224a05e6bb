"""The standard error of a paired dev Δ, calibrated to how the dev pairs were drawn (issue 68).

The paired bootstrap (evaluation/bootstrap.py) overstates the error of a Δ of two rank correlations: measured on
the suite's stored pools it was 1.1-1.3× the true error of uniform draws and more for chosen ones, so its intervals
covered 97-99 % instead of 95 % and the decision threw away gains the labels had shown. Two causes:
- a resample draws pairs *with* replacement, and a pair drawn twice ties with itself in all three rankings (the
  gold and both models' cosines): a rank noise that a sample of distinct pairs does not have, largest where the
  two models rank alike — where the Δ's own variance is small;
- a dev set drawn from a known pool *without* replacement (`pairs --run/--teacher`: a design) varies less than a
  with-replacement draw: by 1 − π_i per pair, nothing for a pair drawn with certainty (π_i = 1).

The estimate here is the delete-one jackknife of the (weighted) statistic with the design factor of Berger & Skinner
(2005), the rule's pick (research/findings.md, "Calibrated intervals and risk"):

    ε_i = (1 − w̃_i) · (θ̂ − θ̂₍ᵢ₎)            θ̂₍ᵢ₎: the statistic without pair i,  w̃ = w / Σw
    V   = n/(n − 1) · Σ_i (1 − π_i) · (ε_i − ε̄)²

with π_i = 1/w_i for a file whose weights are a design's (inclusion probabilities), 0 otherwise (an unknown, large
population: no finite-population factor). For a paired Δ, θ is the difference of the two models' metric on the same
pairs, so the jackknife deletes the same pair from both. The statistics are the bootstrap's own (a count block of
n rows, each with one pair's count set to 0), so every metric the bootstrap resamples has its jackknife; above
MAX_GROUPS pairs the pairs are deleted in MAX_GROUPS groups (the delete-a-group jackknife). The interval is
Δ ± z · SE. Best-threshold F1 and accuracy are not smooth in the data (a maximum over thresholds), where the
jackknife does not estimate a variance: they keep the bootstrap.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist

import numpy as np

# Above this many units the jackknife deletes groups of units (a fixed assignment): the cost of n deletions stays at
# that of MAX_GROUPS (each a pass of the statistic over all units)
MAX_GROUPS = 2000
# Resampled metrics that are a maximum over thresholds: not smooth, no jackknife variance (the bootstrap stays)
NOT_SMOOTH = frozenset({"f1", "accuracy"})
_BLOCK_ELEMENTS = 1_000_000


def groups_of(units: int) -> np.ndarray:
    """(units,) the deletion group of each unit: itself up to MAX_GROUPS units, else a fixed balanced assignment
    (the same for every model scored on the task, so two models' deletions pair up)."""
    if units <= MAX_GROUPS:
        return np.arange(units)
    order = np.random.default_rng(units).permutation(units)
    groups = np.empty(units, dtype=np.int64)
    groups[order] = np.arange(units) % MAX_GROUPS
    return groups


def deleted_values(units: int, statistics: dict[str, Callable[[np.ndarray], np.ndarray]],
                   ) -> dict[str, np.ndarray]:
    """metric → (groups,) the statistic with each deletion group's units left out (counts 0, the others 1)."""
    groups = groups_of(units)
    count = int(groups.max()) + 1 if units else 0
    values: dict[str, list[np.ndarray]] = {name: [] for name in statistics}
    block = max(1, _BLOCK_ELEMENTS // max(units, 1))
    for start in range(0, count, block):
        rows = np.arange(start, min(count, start + block))
        counts = (groups[None, :] != rows[:, None]).astype(np.float64)
        for name, statistic in statistics.items():
            values[name].append(statistic(counts))
    return {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in values.items()}


def jackknife_se(full: float, deleted: np.ndarray, units: int, weights: np.ndarray | None = None,
                 inclusion: np.ndarray | None = None) -> float:
    """The design jackknife's SE (module docstring) of a statistic whose value is `full` and whose deletion-group
    values are `deleted`; `weights` the units' design weights (None: equal), `inclusion` their inclusion
    probabilities (None: a large population). NaN when the statistic is undefined without some group."""
    groups = groups_of(units)
    count = len(deleted)
    if count < 2 or not np.isfinite(deleted).all():
        return float("nan")
    unit_weights = np.ones(units) if weights is None else np.asarray(weights, dtype=np.float64)
    share = np.bincount(groups, weights=unit_weights, minlength=count) / unit_weights.sum()
    sampled = np.ones(units) if inclusion is None else 1.0 - np.clip(inclusion, 0.0, 1.0)
    factor = np.bincount(groups, weights=sampled, minlength=count) / np.bincount(groups, minlength=count)
    effects = (1.0 - share) * (full - deleted)
    variance = count / (count - 1) * float(np.sum(factor * (effects - effects.mean()) ** 2))
    return float(np.sqrt(max(variance, 0.0)))


def normal_interval(value: float, se: float, confidence: float) -> tuple[float, float]:
    """value ± z · se, z the two-sided normal quantile of `confidence`."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return value - z * se, value + z * se
