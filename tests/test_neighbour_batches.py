"""Batches the teacher composes (`--set distill_batches=neighbours`): anchors beside their teacher neighbours."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentadapt.config import TrainConfig
from sentadapt.data import batching
from sentadapt.data.batching import plan_epoch, plan_neighbour_epoch, related_rows, teacher_neighbours
from sentadapt.errors import ConfigError, DataError
from sentadapt.rowfile import RowFile, write_rows


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


def test_related_rows_are_the_anchor_neighbour_pairs_and_repeated_examples() -> None:
    related = related_rows(np.array([10, 11, 12, 10, 13, 14]))  # example 10: an anchor, and again at position 3
    expected = {(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4), (0, 3), (3, 0)}
    assert {(int(i), int(j)) for i, j in zip(*np.nonzero(related))} == expected


def test_a_share_of_neighbours_pairs_the_other_anchors_with_random_partners() -> None:
    neighbours = brute_force(np.random.default_rng(2).standard_normal((400, 8)), 3)
    full = plan_neighbour_epoch(neighbours, 40, seed=5, epoch=1)
    half = plan_neighbour_epoch(neighbours, 40, seed=5, epoch=1, share=0.5)
    assert np.array_equal(full, plan_neighbour_epoch(neighbours, 40, seed=5, epoch=1, share=1.0))  # today's plan
    assert np.array_equal(half[:, 0::2], full[:, 0::2])  # the same anchors: only partners change
    anchors, partners = half[:, 0::2].ravel(), half[:, 1::2].ravel()
    close = np.array([partner in neighbours[anchor] for anchor, partner in zip(anchors, partners)])
    assert 0.35 < close.mean() < 0.65  # 200 pairs, each a neighbour with probability 0.5 (+ 3/400 by chance)
    assert np.array_equal(half, plan_neighbour_epoch(neighbours, 40, seed=5, epoch=1, share=0.5))  # resume


def test_a_random_partner_stays_a_negative_of_its_anchor() -> None:
    neighbours = np.array([[1], [0], [3], [2], [5], [4]])  # 0-1, 2-3 and 4-5 are each other's neighbours
    related = related_rows(np.array([0, 1, 2, 5]), neighbours)  # pair (2, 5): a random partner
    assert {(int(i), int(j)) for i, j in zip(*np.nonzero(related))} == {(0, 1), (1, 0)}
    assert related_rows(np.array([0, 1, 2, 5])).sum() == 4  # without the table every pair is related


def test_distill_neighbour_share_out_of_range_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"distill_neighbour_share: 0.0 is out of range; valid: \(0, 1\]"):
        TrainConfig(distill_neighbour_share=0.0).validate()


def test_a_masked_batch_relates_only_its_neighbour_pairs_when_rows_are_held_out() -> None:
    """The plan and `neighbours` hold positions among the trained rows; the batch's examples are those rows."""
    from sentadapt.recipes.base import RELATED
    from sentadapt.train.micro_batches import MicroBatches

    rows = np.arange(0, 400, 2)  # every other example trained: position p is example 2p
    neighbours = brute_force(np.random.default_rng(3).standard_normal((200, 8)), 3)
    config = TrainConfig(batch_size=20, seed=1, mask_neighbours=True, distill_neighbour_share=0.5)
    collated: list[np.ndarray] = []

    class Examples:
        def lengths(self) -> np.ndarray:
            return np.full(400, 5)

        def collate(self, indices, pad_id, multiple):
            collated.append(np.asarray(indices))
            return {}

    batch = MicroBatches(Examples(), config, 0, 1, neighbours, None, 0, 1, rows)(3)
    positions = collated[-1] // 2
    assert (collated[-1] % 2 == 0).all()  # trained rows only
    pairs = [(2 * k, 2 * k + 1) for k in range(10) if positions[2 * k + 1] in neighbours[positions[2 * k]]]
    assert 0 < len(pairs) < 10  # some neighbour pairs, some random ones
    related = batch[RELATED].numpy()
    assert {(int(i), int(j)) for i, j in zip(*np.nonzero(np.triu(related)))} == set(pairs) | {
        (i, j) for i in range(20) for j in range(i + 1, 20) if positions[i] == positions[j]}
