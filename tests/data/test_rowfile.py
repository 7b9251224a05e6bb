"""The teacher table's file: a float32 .npy written block by block, read a few rows at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentadapt.storage.rowfile import RowFile, write_rows


def _written(path: Path, matrix: np.ndarray, block: int = 3) -> RowFile:
    with write_rows(path, len(matrix), matrix.shape[1]) as writer:
        for start in range(0, len(matrix), block):
            writer.append(matrix[start:start + block])
    table = RowFile.open(path, len(matrix))
    assert table is not None
    return table


def test_rows_come_back_in_any_order_with_repeats_and_numpy_reads_the_file(tmp_path: Path) -> None:
    matrix = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    table = _written(tmp_path / "t.npy", matrix)
    rows = np.array([7, 2, 3, 4, 2, 9, 0])
    np.testing.assert_array_equal(table.take(rows), matrix[rows])
    np.testing.assert_array_equal(table.read(3, 6), matrix[3:6])
    assert [start for start, _ in table.blocks(4)] == [0, 4, 8]
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), matrix)  # a standard .npy
    assert table.take(np.array([], dtype=np.int64)).shape == (0, 4)
    with pytest.raises(IndexError):
        table.take(np.array([10]))


def test_a_truncated_foreign_or_wrong_sized_file_is_not_a_table(tmp_path: Path) -> None:
    matrix = np.ones((5, 3), dtype=np.float32)
    path = tmp_path / "t.npy"
    _written(path, matrix)
    assert RowFile.open(path, 6) is None  # another row count: compute it again
    path.write_bytes(path.read_bytes()[:-4])
    assert RowFile.open(path, 5) is None  # truncated
    np.save(path, matrix.astype(np.float64))
    assert RowFile.open(path, 5) is None  # not float32
    path.write_bytes(b"not numpy")
    assert RowFile.open(path, 5) is None
    assert RowFile.open(tmp_path / "absent.npy", 5) is None


def test_a_failed_or_short_write_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.npy"
    with pytest.raises(RuntimeError), write_rows(path, 4, 2) as writer:
        writer.append(np.ones((2, 2)))
        raise RuntimeError("encoding failed")
    with pytest.raises(ValueError, match="2 of 4 rows written"), write_rows(path, 4, 2) as writer:
        writer.append(np.ones((2, 2)))
    with pytest.raises(ValueError, match="block of shape"), write_rows(path, 4, 2) as writer:
        writer.append(np.ones((2, 3)))
    assert list(tmp_path.iterdir()) == []


def test_rows_read_in_order_go_straight_into_the_result_without_a_second_copy(tmp_path: Path) -> None:
    """A block of 65k teacher rows is 200 MB: the read must not hold it as bytes and as a copy besides the result
    (it held it three times, and a 1M-sentence teacher run peaked 460 MB higher for it)."""
    import tracemalloc

    matrix = np.random.default_rng(1).standard_normal((4096, 64)).astype(np.float32)  # 1 MiB
    table = _written(tmp_path / "t.npy", matrix, block=1000)
    rows = np.arange(100, 4000)
    tracemalloc.start()
    try:
        taken = table.take(rows)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(taken, matrix[rows])
    assert peak < 1.25 * taken.nbytes  # the result, and only bookkeeping besides it
    mixed = np.array([5, 6, 7, 3, 4, 4000, 4001, 0])  # runs whose places are and are not consecutive
    np.testing.assert_array_equal(table.take(mixed), matrix[mixed])


def test_a_file_cut_short_while_in_use_is_one_clear_error(tmp_path: Path) -> None:
    matrix = np.ones((50, 8), dtype=np.float32)
    path = tmp_path / "t.npy"
    table = _written(path, matrix)
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size - 8 * 4 * 10)  # the last 10 rows gone
    np.testing.assert_array_equal(table.take(np.arange(5)), matrix[:5])
    with pytest.raises(OSError, match=r"t\.npy: short read \(the file changed while in use\)"):
        table.take(np.arange(45, 50))
