"""research/experiments/trans_encoder.py's mining (no model): neighbour and random pairs, the corpus sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from research.experiments.trans_encoder import mine_pairs, read_corpus


def test_mine_pairs_neighbours_then_as_many_distinct_random_pairs() -> None:
    torch.manual_seed(0)
    units = torch.nn.functional.normalize(torch.randn(40, 8), dim=-1)
    pairs, near = mine_pairs(units, neighbours=2, limit=40, rng=np.random.default_rng(0))
    assert near.sum() == (~near).sum() == 20  # capped at limit // 2 neighbour pairs, as many random ones
    assert (pairs[:, 0] < pairs[:, 1]).all()  # i < j, no self-pairs
    assert len({tuple(p) for p in pairs.tolist()}) == len(pairs)  # no pair twice, random ones not among neighbours
    sims = units @ units.T
    sims.fill_diagonal_(-float("inf"))
    top = sims.topk(2, dim=1).indices
    for i, j in pairs[near].tolist():  # every neighbour pair is a top-2 neighbour one way or the other
        assert j in top[i].tolist() or i in top[j].tolist()


def test_read_corpus_dedupes_and_samples(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("a\nb\n\na\nc\nd\ne\n", encoding="utf-8")
    assert read_corpus(path, 10, seed=0) == ["a", "b", "c", "d", "e"]
    sample = read_corpus(path, 3, seed=0)
    assert len(sample) == 3 and sample == sorted(sample)  # a sample, in file order
    assert sample == read_corpus(path, 3, seed=0)  # seeded
