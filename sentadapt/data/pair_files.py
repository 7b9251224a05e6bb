"""Readers for scored sentence pairs: a user's labelled pairs (tsv/csv/jsonl) and STS JSON Lines files, and the checks
of a user's labelled pairs file (`eval --pairs`, `adapt --dev`) beyond what each row says alone.

A dev set's confidence interval counts its pairs: a pair listed twice is counted twice and narrows the interval the
decision reads, a pair labelled both ways makes one of its labels wrong, and a score off the file's own scale (7.5
among 0-5 scores) is a typo that moves the gold order. Each is one line naming the rows (docs/reliability.md,
the labelled pairs file's row). Benchmark files (STS-B and the others) are not checked there: their readers fix
the range."""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sentadapt.data.textfile import (
    CSV,
    JSON_ARRAY,
    JSONL,
    PARQUET,
    TSV,
    Utf8Lines,
    at,
    json_objects,
    parquet_file,
    parquet_records,
    require_format,
    starts_json_array,
    table_error,
    table_reader,
    text_lines,
)
from sentadapt.errors import DataError

# ----------------------------------------------------------------------------------------- the readers


PAIR_COLUMNS = ("sentence1", "sentence2", "score")
# The label rule, the one statement of it (the `pairs` file's header, eval --pairs, adapt --dev and their errors):
# a 'label' column holds 0/1 (pair classification) or graded scores (STS, when a label is neither 0 nor 1).
LABEL_RULE = "1 = same meaning, 0 = different, or a similarity score such as 0-5"
PAIR_FORMATS = (TSV, CSV, JSONL, PARQUET)
COMMENT = "#"  # lines starting with it at the top of a tsv/csv are a comment header (`sentadapt pairs` writes one)
# A chosen dev set's column: 1 / the pair's inclusion probability (pairs/design.py), what each pair stands for
WEIGHT = "weight"
LABEL_FILE_MARK = "# Label each pair"  # the first line of a file `pairs` wrote: what `--overwrite` may replace
DESIGN_SUFFIX = ".design.json"  # FILE.design.json: how `sentadapt pairs` chose FILE's pairs (pairs/design.py)


@dataclass
class ScoredPairs:
    """Sentence pairs with gold similarity scores (and the subset each pair came from)."""

    sentence1: list[str] = field(default_factory=list)
    sentence2: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    subsets: list[str] = field(default_factory=list)
    source: str = ""
    lines: list[int] = field(default_factory=list)  # each pair's line in its file (0: not read from a file)
    weights: list[float] = field(default_factory=list)  # design weights of a chosen dev set; empty: every pair alike
    design: bool = False  # the weights are a design's (1 / inclusion probability: a .design.json beside the file)

    def __len__(self) -> int:
        return len(self.scores)

    def append(self, s1: str, s2: str, score: float, subset: str = "", line: int = 0) -> None:
        self.sentence1.append(s1)
        self.sentence2.append(s2)
        self.scores.append(score)
        self.subsets.append(subset)
        self.lines.append(line)

    def check_usable(self) -> None:
        """Spearman needs at least two pairs and at least two distinct gold scores."""
        if len(self) == 0:
            raise DataError(no_pairs_message(self.source))
        if len(set(self.scores)) < 2:
            raise DataError(
                f"{self.source}: all {len(self)} gold scores are equal ({self.scores[0]:g}); "
                "a rank correlation needs pairs with different scores"
            )


def pair_records(path: Path, columns: tuple[str, ...] = PAIR_COLUMNS) -> Iterator[tuple[int, dict[str, object]]]:
    """(line number, record) for every non-blank record of a .tsv, .csv or .jsonl file (optionally .gz), or (row
    number, record) of a .parquet file; errors name the file and line. A tsv/csv needs a header naming `columns`,
    a Parquet file those columns; a JSON line any object."""
    fmt = require_format(path, "pairs", PAIR_FORMATS)
    if fmt == JSONL:
        yield from json_objects(path, ", ".join(columns))
        return
    if fmt == PARQUET:
        yield from parquet_records(path, columns)
        return
    comments, lines = _after_comments(line for _, line in text_lines(path))
    reader = table_reader(lines, fmt)
    try:
        header = next(reader, None)
        if header is None:
            return
        header = [column.strip() for column in header]
        missing = [column for column in columns if column not in header]
        if missing:
            raise DataError(
                f"{path}:{comments + 1}: header is missing column(s) {', '.join(missing)}; "
                f"expected a header line with {', '.join(columns)}"
            )
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            number = comments + reader.line_num
            # an editor that trims trailing whitespace drops the tab before an empty last 'label' cell
            if len(row) == len(header) - 1 and header[-1] == "label":
                row = [*row, ""]
            if len(row) != len(header):
                raise DataError(f"{at(path, number)}: expected {len(header)} columns, found {len(row)}")
            yield number, dict(zip(header, row))
    except csv.Error as error:
        raise table_error(f"{path}:{comments + reader.line_num}", fmt, error) from None


def _after_comments(lines: Iterable[str]) -> tuple[int, Iterator[str]]:
    """Skip the comment lines at the top of a tsv/csv: (how many were skipped, the lines from the header on)."""
    lines = iter(lines)
    skipped = 0
    for line in lines:
        if not line.startswith(COMMENT):
            return skipped, itertools.chain([line], lines)
        skipped += 1
    return skipped, iter(())


def read_scored_pairs(path: str | Path, score_range: tuple[float, float] | None = None,
                      score_column: str = "score") -> ScoredPairs:
    """Read sentence1/sentence2/score records from .tsv, .csv or .jsonl (optionally .gz).

    `score_column` names the column holding the gold scores: "label" for a file of graded labels (see
    `score_column_of`)."""
    path = Path(path)
    pairs = ScoredPairs(source=str(path))
    weights = DesignWeights(path)
    for number, s1, s2, record in _labelled_rows(path, score_column, weights):
        score = _parse_score(record[score_column], path, number, score_column)
        if score_range is not None and not score_range[0] <= score <= score_range[1]:
            raise DataError(f"{at(path, number)}: score {score:g} is outside [{score_range[0]:g}, {score_range[1]:g}]")
        pairs.append(s1, s2, score, str(record.get("subset", "") or ""), number)
    pairs.weights = weights.finish()
    pairs.design = weights.is_design
    return pairs


def _labelled_rows(path: Path, column: str, weights: DesignWeights,
                   ) -> Iterator[tuple[int, str, str, dict[str, object]]]:
    """(line, sentence1, sentence2, record) of each row of a labelled pairs file, its fields present, its sentences
    text and its `column` filled in; the row's weight is read once the caller has read the row's label (so a bad
    label is named before a bad weight, as each reader always did)."""
    columns = ("sentence1", "sentence2", column)
    for number, record in pair_records(path, columns):
        missing = [name for name in columns if name not in record]
        if missing:
            raise DataError(f"{at(path, number)}: missing field(s) {', '.join(missing)}")
        s1, s2 = record["sentence1"], record["sentence2"]
        if not isinstance(s1, str) or not isinstance(s2, str) or not s1.strip() or not s2.strip():
            raise DataError(f"{at(path, number)}: sentence1 and sentence2 must be non-empty text")
        _check_labelled(record[column], column, s1, s2, path, number)
        yield number, s1, s2, record
        weights.read(record, number)


def read_user_scored_pairs(path: str | Path) -> ScoredPairs:
    """A user's scored pairs file (`eval --pairs`, `adapt --dev`): read as `read_scored_pairs` reads it, then
    checked for repeated pairs and scores off the file's own scale (below)."""
    path = Path(path)
    column = score_column_of(path)
    pairs = read_scored_pairs(path, score_column=column)
    pairs.check_usable()
    check_labelled_file(path, pairs.sentence1, pairs.sentence2, pairs.scores, pairs.lines, column, graded=True)
    return pairs


def no_pairs_message(source: str | Path) -> str:
    """A file without pairs: empty, or a header with no rows below it (say which: the fix differs)."""
    path = Path(source)
    if path.is_file() and path.suffix.lower() != ".jsonl" and sniff_columns(path):
        return f"{path}: a header but no sentence pairs below it; add one row per pair"
    return f"{path}: no sentence pairs; the file is empty"


def sniff_columns(path: str | Path) -> set[str]:
    """Column names of a pairs file: its header (tsv/csv, after any '#' comment lines) or the keys of its first
    JSON record; empty if none."""
    path = Path(path)
    fmt = require_format(path, "pairs", PAIR_FORMATS)
    if fmt == PARQUET:
        return set(parquet_file(path).schema_arrow.names)
    # decoding errors are replaced, not raised: a bad byte further on is for the file's reader to name with its line
    for number, line in enumerate(Utf8Lines(path, encoding_errors="replace"), start=1):
        if not line or not line.strip() or (fmt != JSONL and line.startswith(COMMENT)):
            continue
        if fmt != JSONL:
            return {cell.strip() for cell in line.rstrip("\r").split("\t" if fmt == TSV else ",")}
        if starts_json_array(line):  # a .json file saved as one array: say so, not "no pairs"
            raise DataError(f"{at(path, number)}: {JSON_ARRAY}")
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return set()
        return set(record) if isinstance(record, dict) else set()
    return set()


def labels_are_graded(path: str | Path, column: str = "label") -> bool:
    """Whether a pairs file's `column` holds graded scores rather than 0/1 labels: every filled-in value is a
    finite number and more than a few are neither 0 nor 1 (`odd_labels_allowed`).

    Decides the task type of a file whose column is named 'label' (`sentadapt pairs` writes that name, and the
    user may fill it with 0/1 or with a score). Non-numeric values keep the file a pair-classification file, so
    its reader names the bad value; an unreadable file is not graded either, for the same reason. A column of 0/1
    but for a few values (a typo such as `11`) is an error naming the first of them: read as scores, the dev set
    would select on Spearman of binary labels.
    """
    path = Path(path)
    zero_one, odd, first_odd = 0, 0, None
    records = pair_records(path, ("sentence1", "sentence2", column))
    while True:
        try:
            line, record = next(records)
        except StopIteration:
            break
        except DataError:
            return False  # a header or format error: the file's reader names it
        value = record.get(column)
        if _is_blank(value):
            continue  # unlabelled: the reader reports it with its pair, whatever the type
        number = _finite_number(value)
        if number is None:  # neither 0/1 nor a score, whatever the other rows hold: this row
            raise DataError(f"{path}:{line}: {column} '{value}' is not a number; label each pair {LABEL_RULE}")
        if number in (0.0, 1.0):
            zero_one += 1
        else:
            odd, first_odd = odd + 1, first_odd or (line, value)
    if first_odd is not None and odd <= odd_labels_allowed(zero_one + odd):
        line, value = first_odd
        raise DataError(f"{path}:{line}: {column} '{value}' is not 0 or 1, but {zero_one} of the {zero_one + odd} "
                        f"labels are; fix {'it' if odd == 1 else f'the {odd} such rows'} (1 = same meaning, 0 = "
                        "different), or give every pair a similarity score (such as 0-5)")
    return odd > 0


def score_column_of(path: str | Path) -> str:
    """The column that holds the gold scores of an STS file: 'score', else a graded 'label' column."""
    columns = sniff_columns(path)
    return "label" if "score" not in columns and "label" in columns else "score"


@dataclass
class LabelledPairs:
    """Sentence pairs with a binary label (1 = similar / duplicate / paraphrase, 0 = not)."""

    sentence1: list[str] = field(default_factory=list)
    sentence2: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    source: str = ""
    lines: list[int] = field(default_factory=list)  # each pair's line in its file
    weights: list[float] = field(default_factory=list)  # design weights of a chosen dev set; empty: every pair alike
    design: bool = False  # the weights are a design's (1 / inclusion probability: a .design.json beside the file)

    def __len__(self) -> int:
        return len(self.labels)


def read_labelled_pairs(path: str | Path, label_column: str = "label") -> LabelledPairs:
    """Read sentence1/sentence2/label (0 or 1) records from .tsv, .csv or .jsonl (optionally .gz); a pair listed
    twice (in either order) is an error (below)."""
    path = Path(path)
    pairs = LabelledPairs(source=str(path))
    weights = DesignWeights(path)
    for number, s1, s2, record in _labelled_rows(path, label_column, weights):
        value = record[label_column]
        label = _binary(value)
        if label is None:
            raise DataError(f"{at(path, number)}: {label_column} '{value}' is not 0 or 1; pair classification needs "
                            "0/1 labels (a file of graded labels and no 'score' column is scored as STS when "
                            "--task pair-classification is not given)")
        pairs.sentence1.append(s1)
        pairs.sentence2.append(s2)
        pairs.labels.append(label)
        pairs.lines.append(number)
    pairs.weights = weights.finish()
    pairs.design = weights.is_design
    if not pairs.labels:
        raise DataError(no_pairs_message(path))
    if len(set(pairs.labels)) < 2:
        raise DataError(f"{path}: all {len(pairs)} labels are {pairs.labels[0]}; average precision needs pairs "
                        "labelled 1 and pairs labelled 0")
    check_labelled_file(path, pairs.sentence1, pairs.sentence2, [float(label) for label in pairs.labels],
                        pairs.lines, label_column, graded=False)
    return pairs


class DesignWeights:
    """The 'weight' column of a chosen dev set, checked row by row: in every row or in none, each a positive finite
    number. A weight is 1 / the pair's inclusion probability, so a missing, zero or negative one cannot be guessed:
    the message says to restore the value `sentadapt pairs` wrote, or to delete the row. With the design `pairs`
    wrote beside the file (FILE.design.json), the column must be there and each weight between 1 and the number of
    candidates (a pair stands for at least itself and at most all of them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.values: list[float] = []
        self.lines: list[int] = []
        self.first_without: int | None = None  # the first row read without a weight
        self.candidates = design_candidates(path)  # None: no design beside the file
        self.finite = design_domain(path) == "candidates"  # the candidates are the population: its factor applies

    def read(self, record: dict[str, object], number: int) -> None:
        value = record.get(WEIGHT)
        if _is_blank(value):
            if self.values:
                raise DataError(f"{self.path}:{number}: no {WEIGHT}, but the rows above have one; restore the "
                                f"{WEIGHT} `sentadapt pairs` wrote, or delete the row")
            self.first_without = self.first_without or number
            return
        if self.first_without is not None:
            raise DataError(f"{self.path}:{self.first_without}: no {WEIGHT}, but line {number} has one; a chosen "
                            f"dev set needs the {WEIGHT} `sentadapt pairs` wrote in every row")
        weight = _finite_number(value)
        if weight is None or weight <= 0:
            raise DataError(f"{self.path}:{number}: {WEIGHT} '{value}' is not a positive number; it is 1 / the "
                            "chance the pair was chosen: restore the value `sentadapt pairs` wrote, or delete the row")
        if self.candidates is not None and not 1 <= weight <= self.candidates:
            bound = "below 1" if weight < 1 else f"above the {self.candidates} candidates the pairs were chosen from"
            raise DataError(f"{self.path}:{number}: {WEIGHT} '{value}' is {bound}, which no weight of a design can be "
                            f"(1 / the chance the pair was chosen); restore the value `sentadapt pairs` wrote")
        self.values.append(weight)
        self.lines.append(number)

    @property
    def is_design(self) -> bool:
        """The weights read are a design's over a finite population, the candidates: each is 1 / the pair's
        inclusion probability, and evaluation/variance.py applies the finite-population factor 1 − π. Candidates
        proposed from a corpus are themselves a draw from it: the variance is then the two-phase one, without it."""
        return self.candidates is not None and bool(self.values) and self.finite

    def finish(self) -> list[float]:
        """The weights read, once every row is: none where a design says there were some, none whose sum a float
        cannot hold, none that outweighs all the others together (the file would then say what one pair says)."""
        design = design_path(self.path)
        if self.candidates is not None and not self.values and self.first_without is not None:
            raise DataError(f"{self.path}: has no '{WEIGHT}' column, but {design.name} beside it says `sentadapt "
                            f"pairs` chose its pairs with weights; put the column back, or delete {design.name} to "
                            "weigh every pair alike")
        if len(self.values) < 2:
            return self.values
        if not math.isfinite(sum(self.values)):
            raise DataError(f"{self.path}: the {WEIGHT}s add up past what a float can hold; restore the values "
                            "`sentadapt pairs` wrote")
        heaviest = max(range(len(self.values)), key=self.values.__getitem__)
        rest = math.fsum(self.values[:heaviest] + self.values[heaviest + 1:])
        if self.values[heaviest] > rest:
            raise DataError(f"{self.path}:{self.lines[heaviest]}: {WEIGHT} '{self.values[heaviest]:g}' outweighs all "
                            f"the other pairs together ({rest:g}), so the file would say what this one pair says; "
                            "restore the value `sentadapt pairs` wrote")
        return self.values


def design_path(label_file: str | Path) -> Path:
    """FILE.design.json: where `sentadapt pairs` writes how it chose FILE's pairs."""
    path = Path(label_file)
    return path.with_name(path.name + DESIGN_SUFFIX)


def design_candidates(path: Path) -> int | None:
    """The number of candidates the design beside `path` drew from, None without a design (a design file that
    cannot be read is named where the design is read: pairs/design.read_design)."""
    design = design_path(path)
    if not design.is_file():
        return None
    try:
        candidates = json.loads(design.read_text(encoding="utf-8"))["candidates"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return candidates if isinstance(candidates, int) and candidates > 0 else None


def design_domain(path: Path) -> str | None:
    """What the design beside `path` estimates for: "candidates" (a --candidates file, or a design written before
    issue 83) or "corpus" (candidates proposed from a corpus); None without a design."""
    design = design_path(path)
    if not design.is_file():
        return None
    try:
        domain = json.loads(design.read_text(encoding="utf-8")).get("domain", "candidates")
    except (OSError, ValueError, AttributeError):
        return None
    return domain if domain in ("candidates", "corpus") else "candidates"


def _binary(value: object) -> int | None:
    """0 or 1 from 0, 1, "0", "1", 0.0, "1.0"; None for anything else (booleans included: say 0 or 1)."""
    number = _finite_number(value)
    return int(number) if number in (0.0, 1.0) else None


def _parse_score(value: object, path: Path, number: int, column: str = "score") -> float:
    try:
        score = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(f"{at(path, number)}: {column} '{value}' is not a number") from None
    if not math.isfinite(score):
        raise DataError(f"{at(path, number)}: {column} '{value}' is not finite")
    return score


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _finite_number(value: object) -> float | None:
    """The value as a finite float, or None (booleans are not numbers here: a label is written 0 or 1)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _check_labelled(value: object, column: str, s1: str, s2: str, path: Path, number: int) -> None:
    """A row left unlabelled (e.g. in a file from `sentadapt pairs` that is not finished) is named with its pair."""
    if _is_blank(value):
        what = "0/1 or a score" if column == "label" else "a number"
        raise DataError(
            f"{at(path, number)}: no {column} for the pair '{_quoted(s1)}' / '{_quoted(s2)}'; fill in the {column} "
            f"column ({what}) for every row, or delete the rows you do not label"
        )


QUOTED_CHARS = 40  # of a sentence quoted in an error line


def _quoted(text: str, limit: int = QUOTED_CHARS) -> str:
    """A sentence cut short for a one-line message."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ---------------------------------------------------------------- the checks of a user's labelled file


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
