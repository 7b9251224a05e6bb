"""Checks of a user's labelled pairs file (`eval --pairs`, `adapt --dev`) beyond what each row says alone.

A dev set's confidence interval counts its pairs: a pair listed twice is counted twice and narrows the interval the
decision reads, a pair labelled both ways makes one of its labels wrong, and a score off the file's own scale (7.5
among 0-5 scores) is a typo that moves the gold order. Each is one line naming the rows (docs/reliability.md,
"Labelled pairs"). Benchmark files (STS-B and the others) are not checked here: their readers fix the range.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sentadapt.errors import DataError

# The scales a graded column is usually written on; a file's evident scale is the smallest holding all its scores
# but a few (`odd_labels_allowed`, the count the 0/1 typo rule allows too). Spearman reads only the order, so any
# of them is fine as a whole (0-100 included).
STANDARD_SCALES = ((0.0, 1.0), (0.0, 5.0), (0.0, 10.0), (0.0, 100.0))
ODD_SHARE = 0.05  # see odd_labels_allowed


def odd_labels_allowed(labelled: int) -> int:
    """How many values may lie off what the rest of a column of `labelled` values are and still be typos (an error)
    rather than another kind of column: values other than 0 and 1 among 0/1 labels (pair_files.labels_are_graded),
    scores off a scale that holds the rest (`_check_scale`, 7.5 among 0-5). One, or 5 % of a large file, and always
    under a quarter of the column (4 labels with one 3 are scores, 4 scores with one 7.5 a 0-10 scale). A column
    of graded scores has far more values off 0/1: 88 % of STS-B dev's, 64 % of STS16's (the lowest in
    ../shared/data/sts)."""
    return min(max(1, int(ODD_SHARE * labelled)), (labelled - 1) // 4)


def check_labelled_file(path: Path, first: Sequence[str], second: Sequence[str], values: Sequence[float],
                        lines: Sequence[int], column: str, graded: bool) -> None:
    """One line for the first repeated pair (in either order), the first pair labelled two ways, or (graded
    columns) the first score off the file's evident scale."""
    _check_repeats(path, first, second, values, lines, column)
    if graded:
        _check_scale(path, values, lines, column)


def _check_repeats(path: Path, first: Sequence[str], second: Sequence[str], values: Sequence[float],
                   lines: Sequence[int], column: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for index, (a, b) in enumerate(zip(first, second)):
        a, b = a.strip(), b.strip()
        key = (a, b) if a <= b else (b, a)
        earlier = seen.setdefault(key, index)
        if earlier == index:
            continue
        order = "in the same order" if first[earlier].strip() == a else "in the other order"
        if values[earlier] != values[index]:
            raise DataError(f"{path}:{lines[index]}: the pair of line {lines[earlier]} again ({order}), with {column} "
                            f"{values[index]:g} here and {values[earlier]:g} there; keep one row, with the "
                            f"{column} you mean")
        raise DataError(f"{path}:{lines[index]}: the pair of line {lines[earlier]} again ({order}); keep each pair "
                        "once (a pair counted twice narrows the confidence interval the decision reads)")


def _check_scale(path: Path, values: Sequence[float], lines: Sequence[int], column: str) -> None:
    for low, high in STANDARD_SCALES:
        outside = [index for index, value in enumerate(values) if not low <= value <= high]
        if not outside:
            return
        if len(outside) <= odd_labels_allowed(len(values)):
            index = outside[0]
            others = "" if len(outside) == 1 else f" (and {len(outside) - 1} more row(s))"
            raise DataError(f"{path}:{lines[index]}: {column} {values[index]:g} is off this file's scale "
                            f"{low:g}-{high:g}, which holds {len(values) - len(outside)} of its {len(values)} "
                            f"scores{others}; fix it, or delete the row")
