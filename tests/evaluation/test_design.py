"""pairs/design.py: the importance design that chooses which pairs to label (issue 58)."""

from __future__ import annotations

import numpy as np
import pytest

from sentadapt.pairs.design import (
    design_shape,
    disagreement,
    draw_sample,
    inclusion_probabilities,
    nested_sample,
    order_keys,
)


def test_probabilities_sum_to_n_with_a_uniform_floor_and_caps_at_one() -> None:
    d = np.array([0.0] * 90 + [50.0] * 10)  # ten pairs hold nearly all the disagreement
    probabilities = inclusion_probabilities(d, 20, uniform_share=0.5)
    assert probabilities.sum() == pytest.approx(20)
    assert probabilities.max() == 1.0 and np.count_nonzero(probabilities == 1.0) == 10  # certain, then spread
    # the other 10 labels go to the 90 quiet pairs, evenly: each is still drawable
    np.testing.assert_allclose(probabilities[:90], 10 / 90)
    # no disagreement anywhere: a uniform design
    np.testing.assert_allclose(inclusion_probabilities(np.zeros(50), 5), 0.1)
    with pytest.raises(ValueError, match="cannot choose 60 of 50 candidates"):
        inclusion_probabilities(np.zeros(50), 60)


def test_the_share_of_probability_follows_the_disagreement() -> None:
    d = np.linspace(-2, 2, 200)
    probabilities = inclusion_probabilities(d, 40, uniform_share=0.3)
    expected = 40 * (0.3 / 200 + 0.7 * np.abs(d) / np.abs(d).sum())
    np.testing.assert_allclose(probabilities, expected)


def test_sequential_poisson_sampling_draws_n_distinct_pairs_at_their_inclusion_probabilities() -> None:
    rng = np.random.default_rng(3)
    d = rng.standard_normal(300)
    probabilities = inclusion_probabilities(d, 30, uniform_share=0.3)
    draws = 3000
    seen = np.zeros(300)
    for seed in range(draws):
        rows, inclusion, _ = draw_sample(d, 30, np.random.default_rng(seed), uniform_share=0.3)
        assert len(np.unique(rows)) == 30 and np.all(np.diff(rows) > 0)
        np.testing.assert_array_equal(inclusion, probabilities[rows])
        seen[rows] += 1
    # binomial SE of a frequency at π ≤ 0.5 over 3,000 draws is ≤ 0.009; sequential Poisson πps at these π (≤ 0.3)
    # is within ~0.01 of π (Ohlsson 1998)
    assert np.abs(seen / draws - probabilities).max() < 0.04
    assert np.corrcoef(seen / draws, probabilities)[0, 1] > 0.99


def test_a_larger_draw_with_the_same_keys_contains_the_smaller_one_and_draws_at_its_own_probabilities() -> None:
    """The label-more loop's rounds (issue 83): 100, then 200, then 400 of 2,000 candidates, with one set of keys."""
    rng = np.random.default_rng(5)
    d = rng.standard_normal(2000) ** 3  # heavy tails: some pairs become certain as the draw grows
    shape = design_shape(d)
    seen = {size: np.zeros(2000) for size in (100, 200, 400)}
    draws = 1500
    for seed in range(draws):
        keys = order_keys(np.random.default_rng(seed).random(2000), shape)
        earlier: np.ndarray | None = None
        for size in (100, 200, 400):
            rows = nested_sample(inclusion_probabilities(d, size), keys, size, kept=earlier)
            assert len(rows) == size
            if earlier is not None:
                assert np.isin(earlier, rows).all()  # every labelled pair stays
            earlier = rows
            seen[size][rows] += 1
    for size, counts in seen.items():
        probabilities = inclusion_probabilities(d, size)
        assert np.abs(counts / draws - probabilities).max() < 0.06, size
        assert np.corrcoef(counts / draws, probabilities)[0, 1] > 0.99, size


def test_disagreement_is_the_difference_of_standardised_ranks() -> None:
    base = np.array([0.1, 0.5, 0.3, 0.9])
    assert np.all(disagreement(base, base * 2 + 1) == 0)  # a monotone rescaling ranks alike
    d = disagreement(base, np.array([0.9, 0.5, 0.3, 0.1]))  # the reverse order
    assert d[0] > 0 > d[3] and d.sum() == pytest.approx(0)
