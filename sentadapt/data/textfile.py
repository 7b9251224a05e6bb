"""Local text files, for every reader in data/: opening (gzip, BOM), UTF-8 decoding with line numbers, and the
format a file's name says it holds.

One place so a file is accepted or refused the same way whichever command reads it: a trailing `.gz` (any case) is
gunzipped, a UTF-8 BOM dropped, UTF-16 and binary files refused, and an invalid byte, a malformed JSON line or a
malformed csv/tsv row reported as `FILE:LINE: ...` on one line.
"""

from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from sentadapt.errors import DataError
from sentadapt.options import DEFAULT_ENCODING_ERRORS

TEXT, JSONL, TSV, CSV, PARQUET = "text", "jsonl", "tsv", "csv", "parquet"
_FORMAT_OF_SUFFIX = {".jsonl": JSONL, ".json": JSONL, ".tsv": TSV, ".csv": CSV, ".parquet": PARQUET}

ENCODING_ERRORS = ("strict", "replace", "skip")
JSON_ARRAY = "a JSON array, not JSON Lines; write one JSON object per line"  # a .json file saved as one array
SAVE_AS_UTF8 = "save the file as UTF-8"  # the fix for a reader that has no --encoding-errors option

BINARY_PROBE_BYTES = 8192
_CHUNK_BYTES = 4 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# ------------------------------------------------------------------------------------------------ formats


def format_of(path: Path) -> str:
    """What a file holds, by its name (case-insensitive, through a trailing .gz): jsonl (.jsonl, .json), tsv, csv,
    else text (one record per line)."""
    return _FORMAT_OF_SUFFIX.get(content_suffix(path), TEXT)


def require_format(path: Path, what: str, accepted: Sequence[str]) -> str:
    """`format_of(path)`, which must be one of `accepted` (their order is the order the error lists them in)."""
    fmt = format_of(path)
    if fmt in accepted:
        return fmt
    names = [f".{name}" for name in accepted]
    listed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
    raise DataError(
        f"{path}: unknown {what} format '{content_suffix(path) or 'no suffix'}'; use {listed} (optionally .gz)"
    )


def is_gzip_name(path: Path) -> bool:
    return path.suffix.lower() == ".gz"


def content_suffix(path: Path) -> str:
    """The suffix naming the content, lower-cased: the last one once a trailing .gz is taken off ('' if none)."""
    return (path.with_suffix("") if is_gzip_name(path) else path).suffix.lower()


# ------------------------------------------------------------------------------------------- opening, decoding


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, gunzipping a `.gz` file (checked to really be gzip)."""
    if path.is_dir():
        raise DataError(f"{path}: is a directory; pass a file")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    try:
        if not is_gzip_name(path):
            return path.open("rb")
        with path.open("rb") as probe:
            if probe.read(2) != _GZIP_MAGIC:
                raise DataError(f"{path}: not a gzip file despite the .gz suffix")
        return gzip.open(path, "rb")  # type: ignore[return-value]
    except OSError as error:  # e.g. permission denied
        raise DataError(f"{path}: cannot be read ({error.strerror or error}); check the path") from None


class Utf8Lines:
    """The physical lines of a local file (split on "\\n"; a CRLF's "\\r" is left on), decoded from UTF-8.

    Iterating yields each line as text, or None for a line dropped by `encoding_errors="skip"` (so line numbers
    stay right); the counts of replaced and dropped lines are kept on the object. With "strict", an invalid byte
    is a DataError naming the file and line, ending with `fix` (what the user can do about it). Files are read in
    big chunks and each chunk decoded at once (10M-line corpora); only a chunk holding invalid UTF-8 is decoded
    again line by line.
    """

    def __init__(self, path: Path, encoding_errors: str = DEFAULT_ENCODING_ERRORS,
                 on_bytes: Callable[[int], None] | None = None, fix: str = SAVE_AS_UTF8) -> None:
        self.path = path
        self.encoding_errors = encoding_errors
        self.on_bytes = on_bytes  # told how many bytes of the file (compressed, for .gz) each chunk consumed
        self.fix = fix
        self.replaced = 0
        self.dropped = 0
        self.dropped_lines: set[int] = set()

    def __iter__(self) -> Iterator[str | None]:
        with open_binary(self.path) as handle:
            pending: list[bytes] = []  # the bytes after the last newline seen so far
            number = 0  # lines yielded so far
            first = True
            raw = getattr(handle, "fileobj", None)  # a GzipFile's compressed stream: progress in file bytes
            done = 0
            while True:
                chunk = self._read(handle, max(_CHUNK_BYTES, BINARY_PROBE_BYTES) if first else _CHUNK_BYTES)
                if not chunk:
                    break
                if self.on_bytes is not None:
                    position = raw.tell() if raw is not None else done + len(chunk)
                    self.on_bytes(position - done)
                    done = position
                if first:
                    first = False
                    chunk = self._check_start(chunk)
                cut = chunk.rfind(b"\n")
                if cut < 0:
                    pending.append(chunk)
                    continue
                block = b"".join([*pending, chunk[:cut]]) if pending else chunk[:cut]
                pending = [chunk[cut + 1 :]]
                lines = self._decode(block, number)
                number += len(lines)
                yield from lines
            tail = b"".join(pending)
            if tail:
                yield from self._decode(tail, number)

    def _read(self, handle: BinaryIO, size: int) -> bytes:
        try:
            return handle.read(size)
        except (OSError, EOFError, zlib.error) as error:
            raise DataError(f"{self.path}: corrupt or truncated gzip file ({error}); re-create the file") from None

    def _check_start(self, chunk: bytes) -> bytes:
        if chunk.startswith(_UTF8_BOM):
            return chunk[len(_UTF8_BOM) :]
        if chunk.startswith(_UTF16_BOMS):
            raise DataError(f"{self.path}: is UTF-16 text; save it as UTF-8")
        if b"\x00" in chunk[:BINARY_PROBE_BYTES]:
            raise DataError(f"{self.path}: looks like a binary file, not text; pass a UTF-8 text file")
        return chunk

    def _decode(self, block: bytes, before: int) -> list[str | None]:
        try:
            return block.decode("utf-8").split("\n")  # type: ignore[return-value]
        except UnicodeDecodeError:
            pass
        lines: list[str | None] = []
        for offset, raw in enumerate(block.split(b"\n")):
            try:
                lines.append(raw.decode("utf-8"))
                continue
            except UnicodeDecodeError as error:
                number = before + offset + 1
                if self.encoding_errors == "strict":
                    bad = raw[error.start : error.start + 1].hex()
                    raise DataError(
                        f"{self.path}:{number}: not valid UTF-8 ({error.reason} 0x{bad} at byte {error.start + 1} "
                        f"of the line); {self.fix}"
                    ) from None
            if self.encoding_errors == "replace":
                self.replaced += 1
                lines.append(raw.decode("utf-8", "replace"))
            else:
                self.dropped += 1
                self.dropped_lines.add(number)
                lines.append(None)
        return lines


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of a UTF-8 text file, strictly decoded (see Utf8Lines)."""
    for number, line in enumerate(Utf8Lines(path), start=1):
        yield number, line or ""  # strict: never None


# --------------------------------------------------------------------------------------------- JSON Lines


def json_error(where: str, error: ValueError | RecursionError) -> DataError:
    """The error for a line that is not JSON (`where` is FILE:LINE)."""
    if isinstance(error, json.JSONDecodeError):
        reason = error.msg
    else:
        reason = "nested too deeply" if isinstance(error, RecursionError) else type(error).__name__
    return DataError(f"{where}: invalid JSON ({reason}); each line must be one JSON object")


def json_objects(path: Path, expectation: str, required: str | None = None,
                 on_blank: Callable[[], None] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSON Lines file, blank lines skipped (and told to `on_blank`); every line must be
    an object (holding `required`, when given). Errors name the file and line; `expectation` says what a line
    should hold."""
    for number, line in text_lines(path):
        if not line.strip():
            if on_blank is not None:
                on_blank()
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as error:
            if starts_json_array(line):  # the start of an array of objects spread over lines
                raise DataError(f"{path}:{number}: {JSON_ARRAY}") from None
            raise json_error(f"{path}:{number}", error) from None
        if isinstance(record, list) and record and all(isinstance(item, dict) for item in record):
            raise DataError(f"{path}:{number}: {JSON_ARRAY}")  # the whole array of objects on one line
        if not isinstance(record, dict) or (required is not None and required not in record):
            raise DataError(f"{path}:{number}: expected a JSON object with {expectation}")
        yield number, record


# ------------------------------------------------------------------------------------------------ Parquet


def parquet_file(path: Path) -> Any:
    """A Parquet file opened for reading (what Hugging Face datasets store), or one line saying it is not one."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as error:  # pyarrow's ArrowInvalid / OSError for a file that is not Parquet
        raise DataError(f"{path}: not a readable Parquet file ({str(error).splitlines()[0]})") from None


def at(path: Path, number: int) -> str:
    """Where a record is, as a message names it: `FILE:LINE` in a text file, `FILE row N` in a Parquet file (which
    has no lines: "file.parquet:4" sent users to a line of a binary file)."""
    return f"{path} row {number}" if Path(path).suffix == ".parquet" else f"{path}:{number}"


def parquet_records(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based row number, record) of a Parquet file, a row group at a time; every one of `columns` must be
    there (an error names the file and the columns it has). A message about a row names it with `at`: FILE row N."""
    parquet = parquet_file(path)
    names = parquet.schema_arrow.names
    missing = [column for column in columns if column not in names]
    if missing:
        raise DataError(f"{path}: no column(s) {', '.join(missing)} (columns: {', '.join(names)}); expected "
                        f"{', '.join(columns)}")
    number = 0
    for group in range(parquet.num_row_groups):
        for record in parquet.read_row_group(group).to_pylist():
            number += 1
            yield number, record


def starts_json_array(line: str) -> bool:
    """Whether a line opens an array of JSON objects (a .json saved as one array, not JSON Lines): "[" alone, or
    "[{" (not "[[[", a nesting a reader names as such)."""
    stripped = line.strip()
    return stripped == "[" or stripped.startswith("[{")


# ---------------------------------------------------------------------------------------------- csv / tsv


def table_reader(lines: Iterable[str | None], fmt: str) -> Any:
    """A csv.reader over decoded lines (a None, a line dropped as invalid UTF-8, reads as a blank line).

    TSV has no quoting (STS, GLUE and SBERT files are written that way; a sentence may start with a quote); CSV
    follows RFC 4180 quoting, so a quoted field may span lines and `line_num` is the line a row ends on.
    """
    feed = ((line + "\n") if line is not None else "\n" for line in lines)
    quoting = csv.QUOTE_NONE if fmt == TSV else csv.QUOTE_MINIMAL
    return csv.reader(feed, delimiter="\t" if fmt == TSV else ",", quoting=quoting)  # type: ignore[arg-type]


def table_error(where: str, fmt: str, error: csv.Error) -> DataError:
    """The error for a row the csv module cannot parse (`where` is FILE:LINE)."""
    if "new-line character seen in unquoted field" in str(error):  # the module's hint names a Python argument
        return DataError(f"{where}: malformed {fmt.upper()} (a line break inside a row: the file uses old Mac "
                         "line endings or a bare carriage return); save it with LF or CRLF line endings")
    return DataError(f"{where}: malformed {fmt.upper()} ({error})")


def check_row_width(row: list[str], header: list[str], where: str, fmt: str) -> None:
    """A csv/tsv row must have as many cells as the header (a stray tab or comma shifts every column)."""
    if len(row) != len(header):
        hint = "fields cannot contain tabs" if fmt == TSV else "quote fields that contain ','"
        raise DataError(f"{where}: expected {len(header)} columns like the header, found {len(row)}; {hint}")


def printable(text: str, limit: int = 80) -> str:
    """`text` made safe to quote in a one-line error message: control characters escaped, long text cut."""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
