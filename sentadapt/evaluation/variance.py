"""The standard error of a paired dev Δ, calibrated to how the dev pairs were drawn (issue 68).

The paired bootstrap (evaluation/bootstrap.py) overstates the error of a Δ of two rank correlations: measured on
the suite's stored pools it was 1.1-1.3× the true error of uniform draws and more for chosen ones, so its intervals
covered 97-99 % instead of 95 % and the decision threw away gains the labels had shown. Two causes:
- a resample draws pairs *with* replacement, and a pair drawn twice ties with itself in all three rankings (the
  gold and both models' cosines): a rank noise that a sample of distinct pairs does not have, largest where the
  two models rank alike — where the Δ's own variance is small;
- a dev set drawn from a known pool *without* replacement (`pairs --run/--teacher`: a design) varies less than a
  with-replacement draw: by 1 − π_i per pair, nothing for a pair drawn with certainty (π_i = 1).

The estimate here is the infinitesimal jackknife (the empirical influence function: the linearisation of the
Hájek-weighted statistic) with the design factor of Berger & Skinner (2005), the rule's pick among it, that factor on
the delete-one jackknife, and the bootstrap (research/findings.md, "Calibrated intervals and risk"):

    ε_i = ∂θ̂ / ∂log w_i                      the statistic's change per relative change of pair i's weight
    V   = n/(n − 1) · Σ_i (1 − π_i) · (ε_i − ε̄)²      ε̄ = Σ (1 − π_i) ε_i / Σ (1 − π_i)

with π_i = 1/w_i for a file whose weights are a design's (inclusion probabilities), 0 otherwise (an unknown, large
population: no finite-population factor). ε_i is a central difference of the bootstrap's own statistics (a count
block of n rows, row i counting pair i (1 ± STEP) times), so every metric the bootstrap resamples has one; above
MAX_GROUPS pairs the weights are moved by groups of pairs. For a paired Δ, θ is the difference of the two models'
metric on the same pairs: ε_Δ = ε_other − ε_first. The interval is Δ ± z · SE. Best-threshold F1 and accuracy are
not smooth in the weights (a maximum over thresholds), where no derivative estimates a variance: they keep the
bootstrap.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist

import numpy as np

# Above this many units the weights are moved by groups of units (a fixed assignment): the cost of n derivatives
# stays at that of MAX_GROUPS (two passes of the statistic over all units each)
MAX_GROUPS = 2000
# Resampled metrics that are a maximum over thresholds: not smooth, no derivative (the bootstrap stays)
NOT_SMOOTH = frozenset({"f1", "accuracy"})
_BLOCK_ELEMENTS = 1_000_000
# The relative weight step of the central difference: small against a weight's own size (1), large against float64's
# rounding of sums of ~10⁴ ranks (~1e-12 relative), so ε is exact to ~1e-8
STEP = 1e-4


def groups_of(units: int) -> np.ndarray:
    """(units,) the group of each unit: itself up to MAX_GROUPS units, else a fixed balanced assignment (the same
    for every model scored on the task, so two models' derivatives pair up)."""
    if units <= MAX_GROUPS:
        return np.arange(units)
    order = np.random.default_rng(units).permutation(units)
    groups = np.empty(units, dtype=np.int64)
    groups[order] = np.arange(units) % MAX_GROUPS
    return groups


def influence_values(units: int, statistics: dict[str, Callable[[np.ndarray], np.ndarray]],
                     ) -> dict[str, np.ndarray]:
    """metric → (groups,) ε_g = ∂θ/∂log w_g: a central difference, each group's counts moved by ± STEP."""
    groups = groups_of(units)
    count = int(groups.max()) + 1 if units else 0
    values: dict[str, list[np.ndarray]] = {name: [] for name in statistics}
    block = max(1, _BLOCK_ELEMENTS // max(units, 1))
    for start in range(0, count, block):
        rows = np.arange(start, min(count, start + block))
        moved = (groups[None, :] == rows[:, None]).astype(np.float64) * STEP
        for name, statistic in statistics.items():
            values[name].append((statistic(1.0 + moved) - statistic(1.0 - moved)) / (2 * STEP))
    return {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in values.items()}


def influence_se(effects: np.ndarray, units: int, inclusion: np.ndarray | None = None) -> float:
    """The SE (module docstring) from the groups' ε; `inclusion` the units' inclusion probabilities (None: a
    large population). NaN when an ε is not finite (the statistic undefined nearby)."""
    groups = groups_of(units)
    count = len(effects)
    if count < 2 or not np.isfinite(effects).all():
        return float("nan")
    sampled = np.ones(units) if inclusion is None else 1.0 - np.clip(inclusion, 0.0, 1.0)
    factor = np.bincount(groups, weights=sampled, minlength=count) / np.bincount(groups, minlength=count)
    # centred where the factor weighs them (Berger & Skinner 2005): with unequal 1 − π the plain mean of ε is not the
    # centre of the sum, and centring there overstated V a little (≤ 0.07 % of the SE on the stored draws: issue 83)
    centre = float(np.sum(factor * effects) / factor.sum()) if factor.sum() > 0 else float(effects.mean())
    variance = count / (count - 1) * float(np.sum(factor * (effects - centre) ** 2))
    return float(np.sqrt(max(variance, 0.0)))


def normal_interval(value: float, se: float, confidence: float) -> tuple[float, float]:
    """value ± z · se, z the two-sided normal quantile of `confidence`."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return value - z * se, value + z * se
