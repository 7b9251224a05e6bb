"""The label-more loop's looks: a risk limit that stays valid however many times the labels grow.

A decision on 100 labels that is inconclusive asks for more; deciding again on 200 at the same limit, and again on
400, would use a model that is no better far more often than the limit says (each look is another chance for noise
to cross it: two looks at 0.10 used a no-better model in ~14 % of runs in issue 83's simulation). The looks are
planned instead as a group-sequential test (Lan & DeMets 1983): the overall limit α — `--risk`, the chance over every
look of using a model no better than the base — is spent over the looks by a spending function α(t) of the
information fraction t = n / LABEL_CAP, and look k uses the adapted model when its risk is at most its nominal limit

    r_k = 1 − Φ(c_k),   c_k solving  P₀(Z₁ < c₁, …, Z_{k−1} < c_{k−1}, Z_k ≥ c_k) = α(t_k) − α(t_{k−1})

under Δ = 0, where the looks' z statistics are jointly normal with corr(Z_j, Z_k) = √(n_j / n_k) (the labels of a
look are those of the one before plus new ones). The probabilities are integrated numerically on the score scale
S_k = Z_k √n_k, whose increments are independent (Jennison & Turnbull 2000, ch. 19). A single look with n ≥ LABEL_CAP
labels is tested at α itself; the last look is the first with n ≥ LABEL_CAP.

Between the limit and the end of the loop a look is inconclusive: the loop asks for the next look at
min(LABEL_CAP, 2 n) labels — unless the risk is above FUTILITY_RISK (the adapted model scores below the base by more
than 0.84 SE: a gain is implausible), where it keeps the base at once. That futility stop is non-binding (the limits
above ignore it), so it only lowers how often a no-better model is used. Which spending function and α: the rule in
research/findings.md, "The label-more loop and its limit (issue 83)".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from sentadapt.config.schema import DEFAULT_SPENDING, LABEL_CAP

USE, KEEP, MORE = "use", "keep", "more"  # a look's verdicts: use the adapted model, keep the base, label more
FUTILITY_RISK = 0.8  # an interim look above this risk keeps the base: Δ̂ < −0.84 SE
_NORMAL = NormalDist()
_GRID = 2001  # points of the score grid per look: the integrals are exact to ~1e-6, well below a limit's digits


Spending = Callable[[float, float], float]  # (α, t) → the share of α spent by information fraction t


def sqrt_spending(alpha: float, t: float) -> float:
    """α √t: half the limit at a quarter of the cap's labels — the first look at 100 labels is tested at α / 2,
    which keeps a user who labels no more near the one-look power (the rule's pick among Pocock-type, O'Brien-Fleming
    type and this: research/findings.md, "The label-more loop and its limit (issue 83)")."""
    return alpha * math.sqrt(t)


SPENDING: dict[str, Spending] = {"sqrt": sqrt_spending}  # research/experiments/label_loop.py weighed two more


def information(sizes: Sequence[int]) -> list[float]:
    """Each look's information fraction t = n / LABEL_CAP, at most 1."""
    return [min(1.0, size / LABEL_CAP) for size in sizes]


def nominal_limits(sizes: Sequence[int], alpha: float, spending: str | Spending = DEFAULT_SPENDING) -> list[float]:
    """The nominal risk limit r_k of each look (module docstring); `sizes` the labels at each look, increasing;
    `spending` a name in SPENDING or the function itself. A look after the one that reached LABEL_CAP has nothing
    left to spend (0)."""
    if any(later <= earlier for earlier, later in itertools.pairwise(sizes)):
        raise ValueError(f"the looks' sizes must increase: {list(sizes)}")
    spend = SPENDING[spending] if isinstance(spending, str) else spending
    fractions = information(sizes)
    limits: list[float] = []
    density: np.ndarray | None = None  # the continuation region's density of S at the previous look
    grid = np.zeros(0)
    spent, previous_size = 0.0, 0
    for size, fraction in zip(sizes, fractions, strict=True):
        budget = spend(alpha, fraction) - spent
        if budget <= 0 or (limits and fractions[len(limits) - 1] >= 1.0):
            limits.append(0.0)
            continue
        scale = math.sqrt(size)
        new_grid = np.linspace(-8 * scale, 8 * scale, _GRID)
        if density is None:
            current = _normal_density(new_grid, size)
        else:
            step = size - previous_size
            kernel = _normal_density(new_grid[:, None] - grid[None, :], step)
            current = kernel @ (density * (grid[1] - grid[0]))
        # the first look's boundary is the normal quantile itself; later ones integrate over the earlier looks
        bound = scale * _NORMAL.inv_cdf(1 - budget) if density is None else _boundary(new_grid, current, budget)
        limits.append(1 - _NORMAL.cdf(bound / scale))
        density = np.where(new_grid < bound, current, 0.0)
        grid, previous_size = new_grid, size
        spent += budget
    return limits


def _normal_density(values: np.ndarray, variance: float) -> np.ndarray:
    return np.exp(-values ** 2 / (2 * variance)) / math.sqrt(2 * math.pi * variance)


def _boundary(grid: np.ndarray, density: np.ndarray, budget: float) -> float:
    """The score s with ∫_s^∞ density = budget (the tail mass of the continuing paths): the grid's cumulative tail
    (trapezoids), interpolated between grid points."""
    width = grid[1] - grid[0]
    pieces = (density[1:] + density[:-1]) * width / 2  # the trapezoids between grid points
    tail = np.append(np.cumsum(pieces[::-1])[::-1], 0.0)  # tail[i] ≈ ∫ from grid[i]
    if tail[0] <= budget:
        return float(grid[0])
    index = int(np.searchsorted(-tail, -budget))  # first i with tail[i] <= budget
    upper, lower = tail[index - 1], tail[index]
    share = (upper - budget) / (upper - lower) if upper > lower else 0.0
    return float(grid[index - 1] + share * width)


def next_size(size: int) -> int | None:
    """The labels of the next look after an inconclusive one (None: this look was the last)."""
    return None if size >= LABEL_CAP else min(LABEL_CAP, 2 * size)


@dataclass(frozen=True)
class Look:
    """Where a decision stands in the loop: its look number, the labels of every look so far, its nominal limit."""

    number: int
    sizes: tuple[int, ...]
    limit: float  # the nominal risk limit of this look
    alpha: float
    spending: str

    @property
    def last(self) -> bool:
        return self.sizes[-1] >= LABEL_CAP

    @property
    def next_size(self) -> int | None:
        return next_size(self.sizes[-1])

    def verdict(self, risk: float, change: float) -> str:
        """USE | KEEP | MORE: what this look's risk decides; a model at or below the base on these labels (`change`,
        its Δ) is never used, whatever its risk says."""
        if risk <= self.limit and change > 0:
            return USE
        if self.last or risk > FUTILITY_RISK:
            return KEEP
        return MORE

    def to_dict(self) -> dict[str, object]:
        return {"look": self.number, "sizes": list(self.sizes), "nominal_limit": self.limit, "max_risk": self.alpha,
                "spending": self.spending, "cap": LABEL_CAP}


def look_of(sizes: Sequence[int], alpha: float, spending: str = DEFAULT_SPENDING) -> Look:
    """The last of `sizes`' looks, with its nominal limit."""
    limits = nominal_limits(sizes, alpha, spending)
    return Look(len(sizes), tuple(sizes), limits[-1], alpha, spending)


def conditional_power(z: float, size: int, later: int, later_limit: float) -> float:
    """The chance that the look at `later` labels uses the model if the Δ is what this look measured (`z` = Δ̂ / SE
    at `size` labels): the score S = Z √n gains z / √n per label on average, with independent unit-variance noise
    per label (an estimate that tells the user how likely the next round settles it; it decides nothing)."""
    if not (math.isfinite(z) and 0 < later_limit < 1) or later <= size:
        return float("nan")
    step = later - size
    mean = z * math.sqrt(size) + z / math.sqrt(size) * step
    bound = _NORMAL.inv_cdf(1 - later_limit) * math.sqrt(later)
    return 1 - _NORMAL.cdf((bound - mean) / math.sqrt(step))
