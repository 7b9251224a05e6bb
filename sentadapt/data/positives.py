"""Positive sentence pairs for recipes that learn from pairs (CLSR): NLI entailment, high-score STS, plain pairs.

Each file is recognised by its fields: a label column → NLI (entailment pairs kept); a score column →
scored pairs (score ≥ min_score kept); two text columns (sentence1/sentence2, or anchor/positive as
sentence-transformers' training sets name them) → every pair kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sentadapt.data.nli import LABEL_FIELDS, entailment_pairs, read_nli
from sentadapt.data.pair_files import PAIR_COLUMNS, pair_records, read_scored_pairs, sniff_columns
from sentadapt.data.textfile import TEXT, at, format_of, open_binary
from sentadapt.errors import DataError

# the two columns of a file of positive pairs: ours, and sentence-transformers' datasets' (all-nli's "pair" subset,
# most of its training sets; a "negative" column beside them is left unread)
PAIR_NAMES = (PAIR_COLUMNS[:2], ("anchor", "positive"))


@dataclass
class PositivePairs:
    first: list[str] = field(default_factory=list)
    second: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line per file: what was kept and why

    def __len__(self) -> int:
        return len(self.first)


def _fields_of(path: Path) -> set[str]:
    """Column names from a csv/tsv header or the first JSON Lines record; none for a plain-text file."""
    if format_of(path) == TEXT:
        open_binary(path).close()  # a missing or unreadable file is named as for a table
        return set()
    return sniff_columns(path)


def is_pair_file(path: Path) -> bool:
    """Cheap (header or first record only): NLI labels, a score, or both pair columns."""
    fields = _fields_of(path)
    return any(name in fields for name in LABEL_FIELDS) or "score" in fields or _pair_names(fields) is not None


def _pair_names(fields: set[str]) -> tuple[str, ...] | None:
    """The file's two pair columns (PAIR_NAMES, in that order), or None."""
    return next((names for names in PAIR_NAMES if set(names) <= fields), None)


def check_pair_files(paths: Sequence[str | Path], alternatives: str) -> None:
    """Every file holds pairs (`is_pair_file`), checked before any model loads; `alternatives`: the recipes the
    message suggests for one sentence per line."""
    for source in paths:
        if not is_pair_file(Path(source)):
            raise DataError(_NOT_PAIRS.format(path=source, alternatives=alternatives))


_NOT_PAIRS = ("{path}: CLSR trains on sentence pairs (an NLI file with labels, scored pairs with sentence1, "
              "sentence2, score, or two columns sentence1, sentence2 or anchor, positive); for one sentence per line "
              "use --recipe {alternatives}")


def read_positive_pairs(paths: Sequence[str | Path], min_score: float) -> PositivePairs:
    pairs = PositivePairs()
    for source in paths:
        path = Path(source)
        fields = _fields_of(path)
        if any(name in fields for name in LABEL_FIELDS):
            nli = read_nli([path])
            kept = entailment_pairs(nli)
            pairs.notes.append(f"{path}: {len(kept)} entailment pairs of {len(nli)} labelled NLI pairs")
        elif "score" in fields:
            scored = read_scored_pairs(path)
            kept = [(a, b) for a, b, s in zip(scored.sentence1, scored.sentence2, scored.scores) if s >= min_score]
            pairs.notes.append(f"{path}: {len(kept)} of {len(scored)} scored pairs with score ≥ {min_score:g}")
        elif (names := _pair_names(fields)) is not None:
            kept = read_scored_pairs_without_score(path, names)
            pairs.notes.append(f"{path}: {len(kept)} sentence pair{'' if len(kept) == 1 else 's'}")
        else:
            raise DataError(_NOT_PAIRS.format(path=path))
        for first, second in kept:
            pairs.first.append(first)
            pairs.second.append(second)
    if not pairs.first:
        raise DataError(f"{', '.join(map(str, paths))}: no positive pairs kept ({'; '.join(pairs.notes)}); "
                        "lower --set min_score or add pairs")
    return pairs


def read_scored_pairs_without_score(path: Path, names: tuple[str, ...] = PAIR_COLUMNS[:2]) -> list[tuple[str, str]]:
    """Records of two text columns (`names`) without a score (every pair is a positive)."""
    return [_pair(record, path, number, names) for number, record in pair_records(path, names)]


def _pair(record: dict[str, object], path: Path, number: int, names: tuple[str, ...]) -> tuple[str, str]:
    first, second = record.get(names[0]), record.get(names[1])
    if not isinstance(first, str) or not isinstance(second, str) or not first.strip() or not second.strip():
        raise DataError(f"{at(path, number)}: {names[0]} and {names[1]} must be non-empty text")
    return first.strip(), second.strip()
