"""The unlabelled training corpus for `sentadapt adapt CORPUS [CORPUS ...]`.

A source is a local file, read by its suffix (a trailing `.gz` is gunzipped first):
- `.jsonl` / `.json` (JSON Lines), `.csv`, `.tsv`, `.parquet` (what Hugging Face datasets store): one text
  column, picked by `text_column`, or automatically when the file has exactly one column or one named `text` or
  `sentence`;
- anything else: plain text, one sentence per line.
or, when no such local file exists, a Hugging Face Hub dataset id `owner/name[:split]` (online only).

Files are opened and decoded by `sentadapt.data.textfile` (UTF-8, a BOM dropped, in big chunks, an invalid byte
reported with its line number; `encoding_errors` says what else to do with it). Every record ends up either as
a sentence or counted under one skip reason, so `lines_read == sentences + sum(skipped.values())`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.textfile import (
    ENCODING_ERRORS,
    JSON_ARRAY,
    JSONL,
    PARQUET,
    TEXT,
    Utf8Lines,
    check_row_width,
    content_suffix,
    format_of,
    is_gzip_name,
    json_error,
    open_binary,
    parquet_file,
    printable,
    table_error,
    table_reader,
)
from sentadapt.errors import ConfigError, DataError
from sentadapt.events import Progress, no_progress
from sentadapt.options import DEFAULT_ENCODING_ERRORS
from sentadapt.storage.hub import hub_is_reachable
from sentadapt.storage.memory import once_while_unchanged
from sentadapt.text_tables import some_of

TEXT_COLUMNS = ("text", "sentence")  # picked automatically, in this order, when a file has several columns

# Skip reasons (keys of CorpusReport.skipped).
MIN_CHARS = 1  # a line shorter than this (after stripping) is dropped: blank lines
BLANK = "blank"
DUPLICATE = "duplicate"
INVALID_UTF8 = "invalid UTF-8"

BATCH_RECORDS = 65_536  # records handed on at once by the readers (bounded memory, few Arrow batches)
# A missing source with one of these suffixes is a mistyped path, never a Hub dataset id.
_FILE_SUFFIXES = {".txt", ".text", ".jsonl", ".json", ".csv", ".tsv", ".parquet", ".gz", ".bz2", ".xz", ".zst",
                  ".md", ".log"}
_FIX_ENCODING = "fix the file or pass --encoding-errors replace|skip"
_HUB_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


@dataclass
class CorpusReport:
    """What reading the corpus did, for the CLI to print.

    `lines_read` counts records: physical lines of plain-text and JSON Lines files, data rows of csv/tsv files
    (the header is not counted), rows of Hub datasets. `skipped` maps a reason to a count and only holds
    reasons that occurred. `replaced` counts lines kept with invalid UTF-8 replaced by U+FFFD.
    """

    files: list[str] = field(default_factory=list)
    lines_read: int = 0
    sentences: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    replaced: int = 0

    def summary(self) -> str:
        """One line, e.g. "read 512 lines from 2 files → 480 sentences (skipped: 20 blank, 12 duplicate)"."""
        text = (
            f"read {_plural(self.lines_read, 'line')} from {_plural(len(self.files), 'file')} → "
            f"{_plural(self.sentences, 'sentence')}"
        )
        notes = []
        if self.skipped:
            notes.append(f"skipped: {_reasons(self.skipped)}")
        if self.replaced:
            notes.append(f"{_plural(self.replaced, 'line')} with invalid UTF-8 kept, bad bytes replaced by U+FFFD")
        return f"{text} ({'; '.join(notes)})" if notes else text


@dataclass
class Corpus:
    """The sentences to train on, in file order, and how they were obtained."""

    sentences: list[str]
    report: CorpusReport

    def __len__(self) -> int:
        return len(self.sentences)


def check_options(encoding_errors: str, min_chars: int) -> None:
    if encoding_errors not in ENCODING_ERRORS:
        raise ConfigError(f"--encoding-errors '{encoding_errors}': expected one of {', '.join(ENCODING_ERRORS)}")
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 1:
        raise ConfigError(f"--min-chars {min_chars!r}: expected a whole number of at least 1")


def read_corpus(
    sources: Sequence[str | Path],
    text_column: str | None = None,
    dedup: bool = True,
    encoding_errors: str = DEFAULT_ENCODING_ERRORS,
    min_chars: int = MIN_CHARS,
) -> Corpus:
    """Read and concatenate `sources` (in order) into one list of stripped, non-blank sentences, in memory.

    For small inputs (`diagnose`'s sample); training reads through `sentadapt.data.prepare`, which streams the
    same records into a memory-mapped Arrow cache and applies the same `classify` and `mark_duplicates`.
    `encoding_errors` says what to do with a line that is not valid UTF-8: "strict" raises DataError naming
    the line, "replace" keeps it with U+FFFD for the bad bytes, "skip" drops it (counted). `dedup` keeps only
    the first occurrence of each sentence across all sources. Sentences shorter than `min_chars` characters
    (after stripping) are skipped and counted.
    """
    texts: list[str | None] = []
    report = scan_corpus(sources, texts.extend, text_column, encoding_errors, min_chars)
    status = classify(texts, min_chars)
    if dedup:
        mark_duplicates(status, text_hashes(texts))
    count_statuses(report, status, min_chars)
    check_not_empty(report)
    return Corpus([text for text, code in zip(texts, status.tolist()) if code == KEEP], report)  # type: ignore[misc]


def scan_corpus(
    sources: Sequence[str | Path],
    consume: Callable[[list[str | None]], None],
    text_column: str | None = None,
    encoding_errors: str = DEFAULT_ENCODING_ERRORS,
    min_chars: int = MIN_CHARS,
    on_bytes: Callable[[int], None] | None = None,
    streaming: bool = False,
) -> CorpusReport:
    """Parse every record of `sources`, in order, and hand its stripped text to `consume` in batches.

    A record dropped for invalid UTF-8 (`encoding_errors="skip"`) is passed as None, so record numbers stay
    aligned. Returns the report with `files`, `lines_read` and `replaced` filled in; the caller classifies the
    texts (`classify`, `mark_duplicates`) and fills in the rest with `count_statuses`. `on_bytes(n)` is told as
    each local file is read (compressed bytes for `.gz`), for a progress bar; `streaming` streams Hub datasets.
    """
    check_options(encoding_errors, min_chars)
    if isinstance(sources, (str, Path)):
        sources = [sources]
    if not sources:
        raise ConfigError("no corpus given; pass one or more text files (one sentence per line)")
    collector = _Collector(consume)
    report = collector.report
    for source in sources:
        report.files.append(str(source))
        path = Path(source).expanduser()
        if not path.exists() and _looks_like_hub_id(str(source)):
            _read_hub(str(source), text_column, collector, streaming)
            continue
        fmt = format_of(path)
        if fmt == PARQUET:
            _read_parquet(path, text_column, collector, on_bytes)
            continue
        lines = Utf8Lines(path, encoding_errors, on_bytes, fix=_FIX_ENCODING)
        if fmt == TEXT:
            _read_plain(lines, collector)
        elif fmt == JSONL:
            _read_jsonl(lines, text_column, collector)
        else:
            _read_table(lines, fmt, text_column, collector)
        collector.flush()
        report.replaced += lines.replaced
    collector.flush()
    return report


# Record statuses (uint8), one per record read; everything but KEEP is a skip reason.
KEEP, STATUS_BLANK, STATUS_SHORT, STATUS_INVALID, STATUS_DUPLICATE = range(5)


def classify(texts: Sequence[str | None], min_chars: int) -> np.ndarray:
    """The status of each (stripped) text: KEEP, blank, shorter than `min_chars` or invalid UTF-8 (None)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chars = pc.utf8_length(pa.array(texts, type=pa.string())).to_numpy(zero_copy_only=False)
    chars = np.nan_to_num(np.asarray(chars, dtype=np.float64), nan=-1.0)  # None (nan) → -1
    status = np.full(len(chars), KEEP, dtype=np.uint8)
    status[chars < min_chars] = STATUS_SHORT
    status[chars == 0] = STATUS_BLANK
    status[chars < 0] = STATUS_INVALID
    return status


def text_hashes(texts: Sequence[str | None]) -> np.ndarray:
    """64-bit xxh3 of each text (0 for None): dedup compares these instead of holding every string.

    Two different sentences share a hash with probability about n² / 2**65 (10M sentences: 3 in a million),
    and then only the later one is dropped as a duplicate.
    """
    from xxhash import xxh3_64_intdigest

    return np.fromiter((xxh3_64_intdigest(text.encode()) if text is not None else 0 for text in texts),
                       dtype=np.uint64, count=len(texts))


def mark_duplicates(status: np.ndarray, hashes: np.ndarray) -> None:
    """Set STATUS_DUPLICATE on every kept record whose hash was seen on an earlier kept record (in place)."""
    kept = np.flatnonzero(status == KEEP)
    _, first = np.unique(hashes[kept], return_index=True)  # index of each hash's first occurrence
    repeated = np.ones(len(kept), dtype=bool)
    repeated[first] = False
    status[kept[repeated]] = STATUS_DUPLICATE


def count_statuses(report: CorpusReport, status: np.ndarray, min_chars: int) -> None:
    """Fill `sentences` and `skipped` (reasons in the order they first occur in the corpus, as they are read)."""
    names = {STATUS_BLANK: BLANK, STATUS_SHORT: f"shorter than {min_chars} chars", STATUS_INVALID: INVALID_UTF8,
             STATUS_DUPLICATE: DUPLICATE}
    counts = np.bincount(status, minlength=len(names) + 1)
    first_seen = {code: int(np.argmax(status == code)) for code in names if counts[code]}
    report.sentences = int(counts[KEEP])
    report.skipped = {names[code]: int(counts[code]) for code in sorted(first_seen, key=first_seen.__getitem__)}


def settle_statuses(report: CorpusReport, status: np.ndarray, hashes: np.ndarray | None, min_chars: int) -> None:
    """Every record's status as a run keeps it (in place): repeats marked when `hashes` are given (dedup), the
    report's counts filled, a corpus without a sentence refused. prepare_sentences (what a run trains on),
    count_sentences (what the dry run plans with), check_has_sentences and `pairs`' sample all end here, so they
    agree."""
    if hashes is not None:
        mark_duplicates(status, hashes)
    count_statuses(report, status, min_chars)
    check_not_empty(report)


def check_not_empty(report: CorpusReport) -> None:
    if report.sentences:
        return
    read = _plural(report.lines_read, "line")
    if report.lines_read:
        why = _reasons(report.skipped)
    else:
        why = "the file is empty" if len(report.files) == 1 else "all files are empty"
    raise DataError(
        f"{some_of(report.files)}: no sentences ({read} read: {why}); pass text with one sentence per line"
    )


class _FoundText(Exception):
    """Raised by check_has_sentences' reader at the first sentence: the rest of the corpus need not be read."""


def check_has_sentences(sources: Sequence[str | Path], text_column: str | None = None,
                        encoding_errors: str = DEFAULT_ENCODING_ERRORS) -> None:
    """Before any model loads: the local corpus files hold at least one sentence (`check_not_empty`'s message).
    Reading stops at the first batch with a sentence, so a large corpus costs one batch of lines; Hub datasets
    are counted when they are read."""
    if any(is_hub_source(source) for source in sources):
        return
    statuses: list[np.ndarray] = []

    def consume(batch: list[str | None]) -> None:
        status = classify(batch, 1)
        if (status == KEEP).any():
            raise _FoundText
        statuses.append(status)

    try:
        report = scan_corpus(sources, consume, text_column, encoding_errors)
    except _FoundText:
        return
    settle_statuses(report, np.concatenate(statuses) if statuses else np.empty(0, dtype=np.uint8), None, 1)


def count_sentences(sources: Sequence[str | Path], text_column: str | None = None,
                    encoding_errors: str = DEFAULT_ENCODING_ERRORS, dedup: bool = True,
                    progress: Progress = no_progress) -> int | None:
    """The sentences a run trains on from these local files, counted as data/prepare.py's `prepare_sentences` keeps
    them (the same reading, statuses and dedup, without writing or tokenizing anything: truncation drops none), for
    `adapt --dry-run`'s planned steps; None for a Hub dataset, which is counted only when it is read. Holds 9 bytes
    per line (a status and a hash); reads at ~100 MB/s, so a large corpus gets a progress bar (bytes)."""
    if any(is_hub_source(source) for source in sources):
        return None
    # `--recipe auto --dry-run` plans each candidate on the same corpus: count each unchanged corpus once a process
    return once_while_unchanged([Path(source).expanduser() for source in sources],
                                ("sentences", text_column, encoding_errors, dedup),
                                lambda: _count_sentences(sources, text_column, encoding_errors, dedup, progress))


def _count_sentences(sources: Sequence[str | Path], text_column: str | None, encoding_errors: str, dedup: bool,
                     progress: Progress) -> int:
    statuses: list[np.ndarray] = []
    hashes: list[np.ndarray] = []

    def consume(texts: list[str | None]) -> None:
        statuses.append(classify(texts, MIN_CHARS))
        hashes.append(text_hashes(texts))

    total = sum(Path(source).expanduser().stat().st_size for source in sources)
    with progress("counting the corpus (bytes)", total) as advance:
        report = scan_corpus(sources, consume, text_column, encoding_errors, on_bytes=advance)
    status = np.concatenate(statuses) if statuses else np.empty(0, dtype=np.uint8)
    keys = np.concatenate(hashes) if hashes else np.empty(0, dtype=np.uint64)
    settle_statuses(report, status, keys if dedup else None, MIN_CHARS)
    return report.sentences


# ----------------------------------------------------------------------------------------------- local files


class _Collector:
    """Hands records to `consume` in batches of BATCH_RECORDS, so no reader holds a whole corpus.

    Dedup matters for contrastive learning (two copies of a sentence in one batch are false negatives, and
    repeated lines are over-weighted in every epoch), but it happens after reading, on hashes: see
    `mark_duplicates`.
    """

    def __init__(self, consume: Callable[[list[str | None]], None]) -> None:
        self.consume = consume
        self.batch: list[str | None] = []
        self.report = CorpusReport()

    def skip_record(self, reason: str) -> None:
        assert reason == INVALID_UTF8, reason  # the only reason a reader decides; the rest are `classify`'s
        self.add(None)

    def add(self, text: str | None) -> None:
        """Add one record's (already stripped) text; None for a record dropped as invalid UTF-8."""
        self.report.lines_read += 1
        self.batch.append(text)
        if len(self.batch) >= BATCH_RECORDS:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.consume(self.batch)
            self.batch = []


def _read_plain(lines: Utf8Lines, collector: _Collector) -> None:
    add = collector.add
    for line in lines:
        if line is None:  # invalid UTF-8, dropped
            collector.skip_record(INVALID_UTF8)
        else:
            add(line.strip())


def _read_jsonl(lines: Utf8Lines, text_column: str | None, collector: _Collector) -> None:
    path = lines.path
    column: str | None = None
    chosen_at = 0
    decode = json.JSONDecoder().raw_decode
    for number, line in enumerate(lines, start=1):
        if line is None:  # invalid UTF-8, dropped
            collector.skip_record(INVALID_UTF8)
            continue
        line = line.strip()
        if not line:
            collector.add("")
            continue
        try:
            record, end = decode(line)  # json.loads without its per-call overhead
            if end != len(line):
                raise json.JSONDecodeError("Extra data", line, end)
        except (ValueError, RecursionError) as error:
            if column is None and line.startswith("["):
                record = []  # the start of a JSON array spread over lines
            else:
                raise json_error(f"{path}:{number}", error) from None
        if column is None and isinstance(record, list):
            raise DataError(f"{path}:{number}: {JSON_ARRAY}")
        if not isinstance(record, dict):
            raise DataError(
                f"{path}:{number}: expected a JSON object with a text field, found a JSON {_json_type(record)}"
            )
        if column is None:
            column = _pick_column(list(record), text_column, f"{path}:{number}", "field")
            chosen_at = number
        if column not in record:
            if text_column is not None:
                raise DataError(
                    f"{path}:{number}: no field '{printable(column)}' (fields: {_names(record)}); "
                    "pass --text-column with one of them"
                )
            raise DataError(
                f"{path}:{number}: missing field '{printable(column)}' (the text field picked on line {chosen_at}); "
                "every line needs it, or pass --text-column NAME"
            )
        collector.add(_cell_text(record[column], f"{path}:{number}", column))


def _read_table(lines: Utf8Lines, fmt: str, text_column: str | None, collector: _Collector) -> None:
    path = lines.path
    dropped = lines.dropped_lines  # filled as the reader goes, with encoding_errors="skip" only
    reader = table_reader(lines, fmt)
    try:
        header: list[str] | None = None
        index = 0
        last = 0  # the line the previous row ended on
        for row in reader:
            first, last = last + 1, reader.line_num
            if dropped and any(number in dropped for number in range(first, last + 1)):
                collector.skip_record(INVALID_UTF8)  # a record (or quoted field) with a dropped line: drop it all
                continue
            if header is None:
                if row:  # blank lines before the header are ignored
                    header = [cell.strip() for cell in row]
                    column = _pick_column(header, text_column, f"{path}:{reader.line_num}", "column")
                    index = header.index(column)
                continue
            if not any(cell.strip() for cell in row):
                collector.add("")
                continue
            check_row_width(row, header, f"{path}:{reader.line_num}", fmt)
            collector.add(row[index].strip())
    except csv.Error as error:
        raise table_error(f"{path}:{reader.line_num}", fmt, error) from None


def _read_parquet(path: Path, text_column: str | None, collector: _Collector,
                  on_bytes: Callable[[int], None] | None) -> None:
    """A Parquet file's text column, one row group at a time (never the whole column in memory); the progress bar
    moves by each row group's share of the file's bytes."""
    parquet = parquet_file(path)
    column = _pick_column(parquet.schema_arrow.names, text_column, str(path), "column")
    size, groups, number = path.stat().st_size, max(parquet.num_row_groups, 1), 0
    for group in range(parquet.num_row_groups):
        for value in parquet.read_row_group(group, columns=[column]).column(0).to_pylist():
            number += 1
            collector.add(_cell_text(value, f"{path}: row {number}", column))
        if on_bytes is not None:
            on_bytes(size // groups)


def _pick_column(columns: list[str], text_column: str | None, where: str, kind: str) -> str:
    """The text column: `text_column` if given, else the only one, else one named text or sentence."""
    if text_column is not None:
        if text_column in columns:
            return text_column
        raise DataError(
            f"{where}: no {kind} '{printable(text_column)}' ({kind}s: {_names(columns)}); "
            "pass --text-column with one of them"
        )
    if len(columns) == 1:
        return columns[0]
    for name in TEXT_COLUMNS:
        if name in columns:
            return name
    if not columns:
        raise DataError(f"{where}: no {kind}s; expected one holding the text")
    raise DataError(
        f"{where}: {len(columns)} {kind}s ({_names(columns)}) and none is named text or sentence; "
        "pass --text-column NAME"
    )


def _cell_text(value: object, where: str, column: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(
            f"{where}: '{printable(column)}' holds a {_json_type(value)}, not text; "
            "pass --text-column with a text column"
        )
    return value.strip()


def _json_type(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# What a folder given as the corpus contributes (each also gzipped, but Parquet): the formats the readers take by
# their suffix. Other files (.md, .log, .json, images, a README) are left out: pass them by name to read them.
FOLDER_SUFFIXES = (".txt", ".text", ".jsonl", ".csv", ".tsv", ".parquet")
_GLOB_CHARACTERS = frozenset("*?[")


def corpus_files(sources: Sequence[str | Path]) -> list[str]:
    """The corpus as files: a folder → its corpus files (FOLDER_SUFFIXES, in subfolders too, hidden ones left out,
    sorted by path), a wildcard pattern that names no file → the files it matches (sorted; `**` for subfolders: a
    quoted pattern, or one from the API or a config file, which no shell expanded); files and Hub ids as given. The
    run records the files, so a resumed run reads the same ones."""
    files: list[str] = []
    for source in sources:
        path = Path(source)
        if path.is_dir():
            files += _folder_files(path)
        elif not path.exists() and _GLOB_CHARACTERS & set(str(source)):
            files += _matching_files(str(source))
        else:
            files.append(str(source))
    return files


def _folder_files(folder: Path) -> list[str]:
    found = sorted(str(path) for path in _corpus_files_under(folder))
    if not found:
        listed = ", ".join(FOLDER_SUFFIXES)
        raise DataError(f"{folder}: a folder with no corpus files ({listed}, or .gz of them); pass files by name")
    return found


# A folder holding one of these is a model (a run's output, an export, a downloaded checkpoint): its vocab.txt and
# merges.txt are a tokenizer's, never corpus text, whether or not the run writes inside the corpus folder.
MODEL_FILES = ("config.json", "modules.json")


def _corpus_files_under(folder: Path) -> Iterator[Path]:
    """The corpus files below `folder`: hidden files and folders, and model folders, left out."""
    import os

    for directory, subfolders, names in os.walk(folder):
        if _holds_model(Path(directory)):
            subfolders.clear()
            continue
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        yield from (Path(directory) / name for name in names if _is_corpus_file(Path(name))
                    and not is_label_file(Path(directory) / name))


def is_label_file(path: Path) -> bool:
    """A file of pairs to label that `sentadapt pairs` wrote (its first line is LABEL_FILE_MARK's comment): written
    into a corpus folder, it is no corpus (issue 82: the next command read it as one and failed on its columns)."""
    from sentadapt.data.pair_files import LABEL_FILE_MARK

    if path.suffix.lower() not in (".tsv", ".csv"):
        return False
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return handle.readline(len(LABEL_FILE_MARK)).startswith(LABEL_FILE_MARK)
    except OSError:
        return False


def _is_corpus_file(name: Path) -> bool:
    suffix = content_suffix(name)
    return not name.name.startswith(".") and suffix in FOLDER_SUFFIXES and not (
        suffix == ".parquet" and is_gzip_name(name))


def _matching_files(pattern: str) -> list[str]:
    """The files a pattern matches (hidden ones left out, as glob does), but none inside a model folder."""
    import glob
    import itertools

    root = Path(*itertools.takewhile(lambda part: not _GLOB_CHARACTERS & set(part), Path(pattern).parts))
    found = sorted(match for match in glob.glob(pattern, recursive=True)
                   if Path(match).is_file() and not _in_model_folder(Path(match), root)
                   and not is_label_file(Path(match)))
    if not found:
        raise DataError(f"{pattern}: matches no file")
    return found


def _in_model_folder(file: Path, root: Path) -> bool:
    """Whether a folder from `root` down to the file's holds a model."""
    parts = file.relative_to(root).parts[:-1]
    return any(_holds_model(root.joinpath(*parts[:depth])) for depth in range(len(parts) + 1))


def _holds_model(folder: Path) -> bool:
    return any((folder / name).is_file() for name in MODEL_FILES)


# ------------------------------------------------------------------------------------------ Hub datasets


def check_sources(sources: Sequence[str | Path]) -> None:
    """Fast checks before any model loads: local files open, Hub ids only when the Hub is reachable."""
    for source in sources:
        text = str(source)
        if not Path(text).exists() and _looks_like_hub_id(text):
            if not hub_is_reachable():
                raise DataError(f"{text}: not a local file, and the Hugging Face Hub is unreachable (offline); "
                                "pass a local text file")
            continue
        open_binary(Path(text)).close()


def _looks_like_hub_id(source: str) -> bool:
    """`owner/name` or `owner/name:split`, and not a mistyped local path."""
    name = source.split(":", 1)[0]
    parts = name.split("/")
    if len(parts) != 2 or not all(parts) or not all(set(part) <= _HUB_NAME_CHARS for part in parts):
        return False
    if parts[0].startswith(".") or Path(parts[0]).is_dir():
        return False  # ./x, ../x or a folder that exists here: a local path
    return Path(parts[1]).suffix.lower() not in _FILE_SUFFIXES


def _read_hub(source: str, text_column: str | None, collector: _Collector, streaming: bool = False) -> None:
    dataset = load_hub_dataset(source, streaming)
    column = _pick_column(list(dataset.column_names), text_column, source, "column")
    number = 0
    for batch in dataset.iter(batch_size=HUB_BATCH_ROWS):  # never the whole column at once
        for value in batch[column]:
            number += 1
            collector.add(_cell_text(value, f"{source}: row {number}", column))


HUB_BATCH_ROWS = 10_000


def load_hub_dataset(source: str, streaming: bool = False) -> Any:
    """`owner/name[:split]` through `datasets.load_dataset` (memory-mapped; streamed when asked); fails fast
    offline."""
    name, _, split = source.partition(":")
    split = split or "train"
    if not hub_is_reachable():
        raise DataError(
            f"{source}: not a local file, and the Hugging Face Hub is unreachable (offline); pass a local text file"
        )
    try:
        import datasets
    except ImportError:  # pragma: no cover - `datasets` is a dependency
        raise DataError(f"{source}: reading a Hub dataset needs `pip install datasets`; or pass a local file") from None
    try:
        if streaming:
            return datasets.load_dataset(name, split=split, streaming=True)
        return datasets.load_dataset(name, split=split)
    except Exception as error:  # datasets raises many unrelated types (not found, bad split, gated, network)
        detail = (str(error).strip().splitlines() or [""])[0]
        raise DataError(
            f"{source}: could not load the Hub dataset ({type(error).__name__}: {detail}); "
            "check the name and split, or pass a local text file"
        ) from None


def is_hub_source(source: str | Path) -> bool:
    """A source that is not a local file but looks like `owner/name[:split]`."""
    return not Path(source).expanduser().exists() and _looks_like_hub_id(str(source))


# ----------------------------------------------------------------------------------------------- helpers


def _names(names: Iterable[str]) -> str:
    return ", ".join(printable(name) for name in names) or "none"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in counts.items() if count)
