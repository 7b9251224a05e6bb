"""decision/sequential.py: the label-more loop's looks share one risk limit (issue 83)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from sentadapt.decision.sequential import (
    FUTILITY_RISK,
    KEEP,
    MORE,
    USE,
    conditional_power,
    look_of,
    next_size,
    nominal_limits,
)

NORMAL = statistics.NormalDist()
# the plans the rule weighed (research/experiments/label_loop.py), as spending functions
PLANS = {"sqrt": "sqrt", "pocock": lambda alpha, t: alpha * np.log(1 + (np.e - 1) * t),
         "obf": lambda alpha, t: 2 - 2 * NORMAL.cdf(NORMAL.inv_cdf(1 - alpha / 2) / np.sqrt(t))}


def _looks_crossed(sizes: list[int], limits: list[float], draws: int = 200_000, seed: int = 0) -> float:
    """Monte Carlo under Δ = 0: the share of loops whose z crosses some look's boundary (the looks' labels nest, so
    S_k = Z_k √n_k has independent increments)."""
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((draws, len(sizes))) * np.sqrt(np.diff([0, *sizes]))
    z = np.cumsum(steps, axis=1) / np.sqrt(sizes)
    bounds = np.array([NORMAL.inv_cdf(1 - limit) if limit > 0 else np.inf for limit in limits])
    return float((z >= bounds).any(axis=1).mean())


def test_one_look_at_the_cap_is_tested_at_the_limit_itself() -> None:
    for spending in PLANS.values():
        assert nominal_limits([400], 0.1, spending) == [pytest.approx(0.1, abs=1e-12)]
        assert nominal_limits([1000], 0.2, spending) == [pytest.approx(0.2, abs=1e-12)]


@pytest.mark.parametrize("spending", sorted(PLANS))
@pytest.mark.parametrize("sizes", [[100, 200, 400], [50, 100, 200, 400], [100, 150, 400]], ids=str)
def test_every_plan_uses_a_no_better_model_at_most_at_the_limit_over_all_its_looks(spending: str,
                                                                                  sizes: list[int]) -> None:
    limits = nominal_limits(sizes, 0.2, PLANS[spending])
    assert all(0 < limit < 0.2 for limit in limits[:-1])  # each interim look is held below the limit
    # 200,000 loops: a rate near 0.2 has a Monte-Carlo SE of 0.0009; 4 SE
    assert _looks_crossed(sizes, limits) == pytest.approx(0.2, abs=0.0036)


def test_looking_again_at_the_same_limit_uses_a_no_better_model_more_often_than_it_says() -> None:
    """Why the looks share the limit: three looks at 0.10 each use a no-better model in ~19 % of loops."""
    assert _looks_crossed([100, 200, 400], [0.1, 0.1, 0.1]) > 0.17


def test_the_sqrt_plan_spends_half_the_limit_at_a_quarter_of_the_labels() -> None:
    # α √t at t = 100/400: the first look at 100 labels is tested at 0.2 · 0.5 = 0.1
    assert nominal_limits([100, 200, 400], 0.2, "sqrt")[0] == pytest.approx(0.1, abs=1e-12)
    with pytest.raises(ValueError, match="must increase"):
        nominal_limits([200, 100], 0.2)


def test_a_look_uses_keeps_or_asks_for_more_labels() -> None:
    look = look_of([100], 0.2, "sqrt")
    assert (look.number, look.limit, look.next_size, look.last) == (1, pytest.approx(0.1), 200, False)
    assert look.verdict(0.05, 1.2) == USE
    assert look.verdict(0.05, -0.1) == MORE  # below the base on these labels: never used, whatever the risk
    assert look.verdict(0.3, 0.5) == MORE  # inconclusive: 100 more labels
    assert look.verdict(FUTILITY_RISK + 0.01, -1.0) == KEEP  # a gain is implausible: stop early
    last = look_of([100, 200, 400], 0.2, "sqrt")
    assert last.last and last.next_size is None and last.verdict(0.3, 0.5) == KEEP
    assert (next_size(50), next_size(300), next_size(400)) == (100, 400, None)


def test_the_chance_the_next_look_settles_it_grows_with_the_measured_z() -> None:
    limit = look_of([100, 200], 0.2).limit
    weak, strong = conditional_power(0.5, 100, 200, limit), conditional_power(2.0, 100, 200, limit)
    assert 0 < weak < 0.5 < strong < 1
    # at the measured drift the next z is about z √2: from z = 2.0, 2.83 against the boundary
    assert strong == pytest.approx(1 - NORMAL.cdf((NORMAL.inv_cdf(1 - limit) * np.sqrt(200) - 2.0 * np.sqrt(100)
                                                   - 2.0 / 10 * 100) / 10), abs=1e-12)
