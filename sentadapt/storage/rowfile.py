"""A float32 matrix on disk as a .npy file, written a block of rows at a time and read a few rows at a time.

What a teacher's table needs at any size: 1M sentences × 768 dims × 4 B = 3 GB must never be held in memory, nor
mapped (pages of a mapping that were read or written count in the process's resident memory until the kernel
drops them: a pass over a memory-mapped table grows RSS to the table's size). So rows are appended with plain
writes and read back with `os.pread`, a batch's rows at a time; only the page cache, not the process, holds them.
The file is a standard .npy (numpy.load reads it), written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from sentadapt.storage.durable import replace_durably

DTYPE = np.dtype("<f4")


class RowFile:
    """A (rows, dim) little-endian float32 .npy file opened for reading rows; None from `open` when the file is
    not such a matrix of `rows` rows (absent, truncated, foreign: compute it again)."""

    def __init__(self, path: Path, offset: int, shape: tuple[int, int]) -> None:
        self.path, self.offset, self.shape = path, offset, shape
        self._fd: int | None = None

    @classmethod
    def open(cls, path: Path, rows: int | None = None) -> RowFile | None:
        if not path.is_file():
            return None
        try:
            with path.open("rb") as handle:
                version = np.lib.format.read_magic(handle)
                read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read_header(handle)
                offset = handle.tell()
        except (OSError, ValueError):
            return None
        if len(shape) != 2 or fortran or dtype != DTYPE or (rows is not None and shape[0] != rows):
            return None
        if path.stat().st_size != offset + shape[0] * shape[1] * DTYPE.itemsize:
            return None  # truncated
        return cls(path, offset, (int(shape[0]), int(shape[1])))

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def dim(self) -> int:
        return self.shape[1]

    def _descriptor(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    def __getstate__(self) -> dict[str, object]:  # a copy in another process opens its own descriptor
        return {**self.__dict__, "_fd": None}

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)  # type: ignore[arg-type]

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows `rows` (any order, repeats allowed) as a new (len(rows), dim) array: one read per run of
        consecutive rows, straight into the array where the run's places in it are consecutive too (rows asked in
        ascending order: no copy at all)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        if not len(rows):
            return out
        if rows.min() < 0 or rows.max() >= len(self):
            raise IndexError(f"{self.path}: rows outside 0..{len(self) - 1}")
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        breaks = np.flatnonzero(np.diff(ordered) != 1) + 1  # runs of consecutive rows
        for run in np.split(np.arange(len(rows)), breaks):
            first, count, places = int(ordered[run[0]]), len(run), order[run]
            if bool(np.all(np.diff(places) == 1)):  # their places in `out` are consecutive too
                self._read_into(first, out[places[0]:places[0] + count])
            else:
                out[places] = self.read(first, first + count)
        return out

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows start..stop-1, read from the file (not mapped) into a new array."""
        out = np.empty((stop - start, self.dim), dtype=DTYPE)
        self._read_into(start, out)
        return out

    def _read_into(self, start: int, out: np.ndarray) -> None:
        """Fill `out` (C-contiguous rows) with rows start.. of the file, with no intermediate buffer: a 65k-row read
        of 768 floats is 200 MB, and bytes then a copy of them would hold it three times at once."""
        view = memoryview(out).cast("B")  # type: ignore[arg-type]
        offset, done = self.offset + start * self.dim * DTYPE.itemsize, 0
        while done < len(view):  # a read may return less than asked (Linux caps one call near 2 GiB)
            got = os.preadv(self._descriptor(), [view[done:]], offset + done)
            if got <= 0:
                raise OSError(f"{self.path}: short read (the file changed while in use)")
            done += got
        if not DTYPE.isnative:  # the file is little-endian float32 whatever machine reads it
            out.byteswap(inplace=True)

    def blocks(self, size: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, block of up to `size` rows) over the whole matrix, in order."""
        for start in range(0, len(self), size):
            yield start, self.read(start, min(start + size, len(self)))


class RowWriter:
    """Appends float32 rows to an open .npy file whose header already says the final shape."""

    def __init__(self, handle: object, rows: int, dim: int) -> None:
        self.handle, self.rows, self.dim, self.written = handle, rows, dim, 0

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=DTYPE)
        if block.ndim != 2 or block.shape[1] != self.dim or self.written + len(block) > self.rows:
            raise ValueError(f"RowWriter: block of shape {block.shape} after {self.written} of {self.rows} rows "
                             f"× {self.dim}")
        self.handle.write(block.tobytes())  # type: ignore[attr-defined]
        self.written += len(block)


@contextlib.contextmanager
def write_rows(path: Path, rows: int, dim: int) -> Iterator[RowWriter]:
    """Write a (rows, dim) float32 .npy at `path` block by block; it appears under its name only when the block
    ends without an error and every row was written (a failed or partial write leaves nothing behind)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        with tmp.open("wb") as handle:
            header = {"descr": DTYPE.str, "fortran_order": False, "shape": (rows, dim)}
            np.lib.format.write_array_header_1_0(handle, header)
            writer = RowWriter(handle, rows, dim)
            yield writer
        if writer.written != rows:
            raise ValueError(f"{path}: {writer.written} of {rows} rows written")
        replace_durably(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
