"""Labelled NLI pairs (premise, hypothesis, label) for ConSERT's supervised modes and CLSR.

Accepted files (optionally `.gz`):
- JSON Lines (`.jsonl`, `.json`), one object per line;
- `.tsv` (no quoting, as in SNLI/MNLI/SBERT's AllNLI) or `.csv` (RFC 4180 quoting) with a header line.

Field names, first match wins: premise | sentence1; hypothesis | sentence2; label | gold_label |
entailment_label | entailment (the last two are SICK's, so `sickr.train.jsonl` reads as NLI data).

Labels are the strings entailment / neutral / contradiction (any case) or the integers 0 / 1 / 2 in that order
(Hugging Face `snli`, `multi_nli` and GLUE use the same order; numeric strings "0".."2" in tsv/csv too).
SNLI's "-" and Hugging Face's -1 mean "no gold label": such rows are skipped and counted. Any other label is
a DataError.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sentadapt.data.textfile import (
    CSV,
    JSONL,
    PARQUET,
    TSV,
    Utf8Lines,
    check_row_width,
    json_objects,
    parquet_records,
    printable,
    require_format,
    table_error,
    table_reader,
)
from sentadapt.errors import ConfigError, DataError

NLI_LABELS = ("entailment", "neutral", "contradiction")
ENTAILMENT, NEUTRAL, CONTRADICTION = 0, 1, 2

PREMISE_FIELDS = ("premise", "sentence1")
HYPOTHESIS_FIELDS = ("hypothesis", "sentence2")
LABEL_FIELDS = ("label", "gold_label", "entailment_label", "entailment")

# Skip reasons (keys of NliPairs.skipped).
NO_GOLD_LABEL = "no gold label"
EMPTY_TEXT = "empty text"
BLANK = "blank"

_LABEL_INDEX = {name: index for index, name in enumerate(NLI_LABELS)}
_LABEL_INDEX.update({str(index): index for index in range(len(NLI_LABELS))})
_NO_LABEL = frozenset({"-", "-1"})
_EXPECTED_LABELS = f"expected one of {', '.join(NLI_LABELS)} (or 0, 1, 2)"
NLI_FORMATS = (JSONL, TSV, CSV, PARQUET)


@dataclass
class NliPairs:
    """Parallel lists; `labels[i]` indexes NLI_LABELS. `skipped` maps a reason to a count (only those seen)."""

    premises: list[str] = field(default_factory=list)
    hypotheses: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    source: str = ""
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.labels)

    def label_counts(self) -> dict[str, int]:
        """Pairs per label name, in NLI_LABELS order."""
        counts = dict.fromkeys(NLI_LABELS, 0)
        for label in self.labels:
            counts[NLI_LABELS[label]] += 1
        return counts


def read_nli(paths: Sequence[str | Path]) -> NliPairs:
    """Read and concatenate labelled NLI pairs from `paths`, in order (see the module docstring for formats)."""
    pairs = NliPairs()

    def keep(premises: list[str], hypotheses: list[str], labels: list[int]) -> None:
        pairs.premises.extend(premises)
        pairs.hypotheses.extend(hypotheses)
        pairs.labels.extend(labels)

    pairs.source, pairs.skipped = scan_nli(paths, keep)
    return pairs


def scan_nli(paths: Sequence[str | Path], consume: Callable[[list[str], list[str], list[int]], None],
             batch_size: int = 65_536) -> tuple[str, dict[str, int]]:
    """Hand the labelled pairs of `paths` to `consume` in batches (premises, hypotheses, labels), in order.

    Returns the sources (comma-joined) and the skip counts; raises DataError when no pair is kept.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise ConfigError("no NLI files given; pass .jsonl/.tsv/.csv/.parquet files with premise, hypothesis and label")
    source = ", ".join(str(path) for path in paths)
    counts = NliPairs(source=source)  # only its `skipped` is used here
    batch: tuple[list[str], list[str], list[int]] = ([], [], [])
    lines_read = kept = 0
    for path in map(Path, paths):
        fmt = require_format(path, "NLI", NLI_FORMATS)
        if fmt == JSONL:
            records = json_objects(path, "premise, hypothesis and label", on_blank=lambda: _skip(counts, BLANK))
        elif fmt == PARQUET:  # Hugging Face's NLI datasets: label 0/1/2 = entailment/neutral/contradiction, -1 none
            records = parquet_records(path, ())
        else:
            records = _table_records(path, fmt, counts)
        for number, record in records:
            lines_read += 1
            premise = _text(record, PREMISE_FIELDS, path, number)
            hypothesis = _text(record, HYPOTHESIS_FIELDS, path, number)
            label = _label(record[_field(record, LABEL_FIELDS, path, number)], path, number)
            if label is None:
                _skip(counts, NO_GOLD_LABEL)
            elif not premise or not hypothesis:
                _skip(counts, EMPTY_TEXT)
            else:
                batch[0].append(premise)
                batch[1].append(hypothesis)
                batch[2].append(label)
                kept += 1
                if len(batch[2]) >= batch_size:
                    consume(*batch)
                    batch = ([], [], [])
    if batch[2]:
        consume(*batch)
    if not kept:
        why = ", ".join(f"{count} {reason}" for reason, count in counts.skipped.items()) or "empty"
        raise DataError(
            f"{source}: no labelled pairs ({lines_read} record{'' if lines_read == 1 else 's'} read: {why}); "
            f"pass premise/hypothesis/label records"
        )
    return source, counts.skipped


def count_nli_pairs(paths: Sequence[str | Path]) -> int:
    """The labelled pairs of `paths` that `scan_nli` keeps (what a supervised ConSERT stage trains on), counted
    without keeping them: `adapt --dry-run`'s plan."""
    kept = 0

    def count(premises: list[str], hypotheses: list[str], labels: list[int]) -> None:
        nonlocal kept
        kept += len(labels)

    scan_nli(paths, count)
    return kept


def entailment_pairs(nli: NliPairs) -> list[tuple[str, str]]:
    """(premise, hypothesis) for every entailment pair, in order: the positives of supervised contrastive modes."""
    return [(p, h) for p, h, label in zip(nli.premises, nli.hypotheses, nli.labels) if label == ENTAILMENT]


def _skip(pairs: NliPairs, reason: str) -> None:
    pairs.skipped[reason] = pairs.skipped.get(reason, 0) + 1


def _table_records(path: Path, fmt: str, pairs: NliPairs) -> Iterator[tuple[int, dict[str, object]]]:
    reader = table_reader(Utf8Lines(path), fmt)
    try:
        header: list[str] | None = None
        for row in reader:
            if header is None:
                if row:
                    header = [cell.strip() for cell in row]
                    for names in (PREMISE_FIELDS, HYPOTHESIS_FIELDS, LABEL_FIELDS):
                        if not any(name in header for name in names):
                            raise DataError(
                                f"{path}:{reader.line_num}: header has no {_either(names)} column (columns: "
                                f"{', '.join(map(printable, header))}); expected premise, hypothesis and label columns"
                            )
                continue
            if not any(cell.strip() for cell in row):
                _skip(pairs, BLANK)
                continue
            check_row_width(row, header, f"{path}:{reader.line_num}", fmt)
            yield reader.line_num, dict(zip(header, row))
    except csv.Error as error:
        raise table_error(f"{path}:{reader.line_num}", fmt, error) from None


def _field(record: dict[str, object], names: tuple[str, ...], path: Path, number: int) -> str:
    for name in names:
        if name in record:
            return name
    raise DataError(f"{path}:{number}: missing field {_either(names)}; expected premise, hypothesis and label")


def _either(names: tuple[str, ...]) -> str:
    return f"'{names[0]}' (or {', '.join(repr(name) for name in names[1:])})"


def _text(record: dict[str, object], names: tuple[str, ...], path: Path, number: int) -> str:
    name = _field(record, names, path, number)
    value = record[name]
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{path}:{number}: '{name}' must be text, found {printable(json.dumps(value))}")
    return value.strip()


def _label(value: object, path: Path, number: int) -> int | None:
    """The label's index into NLI_LABELS, or None for "no gold label"."""
    if isinstance(value, str):
        key = value.strip().lower()
        if key in _LABEL_INDEX:
            return _LABEL_INDEX[key]
        if key in _NO_LABEL:
            return None
    elif isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(NLI_LABELS):
            return value
        if value == -1:
            return None
    shown = printable(value if isinstance(value, str) else json.dumps(value))
    raise DataError(f"{path}:{number}: unknown label '{shown}'; {_EXPECTED_LABELS}")
