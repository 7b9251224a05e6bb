"""The label-more loop's next round (issue 83): more pairs from the same candidates, by the same design, continued.

When a look is inconclusive (decision/sequential.py), `decide` writes the next file to label: every pair of the
file it read, with its label, and the pairs the design's nested draw adds at the next look's size, their label
empty. Every weight is 1/π at the new size (pairs/design.py: the keys do not change, so the larger draw holds the
smaller one and no labelled pair is drawn again). The pairs the user deleted from the earlier file (unjudgeable)
stay drawn and stay out, as they were. FILE.design.json and the candidates go beside the new file, so the round
after continues the same way; the next `decide` reads the new file alone — it holds every round.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sentadapt.data.pair_files import WEIGHT, pair_records
from sentadapt.data.textfile import at
from sentadapt.errors import DataError
from sentadapt.pairs.design import (
    DesignCandidates,
    design_shape,
    inclusion_probabilities,
    nested_sample,
    order_keys,
    read_candidates_of,
    read_design,
    write_candidates,
    write_design,
)
from sentadapt.pairs.devset import write_pairs_file

LABEL_COLUMNS = ("label", "score")  # what a labelled row's value is read from (the file `pairs` writes: label)
_ROUND = re.compile(r"\.round(\d+)$")


@dataclass(frozen=True)
class NextRound:
    """What `write_next_round` wrote."""

    path: Path
    total: int  # the pairs of the new file: every round's
    added: int  # the new pairs to label
    labelled: int  # the pairs carried over with their labels


def next_round_path(label_file: Path, number: int) -> Path:
    """to-label.tsv → to-label.round2.tsv (round `number`); to-label.round2.tsv → to-label.round3.tsv."""
    stem = _ROUND.sub("", label_file.stem)
    return label_file.with_name(f"{stem}.round{number}{label_file.suffix}")


def can_continue(label_file: Path) -> bool:
    """The file was drawn by a design whose candidates are kept beside it: the loop can draw its next round."""
    return read_design(label_file) is not None and read_candidates_of(label_file) is not None


def write_next_round(label_file: Path, total: int, next_command: Callable[[Path], str]) -> NextRound | None:
    """The next round's file (module docstring) with `total` pairs in all, or None when the file has no design with
    its candidates beside it (a file of the user's own, or one written before issue 83)."""
    design, candidates = read_design(label_file), read_candidates_of(label_file)
    if design is None or candidates is None:
        return None
    where = {(first, second): index for index, (first, second)
             in enumerate(zip(candidates.sentence1, candidates.sentence2, strict=True))}
    present: list[tuple[int, str]] = []
    for number, record in pair_records(label_file, ("sentence1", "sentence2")):
        index = where.get((str(record.get("sentence1")), str(record.get("sentence2"))))
        if index is None:
            raise DataError(f"{at(label_file, number)}: a pair that is not among the candidates its design drew from; "
                            "the next round continues that design: restore the pair `sentadapt pairs` wrote, or "
                            "delete the row")
        label = next((record.get(name) for name in LABEL_COLUMNS if record.get(name) not in (None, "")), "")
        present.append((index, str(label)))
    total = min(total, len(candidates.sentence1))
    keys = order_keys(candidates.uniform, design_shape(candidates.disagreement, design.uniform_share))
    earlier = nested_sample(inclusion_probabilities(candidates.disagreement, design.pairs, design.uniform_share),
                            keys, design.pairs)  # the earlier draw, deleted rows included: they stay out
    probabilities = inclusion_probabilities(candidates.disagreement, total, design.uniform_share)
    rows = nested_sample(probabilities, keys, total, kept=earlier)
    added = np.setdiff1d(rows, earlier)
    np.random.default_rng([design.seed, design.round + 1]).shuffle(added)  # no anchoring on the candidates' order
    path = next_round_path(label_file, design.round + 1)
    header = ["sentence1", "sentence2", *candidates.columns, WEIGHT, "label"]
    lines = [_row(candidates, index, probabilities, label) for index, label in present]
    lines += [_row(candidates, int(index), probabilities, "") for index in added]
    write_pairs_file(path, next_command(path), header, lines)
    write_design(path, dataclasses.replace(design, pairs=total, round=design.round + 1))
    write_candidates(path, candidates.sentence1, candidates.sentence2, candidates.columns, candidates.extra,
                     candidates.disagreement, candidates.uniform)
    return NextRound(path, len(present) + len(added), len(added), len(present))


def _row(candidates: DesignCandidates, index: int, probabilities: np.ndarray, label: str) -> list[str]:
    return [candidates.sentence1[index], candidates.sentence2[index], *candidates.extra[index],
            f"{1.0 / probabilities[index]:.6g}", label]
