"""`--teacher FILE`: sentence vectors the user already has (an embeddings API, another toolkit), read as a text →
vector lookup.

The layouts, told apart by the file name's ending (VECTOR_FORMATS):
  FILE.jsonl    one object per line, {"text": ..., "embedding": [...]} (the fields embeddings APIs return;
                other names with --set teacher_text_field=… / teacher_vector_field=…); also FILE.jsonl.gz
  FILE.json     the same objects as JSON Lines, or as one JSON array of them; also FILE.json.gz
  FILE.parquet  the same two columns, the vector a list of floats
  FILE.npy      a float matrix (no pickle), row i the vector of line i of FILE.txt beside it (same stem)

Texts are matched as the corpus reader reads sentences (`text_key`): surrounding whitespace — spaces, tabs, a
CRLF's "\r", a trailing "\n" — is removed on both sides, nothing else changes (case, inner spaces, Unicode form).
Every vector must have the first one's width, only finite values and a non-zero length; a text given twice must
have the same vector both times (the first is kept). Each refusal is one line naming the file, the line or row,
and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sentadapt.data.textfile import json_objects, open_binary, printable, text_lines
from sentadapt.errors import DataError
from sentadapt.options import TEXT_FIELD, VECTOR_FIELD

VECTOR_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet", ".npy")
VECTOR_FORMATS = (".jsonl or .json (JSON Lines, or one JSON array, of {\"text\", \"embedding\"} objects; gzipped as "
                  ".jsonl.gz / .json.gz), .parquet (the same two columns), or .npy with a .txt of its sentences "
                  "beside it")
SAME_VECTOR_RTOL, SAME_VECTOR_ATOL = 1e-4, 1e-6  # two copies of a text from a non-deterministic API still agree


def text_key(text: str) -> str:
    """A text as the corpus reader keeps it (data/corpus.py strips every record): the key vectors are matched by."""
    return text.strip()


def vectors_suffix(path: Path) -> str | None:
    """The layout a file name announces (longest ending first: .jsonl.gz before .gz), or None."""
    name = path.name.lower()
    return next((suffix for suffix in sorted(VECTOR_SUFFIXES, key=len, reverse=True) if name.endswith(suffix)), None)


def is_vectors_path(name: str) -> bool:
    """Does `--teacher NAME` name a vectors file rather than a model? A file (a model is a folder or a Hub id), or
    a name with a vectors ending (so a missing file is reported as one)."""
    path = Path(name).expanduser()
    return path.is_file() or vectors_suffix(path) is not None


@dataclass(frozen=True)
class TextVectors:
    """Vectors looked up by text: row `rows[text_key(text)]` of `vectors` (float32, (rows in the file, width))."""

    path: Path
    rows: dict[str, int]
    vectors: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def missing(self, texts: Sequence[str]) -> list[str]:
        return [text for text in texts if text_key(text) not in self.rows]

    def lookup(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of `texts` (every one must be present: check `missing` first)."""
        rows = (self.rows[text_key(text)] for text in texts)
        return self.vectors[np.fromiter(rows, dtype=np.int64, count=len(texts))]


def check_vectors_file(path: Path, name: str | None = None) -> str:
    """`--teacher NAME` as a vectors file: it exists and its name announces a layout sentadapt reads; its suffix.
    Called before anything loads (check_teacher) and again when the file is read."""
    name = name or str(path)
    if not path.is_file():
        raise DataError(f"--teacher {name}: no such file; give a model (folder or Hub id) or a vectors file: "
                        f"{VECTOR_FORMATS}")
    suffix = vectors_suffix(path)
    if suffix is None:
        raise DataError(f"--teacher {name}: a file, but not one sentadapt reads as vectors; accepted: "
                        f"{VECTOR_FORMATS}")
    return suffix


def read_vectors(path: Path, text_field: str = TEXT_FIELD, vector_field: str = VECTOR_FIELD) -> TextVectors:
    suffix = check_vectors_file(path)
    # where row i sits in the file, named only for an error message (not built for every row of a large file)
    place: Callable[[int], str]
    if suffix == ".npy":
        texts, vectors = _read_npy(path)
        place = lambda row: f"row {row + 1} ({path.with_suffix('.txt').name} line {row + 1})"  # noqa: E731
    elif suffix == ".parquet":
        texts, vectors = _read_parquet(path, text_field, vector_field)
        place = lambda row: f"row {row + 1}"  # noqa: E731
    else:
        texts, vectors, lines = _read_json(path, text_field, vector_field)
        place = lambda row: f"line {lines[row]}"  # noqa: E731
    if not texts:
        raise DataError(f"{path}: no vectors; the file must hold one vector per sentence of the corpus")
    _check_not_zero(path, vectors, place)
    return TextVectors(path, _rows_by_text(path, texts, vectors, place), vectors)


def _rows_by_text(path: Path, texts: list[str], vectors: np.ndarray, place: Callable[[int], str]) -> dict[str, int]:
    """text_key → the row of its first vector; a later copy must carry the same vector (else which one would the
    student learn?)."""
    rows: dict[str, int] = {}
    for row, text in enumerate(texts):
        key = text_key(text)
        first = rows.setdefault(key, row)
        if first != row and not np.allclose(vectors[first], vectors[row], rtol=SAME_VECTOR_RTOL,
                                            atol=SAME_VECTOR_ATOL):
            raise DataError(f"{path}: {place(row)} gives {printable(key)!r} another vector than {place(first)}; "
                            "keep one vector per sentence (texts are compared without surrounding whitespace)")
    return rows


def _check_not_zero(path: Path, vectors: np.ndarray, place: Callable[[int], str]) -> None:
    zero = ~np.any(vectors != 0, axis=1)
    if zero.any():
        row = int(np.flatnonzero(zero)[0])
        raise DataError(f"{path}: {place(row)}: an all-zero vector has no direction (its cosine with anything is "
                        "undefined); recompute it or leave that sentence out of the corpus")


def _read_json(path: Path, text_field: str, vector_field: str) -> tuple[list[str], np.ndarray, list[int]]:
    """JSON Lines, or — a .json whose first character is "[" — one array of objects (its items numbered as
    lines)."""
    if path.name.lower().endswith((".json", ".json.gz")) and _first_character(path) == "[":
        return _read_json_array(path, text_field, vector_field)
    return _read_jsonl(path, text_field, vector_field)


def _first_character(path: Path) -> str:
    with open_binary(path) as handle:
        head = handle.read(4096).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    return head[:1]


def _read_json_array(path: Path, text_field: str, vector_field: str) -> tuple[list[str], np.ndarray, list[int]]:
    try:
        with open_binary(path) as handle:
            items = json.load(handle)
    except (ValueError, RecursionError) as error:
        raise DataError(f"{path}: not valid JSON ({error}); give one array of objects or JSON Lines") from None
    texts: list[str] = []
    vectors: list[np.ndarray] = []
    width: int | None = None
    for number, record in enumerate(items, start=1):
        text, array = _record_vector(record if isinstance(record, dict) else {}, text_field, vector_field,
                                     f"{path}: item {number}")
        width = _check_vector(array, width, f"{path}: item {number}")
        texts.append(text)
        vectors.append(array)
    return texts, np.stack(vectors) if vectors else np.empty((0, 0), dtype=np.float32), list(range(1, len(texts) + 1))


def _record_vector(record: dict, text_field: str, vector_field: str, where: str) -> tuple[str, np.ndarray]:
    expectation = f'"{text_field}" (a string) and "{vector_field}" (a list of numbers)'
    text, vector = record.get(text_field), record.get(vector_field)
    if not isinstance(text, str) or not isinstance(vector, list):
        raise DataError(f"{where}: expected a JSON object with {expectation}; name other fields with "
                        f"--set teacher_text_field=NAME --set teacher_vector_field=NAME")
    try:
        return text, np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError):
        raise DataError(f"{where}: \"{vector_field}\" must be a list of numbers") from None


def _read_jsonl(path: Path, text_field: str, vector_field: str) -> tuple[list[str], np.ndarray, list[int]]:
    expectation = f'"{text_field}" (a string) and "{vector_field}" (a list of numbers)'
    texts: list[str] = []
    vectors: list[np.ndarray] = []
    lines: list[int] = []
    width: int | None = None
    for number, record in json_objects(path, expectation):
        text, array = _record_vector(record, text_field, vector_field, f"{path}:{number}")
        width = _check_vector(array, width, f"{path}:{number}")
        texts.append(text)
        vectors.append(array)
        lines.append(number)
    return texts, np.stack(vectors) if vectors else np.empty((0, 0), dtype=np.float32), lines


def _read_parquet(path: Path, text_field: str, vector_field: str) -> tuple[list[str], np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as error:
        raise DataError(f"{path}: not a readable Parquet file ({error})") from None
    absent = [name for name in (text_field, vector_field) if name not in schema.names]
    if absent:
        raise DataError(f"{path}: no column {', '.join(map(repr, absent))} (columns: {', '.join(schema.names)}); "
                        "name them with --set teacher_text_field=NAME --set teacher_vector_field=NAME")
    table = pq.read_table(path, columns=[text_field, vector_field])
    column = table.column(vector_field).combine_chunks()
    if not pa.types.is_list(column.type) and not pa.types.is_large_list(column.type) \
            and not pa.types.is_fixed_size_list(column.type):
        raise DataError(f"{path}: column {vector_field!r} is {column.type}, not a list of floats")
    # a null vector counts as width -1: never the first row's width, so it is reported like a wrong width
    lengths = pc.fill_null(pc.list_value_length(column), -1).to_numpy(zero_copy_only=False)
    wrong = np.flatnonzero(lengths != lengths[0]) if len(lengths) else np.empty(0, dtype=np.int64)
    if len(wrong) or (len(lengths) and lengths[0] < 1):
        row = int(wrong[0]) if len(wrong) else 0
        got = "no vector (null)" if lengths[row] < 0 else f"a vector of {lengths[row]} values"
        raise DataError(f"{path}: row {row + 1}: {got}, but row 1 has {max(int(lengths[0]), 0)}; every vector must "
                        "have the same width")
    vectors = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float32)
    vectors = vectors.reshape(len(column), -1) if len(column) else vectors.reshape(0, 0)
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        raise DataError(f"{path}: row {int(np.flatnonzero(bad)[0]) + 1}: the vector holds NaN or infinity; "
                        "recompute it or leave that sentence out of the corpus")
    texts = table.column(text_field).to_pylist()
    if any(not isinstance(text, str) for text in texts):
        row = next(i for i, text in enumerate(texts) if not isinstance(text, str))
        raise DataError(f"{path}: row {row + 1}: {text_field!r} is not a string")
    return texts, vectors


def _read_npy(path: Path) -> tuple[list[str], np.ndarray]:
    texts_path = path.with_suffix(".txt")
    if not texts_path.is_file():
        raise DataError(f"{path}: no {texts_path.name} beside it; a .npy of vectors needs its sentences, one per "
                        "line, row i of the matrix the vector of line i")
    try:
        vectors = np.load(path, allow_pickle=False)  # never unpickle a user's file
    except ValueError as error:
        raise DataError(f"{path}: not a plain .npy matrix ({error})") from None
    if vectors.ndim != 2 or not np.issubdtype(vectors.dtype, np.number):
        raise DataError(f"{path}: expected a 2-D matrix of numbers (sentences × width), got shape "
                        f"{vectors.shape} of {vectors.dtype}")
    texts = [line for _number, line in text_lines(texts_path)]
    if len(texts) != len(vectors):
        raise DataError(f"{path}: {len(vectors)} vectors but {texts_path.name} has {len(texts)} lines; row i of "
                        "the matrix must be the vector of line i")
    vectors = vectors.astype(np.float32)
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"{path}: row {row + 1} ({texts_path.name} line {row + 1}): the vector holds NaN or "
                        "infinity; recompute it or leave that sentence out of the corpus")
    return texts, vectors


def _check_vector(vector: np.ndarray, width: int | None, where: str) -> int:
    if vector.ndim != 1 or len(vector) == 0:
        raise DataError(f"{where}: the vector must be a flat, non-empty list of numbers")
    if width is not None and len(vector) != width:
        raise DataError(f"{where}: a vector of {len(vector)} values, but the first has {width}; every vector "
                        "must have the same width")
    if not np.isfinite(vector).all():
        raise DataError(f"{where}: the vector holds NaN or infinity; recompute it or leave that sentence out of "
                        "the corpus")
    return len(vector)


def check_covers(vectors: TextVectors, texts: Callable[[int, int], list[str]], rows: int, chunk: int) -> None:
    """Every one of the `rows` training texts must have a vector: else one line naming the first missing text and
    how many miss."""
    missing, first = 0, None
    for start in range(0, rows, chunk):
        absent = vectors.missing(texts(start, min(start + chunk, rows)))
        missing += len(absent)
        first = first if first is not None or not absent else absent[0]
    if missing:
        raise DataError(f"{vectors.path}: no vector for {missing} of the {rows} training sentences, the first "
                        f"{printable(first or '')!r}; add their vectors to the file (every sentence of the corpus as "
                        "adapt reads it)")
