"""The forms vectors are shipped in: a size (the first `dim` coordinates, as sentence-transformers' `truncate_dim`)
and a precision (float32, or int8 and binary as its `quantize_embeddings` makes them), with what each costs to store.

`eval --dims 384,192,96 --quantize none,int8,binary` scores every model in every form from one encoding
(evaluation/evaluate.py); the vectors a task compares are `scoring_vectors(form, ...)`:

- a size keeps the prefix of each vector as the model outputs it (after its Normalize module, if any), as
  `SentenceTransformer(..., truncate_dim=d)` does; a cosine renormalises it.
- int8: `quantize_embeddings(v, "int8", ranges)`: per dimension, the [min, max] of a calibration set cut in 255
  steps, v → floor((v − min) / step) − 128 (clipped to the int8 range). The cosine of those integers is the score.
  The ranges come from the evaluated sentences themselves (sentence-transformers' default) or from a calibration
  file (`--calibration`: a sample of the corpus the vectors will index); the report says which.
- binary: one bit per dimension, v > 0 (`quantize_embeddings(v, "binary")`, 8 dims a byte). The score is
  1 − 2 · Hamming(a, b) / d, the cosine of the ±1 vectors the bits stand for, so any ranking by Hamming distance
  ranks pairs the same way.

Storage per vector: float32 4·d bytes, int8 d bytes, binary d/8 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sentadapt.errors import ConfigError

FULL, INT8, BINARY = "none", "int8", "binary"
PRECISIONS = (FULL, INT8, BINARY)
BYTES_PER_VALUE = {FULL: 4.0, INT8: 1.0, BINARY: 1 / 8}
PRECISION_NAMES = {FULL: "fp32", INT8: "int8", BINARY: "binary"}


@dataclass(frozen=True)
class VectorForm:
    """One size and precision of a model's vectors; `dim` None: the model's whole width."""

    dim: int | None = None
    precision: str = FULL

    def width(self, model_width: int) -> int:
        return model_width if self.dim is None else self.dim

    def bytes_per_vector(self, model_width: int) -> float:
        return self.width(model_width) * BYTES_PER_VALUE[self.precision]

    def label(self, model_width: int) -> str:
        """"192 int8": the size and precision as tables and reports name them."""
        return f"{self.width(model_width)} {PRECISION_NAMES[self.precision]}"

    def to_dict(self, model_width: int) -> dict[str, object]:
        return {"dim": self.width(model_width), "precision": PRECISION_NAMES[self.precision],
                "bytes_per_vector": self.bytes_per_vector(model_width)}


def parse_dims(option: str, value: str | Sequence[int] | None) -> tuple[int, ...]:
    """`--dims 384,192,96` → (384, 192, 96): positive widths, each once (any order; reports keep it)."""
    if value is None or value == "" or value == ():
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    dims = []
    for item in items:
        text = str(item).strip()
        if not text.isdigit() or int(text) < 1:
            raise ConfigError(f"{option}: '{text}' is not a positive whole number of dimensions (e.g. 384,192,96)")
        dims.append(int(text))
    if len(set(dims)) != len(dims):
        raise ConfigError(f"{option}: {','.join(map(str, dims))} lists a size twice; list each once")
    return tuple(dims)


def parse_precisions(option: str, value: str | Sequence[str] | None) -> tuple[str, ...]:
    """`--quantize none,int8,binary` → the precisions, each once."""
    if value is None or value == "" or value == ():
        return ()
    items = [str(item).strip() for item in (value.split(",") if isinstance(value, str) else value)]
    for item in items:
        if item not in PRECISIONS:
            raise ConfigError(f"{option}: '{item}' is not one of {', '.join(PRECISIONS)}")
    if len(set(items)) != len(items):
        raise ConfigError(f"{option}: {','.join(items)} lists a precision twice; list each once")
    return tuple(items)


def forms_of(dims: Sequence[int], precisions: Sequence[str]) -> list[VectorForm]:
    """Every size × precision asked, after the whole float32 vector (the reference every Δ is taken against)."""
    if not dims and not precisions:
        return []
    if BINARY in precisions:
        for dim in dims:
            if dim % 8:
                raise ConfigError(f"--quantize binary: {dim} dimensions do not pack into whole bytes (8 bits each); "
                                  f"use sizes divisible by 8 (e.g. {max(8, dim // 8 * 8)})")
    forms = [VectorForm(dim, precision) for dim in (dims or (None,)) for precision in (precisions or (FULL,))]
    return [VectorForm(), *(form for form in forms if form != VectorForm())]


def resolved(forms: Sequence[VectorForm], model_width: int, model: str) -> list[VectorForm]:
    """`forms` for a model of `model_width`: a size above it is a one-line error; its own width is the whole
    vector; binary on a width the sizes did not name must still pack into bytes."""
    out: list[VectorForm] = []
    for form in forms:
        if form.dim is not None and form.dim > model_width:
            raise ConfigError(f"--dims: {form.dim} is above {model}'s embedding width {model_width}; list sizes up "
                              f"to {model_width}")
        dim = None if form.dim == model_width else form.dim
        if form.precision == BINARY and dim is None and model_width % 8:
            raise ConfigError(f"--quantize binary: {model}'s {model_width} dimensions do not pack into whole bytes; "
                              "give --dims with sizes divisible by 8")
        if VectorForm(dim, form.precision) not in out:
            out.append(VectorForm(dim, form.precision))
    return out


# ---------------------------------------------------------------------- the transforms (numpy, float32 in)


def int8_ranges(calibration: np.ndarray) -> np.ndarray:
    """(2, d): each dimension's min and max over the calibration vectors (sentence-transformers' ranges)."""
    calibration = np.asarray(calibration, dtype=np.float32)
    if calibration.ndim != 2 or len(calibration) < 2:
        raise ConfigError(f"int8 calibration needs at least 2 vectors, got {len(calibration)}")
    return np.vstack((calibration.min(axis=0), calibration.max(axis=0)))


def to_int8(vectors: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """`quantize_embeddings(vectors, "int8", ranges=ranges)`, the same integers: 255 steps per dimension between its
    min and max, a value below or above them clipped to the end bucket."""
    ranges = ranges.astype(np.float32, copy=False)
    starts = ranges[0, :]
    steps = (ranges[1, :] - starts) / 255
    steps = np.where(steps == 0, 1, steps)
    return (np.clip(np.floor((vectors - starts) / steps), 0, 255) - 128).astype(np.int8)


def to_binary(vectors: np.ndarray) -> np.ndarray:
    """`quantize_embeddings(vectors, "binary")`: the bits v > 0 packed 8 to a byte, stored as int8 (byte − 128)."""
    return (np.packbits(vectors > 0, axis=-1).astype(np.int16) - 128).astype(np.int8)


def scoring_vectors(form: VectorForm, vectors: np.ndarray, ranges: np.ndarray | None) -> np.ndarray:
    """The float32 vectors whose cosines score `form`: the prefix; its int8 values; its bits as ±1."""
    prefix = vectors if form.dim is None else vectors[:, :form.dim]
    if form.precision == INT8:
        assert ranges is not None, "int8 needs calibration ranges"
        return to_int8(prefix, ranges[:, :prefix.shape[1]]).astype(np.float32)
    if form.precision == BINARY:
        return np.where(prefix > 0, 1.0, -1.0).astype(np.float32)
    return np.ascontiguousarray(prefix, dtype=np.float32)
