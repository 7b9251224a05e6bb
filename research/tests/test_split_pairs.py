"""research/experiments/split_pairs.py: how examples/'s dev and test halves were split."""

from __future__ import annotations

import pytest

from research.experiments import split_pairs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_disjoint_split_keeps_linked_pairs_together_and_corpus_pairs_on_the_selection_side(seed: int) -> None:
    rows = [[f"a{i}", f"b{i}", str(i % 6)] for i in range(40)]
    rows += [["a0", "c0", "5"], ["c0", "c1", "0"], ["corpus sentence", "d0", "3"]]  # a0–c0–c1 chain; a corpus pair
    selection, heldout = split_pairs.disjoint_split(rows, 2, {"corpus sentence"}, seed)
    assert sorted(selection + heldout) == list(range(len(rows)))
    assert len(heldout) == 22  # half of 43, rounded up
    sentences = [{s for i in side for s in rows[i][:2]} for side in (selection, heldout)]
    assert not sentences[0] & sentences[1]
    assert 42 in selection
    assert ({0, 40, 41} <= set(selection)) or ({0, 40, 41} <= set(heldout))
    for band in range(6):  # stratified: each score band split about evenly
        held = sum(1 for i in heldout if float(rows[i][2]) == band)
        total = sum(1 for row in rows if float(row[2]) == band)
        assert abs(held - total / 2) <= 2, (band, held, total)
