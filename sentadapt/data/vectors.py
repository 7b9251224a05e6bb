"""`--teacher FILE`: sentence vectors the user already has (an embeddings API, another toolkit), read as a text →
vector lookup.

Three layouts:
  FILE.jsonl    one object per line, {"text": ..., "embedding": [...]} (the fields embeddings APIs return;
                other names with --set teacher_text_field=… / teacher_vector_field=…)
  FILE.parquet  the same two columns, the vector a list of floats
  FILE.npy      a float matrix (no pickle), row i the vector of line i of FILE.txt beside it (same stem)

Every vector must have the first one's width and only finite values; each refusal is one line naming the file,
the line or row, and what to do. A text given twice keeps its first vector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sentadapt.data.textfile import json_objects, printable, text_lines
from sentadapt.errors import DataError

VECTOR_SUFFIXES = (".jsonl", ".parquet", ".npy")


def is_vectors_path(name: str) -> bool:
    """Does `--teacher NAME` name a vectors file (by its suffix) rather than a model?"""
    return Path(name).suffix.lower() in VECTOR_SUFFIXES


@dataclass(frozen=True)
class TextVectors:
    """Vectors looked up by text: row `rows[text]` of `vectors` (float32, (unique texts, width))."""

    path: Path
    rows: dict[str, int]
    vectors: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def missing(self, texts: Sequence[str]) -> list[str]:
        return [text for text in texts if text not in self.rows]

    def lookup(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of `texts` (every one must be present: check `missing` first)."""
        return self.vectors[np.fromiter((self.rows[text] for text in texts), dtype=np.int64, count=len(texts))]


def read_vectors(path: Path, text_field: str = "text", vector_field: str = "embedding") -> TextVectors:
    if not path.is_file():
        raise DataError(f"--teacher {path}: no such file; give a model (folder or Hub id) or a vectors file "
                        f"({', '.join(VECTOR_SUFFIXES)})")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        texts, vectors = _read_npy(path)
    elif suffix == ".parquet":
        texts, vectors = _read_parquet(path, text_field, vector_field)
    else:
        texts, vectors = _read_jsonl(path, text_field, vector_field)
    if not texts:
        raise DataError(f"{path}: no vectors; the file must hold one vector per sentence of the corpus")
    rows: dict[str, int] = {}
    for row, text in enumerate(texts):
        rows.setdefault(text, row)
    return TextVectors(path, rows, vectors)


def _read_jsonl(path: Path, text_field: str, vector_field: str) -> tuple[list[str], np.ndarray]:
    expectation = f'"{text_field}" (a string) and "{vector_field}" (a list of numbers)'
    texts: list[str] = []
    vectors: list[np.ndarray] = []
    width: int | None = None
    for number, record in json_objects(path, expectation):
        text, vector = record.get(text_field), record.get(vector_field)
        if not isinstance(text, str) or not isinstance(vector, list):
            raise DataError(f"{path}:{number}: expected a JSON object with {expectation}; name other fields with "
                            f"--set teacher_text_field=NAME --set teacher_vector_field=NAME")
        try:
            array = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError):
            raise DataError(f"{path}:{number}: \"{vector_field}\" must be a list of numbers") from None
        width = _check_vector(array, width, f"{path}:{number}")
        texts.append(text)
        vectors.append(array)
    return texts, np.stack(vectors) if vectors else np.empty((0, 0), dtype=np.float32)


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
