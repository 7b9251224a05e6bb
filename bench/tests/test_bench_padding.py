"""bench.bench_padding: the padding figures of an epoch plan, with and without length grouping."""

from __future__ import annotations

import numpy as np
import pytest

from bench import bench_padding


def test_grouping_removes_the_padding_of_two_length_classes() -> None:
    figures = bench_padding.padding_figures
    # 50 batches × 4 of lengths 2 and 10: one grouping window sorts them into all-2 and all-10 batches
    lengths = np.array([2, 10] * 100)
    grouped = figures(lengths, 4, grouped=True)
    assert grouped["useful_tokens"] == 1.0 and grouped["useful_attention"] == 1.0
    assert grouped["mean_longest"] == 6.0  # half the batches are all 2, half all 10
    random = figures(lengths, 4, grouped=False)
    # a random batch of 4 holds a 10 unless all four are 2s (≈ 1/16): most pad their 2s up to 10
    assert random["useful_tokens"] < 0.7 and random["mean_longest"] > 9.0


def test_equal_lengths_have_no_padding_either_way() -> None:
    figures = bench_padding.padding_figures
    for grouped in (False, True):
        assert figures(np.full(64, 7), 8, grouped) == pytest.approx(
            {"useful_tokens": 1.0, "useful_attention": 1.0, "mean_longest": 7.0})
