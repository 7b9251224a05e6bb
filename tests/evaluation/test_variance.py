"""The calibrated SE of a paired dev Δ (sentadapt/evaluation/variance.py, issue 68): parity with the textbook SE of a
mean and with a derivative of scipy's Spearman, the design factor, coverage on a synthetic finite pool (where the
bootstrap over-covers) and a family-wise max-T."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from sentadapt.evaluation import bootstrap, weighted_stats
from sentadapt.evaluation.variance import groups_of, influence_se, influence_values, normal_interval
from sentadapt.pairs.design import disagreement, draw_sample

Z95 = 1.959963984540054


def pool(size: int = 600, seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gold 0-5, base cosines, adapted cosines): two models that rank alike (ρ ≈ 0.95), as a run and its base."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=size)
    gold = np.clip(np.round(1.2 * z + 2.5), 0, 5)
    base = z + rng.normal(scale=0.6, size=size)
    adapted = base + 0.1 * (z - base) + rng.normal(scale=0.3, size=size)
    return gold, base, adapted


def delta_statistic(gold: np.ndarray, base: np.ndarray, adapted: np.ndarray, weights: np.ndarray | None = None):
    """Δ Spearman × 100 of a count block, weighted as the evaluator weighs a chosen dev set."""
    groups, base_groups, adapted_groups = (weighted_stats.TieGroups(v) for v in (gold, base, adapted))

    def statistic(counts: np.ndarray) -> np.ndarray:
        weighted = counts if weights is None else counts * weights
        return 100 * (weighted_stats.weighted_spearman(weighted, adapted_groups, groups)
                      - weighted_stats.weighted_spearman(weighted, base_groups, groups))
    return statistic


def spearman_delta(gold: np.ndarray, base: np.ndarray, adapted: np.ndarray) -> float:
    return 100 * (spearmanr(adapted, gold).statistic - spearmanr(base, gold).statistic)


def test_for_a_mean_it_is_the_textbook_standard_error() -> None:
    """A mean over queries (MRR, nDCG): ε_i = (v_i − v̄)/n exactly, so the SE is √(Σ(v − v̄)² / (n(n − 1)))."""
    values = np.random.default_rng(5).random(50)
    effects = influence_values(50, {"m": lambda counts: counts @ values / counts.sum(axis=1)})["m"]
    np.testing.assert_allclose(effects, (values - values.mean()) / 50, atol=1e-9)
    textbook = np.sqrt(np.sum((values - values.mean()) ** 2) / (50 * 49))
    assert influence_se(effects, 50) == pytest.approx(textbook, rel=1e-6)


def test_a_pairs_influence_on_a_spearman_delta_is_its_weights_derivative() -> None:
    """ε_i against scipy: the Δ of Spearman with pair i counted twice minus with it counted once, per unit of weight
    (a duplicate is a weight of 2) — the same direction and, for a pair that matters, the same size within 10 %."""
    gold, base, adapted = (values[:80] for values in pool())
    effects = influence_values(80, {"d": delta_statistic(gold, base, adapted)})["d"]
    full = spearman_delta(gold, base, adapted)
    doubled = np.array([spearman_delta(np.append(gold, gold[i]), np.append(base, base[i]),
                                       np.append(adapted, adapted[i])) - full for i in range(80)])
    large = np.abs(doubled) > np.quantile(np.abs(doubled), 0.5)
    assert np.corrcoef(effects, doubled)[0, 1] > 0.99
    np.testing.assert_allclose(effects[large], doubled[large], rtol=0.1)


def test_the_design_factor_removes_pairs_drawn_with_certainty_and_scales_a_uniform_draw() -> None:
    gold, base, adapted = (values[:60] for values in pool())
    effects = influence_values(60, {"d": delta_statistic(gold, base, adapted)})["d"]
    plain = influence_se(effects, 60)
    # a uniform draw of 60 from 300: the variance shrinks by 1 − 60/300
    assert influence_se(effects, 60, np.full(60, 0.2)) == pytest.approx(plain * np.sqrt(0.8), rel=1e-9)
    assert influence_se(effects, 60, np.ones(60)) == 0.0  # the whole population: no error


def test_many_units_move_in_balanced_groups_the_same_for_every_model() -> None:
    groups = groups_of(5000)
    assert groups.max() == 1999 and np.bincount(groups).min() >= 2 and np.array_equal(groups, groups_of(5000))
    assert np.array_equal(groups_of(300), np.arange(300))


def coverage_and_ratio(design: str, draws: int = 600, size: int = 100,
                       ) -> tuple[float, float, float, float, float]:
    """(calibrated coverage, bootstrap coverage, mean weighted Δ − pool Δ, calibrated SE ÷ RMSE, bootstrap SE ÷
    RMSE) over `draws` dev sets of `size` drawn from the pool without replacement."""
    gold, base, adapted = pool()
    truth = spearman_delta(gold, base, adapted)
    guide = disagreement(base, adapted)
    rng = np.random.default_rng(11)
    hits, boot_hits, errors, ses, boot_ses = [], [], [], [], []
    for draw in range(draws):
        if design == "uniform":
            rows = np.sort(rng.permutation(len(gold))[:size])
            inclusion = np.full(size, size / len(gold))
        else:
            rows, inclusion, _ = draw_sample(guide, size, rng)
        weights = 1.0 / inclusion
        statistic = delta_statistic(gold[rows], base[rows], adapted[rows], weights)
        value = float(statistic(np.ones((1, size)))[0])
        se = influence_se(influence_values(size, {"d": statistic})["d"], size, inclusion)
        low, high = normal_interval(value, se, 0.95)
        replicates = bootstrap.replicate(size, 400, draw, {"d": statistic})["d"]
        boot_low, boot_high = bootstrap.interval(replicates)
        boot_ses.append(float(np.std(replicates, ddof=1)))
        hits.append(low <= truth <= high)
        boot_hits.append(boot_low <= truth <= boot_high)
        errors.append(value - truth)
        ses.append(se)
    rmse = float(np.sqrt(np.mean(np.square(errors))))
    return (float(np.mean(hits)), float(np.mean(boot_hits)), float(np.mean(errors)), float(np.mean(ses)) / rmse,
            float(np.mean(boot_ses)) / rmse)


@pytest.mark.parametrize(("design", "size"), [("uniform", 150), ("chosen", 100)])
def test_on_a_finite_pool_the_interval_covers_at_its_level_where_the_bootstrap_over_covers(design: str,
                                                                                         size: int) -> None:
    """600 draws from 600 pairs (fixed seeds): a coverage's Monte-Carlo SE is 0.9 points, so 93-97 % is the nominal
    95 % ± 2 SE; the SE's ratio to the error's RMSE is held within 7 %. The bootstrap, on the same draws, covers
    above the nominal level with an SE at least 10 % too large: the test tells the two apart."""
    covered, boot_covered, bias, ratio, boot_ratio = coverage_and_ratio(design, size=size)
    assert 0.93 <= covered <= 0.97, covered
    assert 0.93 <= ratio <= 1.07, ratio  # the SE is the error's size, not a multiple of it
    assert boot_ratio >= 1.1 and boot_covered > covered, (boot_ratio, boot_covered)
    assert abs(bias) < 0.25, bias  # the weighted Δ estimates the pool's Δ: 0.25 is ~3 Monte-Carlo SE of the mean


def test_a_studentised_max_t_uses_no_better_models_at_most_at_the_risk_limits_rate() -> None:
    """Five correlated evaluations whose Δ over the pool is 0 (the adapted model's noise around the base's ranking,
    half of it shared): the best is used at risk ≤ 0.2 in at most 20 % of 400 draws, + 2 Monte-Carlo SE."""
    from sentadapt.evaluation.evidence import weigh

    rng = np.random.default_rng(3)
    size_pool, size = 2000, 100
    z = rng.normal(size=size_pool)
    gold = np.clip(np.round(1.2 * z + 2.5), 0, 5)
    base = z + rng.normal(scale=0.6, size=size_pool)
    shared = rng.normal(scale=0.2, size=size_pool)
    options = [base + shared + rng.normal(scale=0.2, size=size_pool) for _ in range(5)]
    used = 0
    for draw in range(400):
        rows = np.sort(rng.permutation(size_pool)[:size])
        groups = weighted_stats.TieGroups(gold[rows])

        def spearman(values: np.ndarray, rows: np.ndarray = rows, groups: weighted_stats.TieGroups = groups) -> object:
            value_groups = weighted_stats.TieGroups(values[rows])
            return lambda counts: 100 * weighted_stats.weighted_spearman(counts, value_groups, groups)

        statistics = {"base": spearman(base), **{f"o{k}": spearman(option) for k, option in enumerate(options)}}
        replicates = bootstrap.replicate(size, 300, draw, statistics)
        effects = influence_values(size, statistics)
        full = {name: float(statistic(np.ones((1, size)))[0]) for name, statistic in statistics.items()}
        values = [full[f"o{k}"] for k in range(5)]
        chosen = int(np.argmax(values))
        ses = [influence_se(effects[f"o{k}"] - effects["base"], size) for k in range(5)]
        evidence = weigh(replicates["base"], [replicates[f"o{k}"] for k in range(5)], full["base"], values, chosen,
                         size, standard_errors=ses)
        used += evidence is not None and values[chosen] > full["base"] and evidence.risk <= 0.2
    truths = [spearman_delta(gold, base, option) for option in options]
    assert max(truths) < 0.5  # no option is clearly better over the pool (a sliver of chance gain at most)
    assert used / 400 <= 0.2 + 2 * np.sqrt(0.2 * 0.8 / 400), used
