"""Batches the teacher composes (`--set distill_batches=neighbours`): anchors beside their teacher neighbours."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentadapt.data import batching
from sentadapt.data.batching import plan_epoch, plan_neighbour_epoch, teacher_neighbours
from sentadapt.errors import DataError
from sentadapt.storage.rowfile import RowFile, write_rows


def brute_force(vectors: np.ndarray, k: int) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit @ unit.T
    np.fill_diagonal(cosines, -2)
    return np.argsort(-cosines, axis=1, kind="stable")[:, :k]


def test_exact_neighbours_match_a_brute_force_search() -> None:
    vectors = np.random.default_rng(0).standard_normal((300, 12)).astype(np.float32)
    found = teacher_neighbours(vectors, 5)
    expected = brute_force(vectors.astype(np.float64), 5)
    assert found.shape == (300, 5)
    # the same sets (an order among near-equal cosines may differ between float32 kernels)
    assert all(set(a) == set(b) for a, b in zip(found, expected))


def test_above_the_exact_limit_rows_are_searched_in_hash_windows(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """Clusters of 20 near-identical directions: the hash puts each cluster together, so the windows find them."""
    monkeypatch.setattr(batching, "EXACT_NEIGHBOURS", 64)
    monkeypatch.setattr(batching, "WINDOW", 100)
    generator = np.random.default_rng(1)
    centres = generator.standard_normal((25, 16))
    vectors = (np.repeat(centres, 20, axis=0) + 0.01 * generator.standard_normal((500, 16))).astype(np.float32)
    with write_rows(tmp_path / "t.npy", 500, 16) as writer:
        writer.append(vectors)
    table = RowFile.open(tmp_path / "t.npy", 500)
    found = teacher_neighbours(table, 4)
    assert found.shape == (500, 4) and (found != np.arange(500)[:, None]).all()
    same_cluster = (found // 20) == (np.arange(500) // 20)[:, None]
    assert same_cluster.mean() > 0.9


def test_a_neighbour_epoch_pairs_each_anchor_with_one_of_its_neighbours() -> None:
    neighbours = brute_force(np.random.default_rng(2).standard_normal((103, 8)), 3)
    plan = plan_neighbour_epoch(neighbours, 8, seed=5, epoch=1)
    assert plan.shape == (103 // 8, 8) == plan_epoch(np.ones(103), 8, 5, 1, False).shape  # as many steps
    anchors, partners = plan[:, 0::2], plan[:, 1::2]
    assert all(partner in neighbours[anchor] for anchor, partner in zip(anchors.ravel(), partners.ravel()))
    assert len(set(anchors.ravel())) == anchors.size  # each example at most once as an anchor per epoch
    assert np.array_equal(plan, plan_neighbour_epoch(neighbours, 8, seed=5, epoch=1))  # resume rebuilds it
    assert not np.array_equal(plan, plan_neighbour_epoch(neighbours, 8, seed=5, epoch=2))
    with pytest.raises(DataError, match="batch_size: 7 is odd"):
        plan_neighbour_epoch(neighbours, 7, seed=5, epoch=1)
