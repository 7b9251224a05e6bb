"""Training examples → deterministic, resumable global batches, sharded across processes.

The plan for an epoch is a pure function of (seed, epoch, lengths), so a resumed run rebuilds the
exact same batches and skips the ones already done. Batches are drawn at random; with
`length_grouping`, each window of 50 batches is sorted by length before being cut into batches
(less padding, as Hugging Face's group_by_length does) and the batch order is shuffled again.
The last incomplete batch is dropped: every process must hold the same number of views for the
cross-process gather, and a short batch would have fewer negatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from sentadapt.errors import DataError

GROUPING_WINDOW = 50  # batches per length-sorted window


@dataclass
class TokenizedExamples:
    """Pre-tokenized examples, memory-mapped: `columns` of token-id lists (1 for sentences, 2 for pairs/NLI),
    each an Arrow `list<int32>` array (usually read from the corpus cache, see `sentadapt.data.prepare`), and
    optional labels. A batch gathers only its own rows, so memory does not grow with the corpus."""

    columns: list[pa.ChunkedArray]
    labels: np.ndarray | None = None
    texts: TextRows | None = None  # each example's first text (a teacher encodes them); None for in-memory lists

    def __post_init__(self) -> None:
        # first row of each chunk: a batch takes rows chunk by chunk (ChunkedArray.take would first concatenate
        # every chunk, i.e. copy the whole corpus, for each batch)
        self.chunk_starts = [_chunk_starts(column) for column in self.columns]

    def example_texts(self, start: int, stop: int) -> list[str]:
        """The text distillation compares of examples start..stop-1 (the sentence; an NLI premise)."""
        if self.texts is None:
            raise DataError("these training examples were built from token ids alone; a teacher needs their texts")
        return self.texts.slice(start, stop)

    @classmethod
    def from_lists(cls, columns: Sequence[Sequence[Sequence[int]]], labels: Sequence[int] | None = None,
                   ) -> TokenizedExamples:
        """From in-memory token-id lists (small data, tests)."""
        arrays = [pa.chunked_array([pa.array(list(column), type=pa.list_(pa.int32()))]) for column in columns]
        return cls(arrays, None if labels is None else np.asarray(labels, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.columns[0])

    def lengths(self) -> np.ndarray:
        """Tokens per example (the longest side for pairs), int32: what length grouping sorts by."""
        lengths = [pc.list_value_length(column).to_numpy().astype(np.int32) for column in self.columns]
        return np.maximum.reduce(lengths) if len(lengths) > 1 else lengths[0]

    def collate(self, indices: Sequence[int], pad_id: int, multiple: int = 1) -> dict[str, torch.Tensor]:
        return collate(self, indices, pad_id, multiple)


@dataclass
class TextRows:
    """Each example's text, memory-mapped from the corpus cache: `column` holds every record read (the sentence
    column, or NLI premises), `keep` the record number of each example. Read a slice at a time: never all texts."""

    column: pa.ChunkedArray
    keep: np.ndarray

    def __post_init__(self) -> None:
        self.chunk_starts = _chunk_starts(self.column)

    def __len__(self) -> int:
        return len(self.keep)

    def slice(self, start: int, stop: int) -> list[str]:
        rows = np.asarray(self.keep[start:stop], dtype=np.int64)
        return _take(self.column, self.chunk_starts, rows).to_pylist() if len(rows) else []


@dataclass
class RowPairs:
    """Positive pairs as rows of a precomputed embedding matrix (recipes on a frozen encoder, e.g. CLSR)."""

    a_rows: list[int]
    b_rows: list[int]
    texts: list[str] | None = None  # the text of each matrix row (what a teacher encodes)

    def __len__(self) -> int:
        return len(self.a_rows)

    def example_texts(self, start: int, stop: int) -> list[str]:
        """The first sentence of pairs start..stop-1: the one distillation compares."""
        if self.texts is None:
            raise DataError("these pairs were built from row numbers alone; a teacher needs their texts")
        return [self.texts[row] for row in self.a_rows[start:stop]]

    def lengths(self) -> list[int]:
        return [1] * len(self)  # nothing to pad

    def collate(self, indices: list[int], pad_id: int, multiple: int = 1) -> dict[str, torch.Tensor]:
        return {"a_rows": torch.tensor([self.a_rows[i] for i in indices], dtype=torch.long),
                "b_rows": torch.tensor([self.b_rows[i] for i in indices], dtype=torch.long)}


def plan_epoch(
    lengths: Sequence[int] | np.ndarray, global_batch: int, seed: int, epoch: int, group_by_length: bool
) -> np.ndarray:
    """The epoch's global batches, one row of example indices each (drop_last); identical for every process.

    Vectorised (10M examples: one int64 array, no Python lists); the stable sort by (window, -length) gives
    exactly the order of sorting each window by descending length with Python's stable `sorted`.
    """
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(len(lengths), generator=generator).numpy()
    usable = len(order) - len(order) % global_batch
    order = order[:usable]
    if group_by_length:
        window = global_batch * GROUPING_WINDOW
        lengths = np.asarray(lengths)
        longest = int(lengths.max()) if len(lengths) else 0
        key = np.arange(usable, dtype=np.int64)  # window number, then longest first: one int64 key, sorted stably
        np.floor_divide(key, window, out=key)
        key *= longest + 1
        key += longest - lengths[order]
        order = order[np.argsort(key, kind="stable")]
        del key
    batches = order.reshape(-1, global_batch)
    if group_by_length:
        batches = batches[torch.randperm(len(batches), generator=generator).numpy()]
    return batches


def shard(batch: Sequence[int] | np.ndarray, rank: int, world_size: int) -> Sequence[int] | np.ndarray:
    """This process's contiguous slice of a global batch (rank order = gather order)."""
    size = len(batch) // world_size
    return batch[rank * size:(rank + 1) * size]


def collate(examples: TokenizedExamples, indices: Sequence[int], pad_id: int, multiple: int = 1,
            ) -> dict[str, torch.Tensor]:
    """Dynamic padding per column: sentences → input_ids/attention_mask; pairs → a_* and b_* (+ labels). Each
    column is padded to its longest row rounded up to a multiple of `multiple`."""
    rows = np.asarray(indices, dtype=np.int64)
    taken = [_take(column, starts, rows) for column, starts in zip(examples.columns, examples.chunk_starts)]
    if len(examples.columns) == 1:
        input_ids, attention_mask = _padded(taken[0], pad_id, multiple)
        return {"input_ids": input_ids, "attention_mask": attention_mask}
    batch: dict[str, torch.Tensor] = {}
    for side, rows_of_side in zip("ab", taken):
        batch[f"{side}_input_ids"], batch[f"{side}_attention_mask"] = _padded(rows_of_side, pad_id, multiple)
    if examples.labels is not None:
        batch["labels"] = torch.from_numpy(examples.labels[np.asarray(indices, dtype=np.int64)])
    return batch


def _chunk_starts(column: pa.ChunkedArray) -> np.ndarray:
    return np.cumsum([0] + [len(chunk) for chunk in column.chunks])


def _take(column: pa.ChunkedArray, starts: np.ndarray, rows: np.ndarray) -> pa.Array:
    """`column[rows]`, in that order, reading only the chunks the rows are in."""
    chunk_of = np.searchsorted(starts, rows, side="right") - 1
    parts = [column.chunk(int(chunk)).take(pa.array(rows[chunk_of == chunk] - starts[chunk]))
             for chunk in np.unique(chunk_of)]
    by_chunk = np.argsort(chunk_of, kind="stable")  # the order the parts hold the rows in
    position = np.empty_like(by_chunk)
    position[by_chunk] = np.arange(len(rows))
    return pa.concat_arrays(parts).take(pa.array(position))


def _padded(rows: pa.Array, pad_id: int, multiple: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad the rows' token ids to the longest rounded up to `multiple` (dynamic padding), without a Python
    loop over rows."""
    lengths = pc.list_value_length(rows).to_numpy()
    values = pc.list_flatten(rows).to_numpy().astype(np.int64)
    width = -(-int(lengths.max()) // multiple) * multiple
    mask = np.arange(width) < lengths[:, None]  # row-major, like the flattened values
    input_ids = np.full(mask.shape, pad_id, dtype=np.int64)
    input_ids[mask] = values
    return torch.from_numpy(input_ids), torch.from_numpy(mask.astype(np.int64))


def plan_neighbour_epoch(neighbours: np.ndarray, global_batch: int, seed: int, epoch: int) -> np.ndarray:
    """The epoch's global batches when the teacher composes them: half of each batch random anchors, each followed
    by a partner: one of its `k` nearest neighbours under the teacher (row i of `neighbours`, drawn at random). A
    batch thus holds pairs the teacher ranks close beside unrelated ones. Anchor, partner, anchor, partner…: a
    process's contiguous shard (an even number of rows) keeps its pairs whole. As many batches as plan_epoch
    (examples // global_batch), so an epoch is as long as with random batches; its anchors are that many × half the
    batch of the examples, drawn anew each epoch. A pure function of (seed, epoch, neighbours): resume rebuilds it."""
    if global_batch % 2:
        raise DataError(f"batch_size: {global_batch} is odd; neighbour batches pair each anchor with a neighbour")
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(len(neighbours), generator=generator).numpy()
    count, half = len(neighbours) // global_batch, global_batch // 2
    anchors = order[:count * half].reshape(count, half)
    picks = torch.randint(0, neighbours.shape[1], (count, half), generator=generator).numpy()
    partners = neighbours[anchors, picks]
    return np.stack([anchors, partners], axis=2).reshape(count, global_batch).astype(np.int64)


EXACT_NEIGHBOURS = 65_536  # rows up to which every row is compared with every other (65k × 768 × 4 B = 200 MB)
NEIGHBOUR_BLOCK = 512  # query rows compared at a time: a block × rows matrix of cosines (512 × 65k × 4 B = 128 MB)
WINDOW = 4_096  # above EXACT_NEIGHBOURS: rows compared within windows of this many along the hash order
HASH_BLOCK = 8_192  # rows hashed at a time (8192 × 768 × 4 B = 25 MB: the memory the hashing pass adds)


def teacher_neighbours(table: object, k: int, seed: int = 0) -> np.ndarray:
    """(rows, k) int32: each row's k most similar other rows (cosine) of the table (a RowFile or a float matrix);
    int32 because the array lives as long as the run (1M rows × 8: 32 MB, not 64).

    Up to EXACT_NEIGHBOURS rows: exact, a block of rows against all at a time. Above: approximate and linear in
    the rows: rows are ordered by a 16-bit random-hyperplane hash (SimHash: rows with similar directions tend to
    share their leading bits), then each window of WINDOW consecutive rows is searched exactly — neighbours far
    apart in that order are missed, which only makes a few pairs less close than they could be."""
    rows = len(table)  # type: ignore[arg-type]
    k = min(k, rows - 1)
    if k < 1:
        raise DataError("neighbour batches need at least 2 training examples")
    if rows <= EXACT_NEIGHBOURS:
        return _nearest(_unit_rows(_read(table, np.arange(rows))), np.arange(rows), k)
    order = _hash_order(table, rows, seed)
    neighbours = np.empty((rows, k), dtype=np.int32)
    for start in range(0, rows, WINDOW):
        window = order[start:start + WINDOW] if rows - start >= 2 * k + 1 else order[-WINDOW:]
        found = _nearest(_unit_rows(_read(table, window)), window, k)
        neighbours[window] = found
    return neighbours


def _read(table: object, rows: np.ndarray) -> np.ndarray:
    """Rows of a matrix in memory (a test's) or of a RowFile (read from disk)."""
    if isinstance(table, np.ndarray | torch.Tensor):
        return np.asarray(table)[rows]
    return table.take(rows)  # type: ignore[attr-defined]


def _unit_rows(vectors: np.ndarray) -> torch.Tensor:
    """`_read`'s rows (a new array of its own) at unit length, normalised in place: no second copy of a 65k-row
    block (converted first if they are not float32)."""
    unit = np.asarray(vectors, dtype=np.float32)
    unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)  # normalize()'s epsilon
    return torch.from_numpy(unit)


def _nearest(unit: torch.Tensor, ids: np.ndarray, k: int) -> np.ndarray:
    """For each row of `unit`, the ids of its k most similar other rows among them."""
    k = min(k, len(unit) - 1)
    found = np.empty((len(unit), k), dtype=np.int32)
    for start in range(0, len(unit), NEIGHBOUR_BLOCK):
        cosines = unit[start:start + NEIGHBOUR_BLOCK] @ unit.T
        own = torch.arange(start, start + len(cosines))
        cosines[torch.arange(len(cosines)), own] = -2.0  # never its own neighbour
        found[start:start + len(cosines)] = ids[cosines.topk(k, dim=1).indices.numpy()]
    return found


def _hash_order(table: object, rows: int, seed: int, bits: int = 16) -> np.ndarray:
    """Rows sorted by the signs of `bits` random projections, read a block at a time. The projection runs in torch,
    as training does: numpy's own BLAS would allocate its work buffers (tens of MB) for this one product."""
    planes = None
    codes = np.empty(rows, dtype=np.int64)
    weights = torch.from_numpy(1 << np.arange(bits - 1, -1, -1, dtype=np.int64))
    for start in range(0, rows, HASH_BLOCK):
        block = torch.from_numpy(_read(table, np.arange(start, min(start + HASH_BLOCK, rows))))
        if planes is None:
            generator = np.random.default_rng(seed)
            planes = torch.from_numpy(generator.standard_normal((block.shape[1], bits)).astype(np.float32))
        codes[start:start + len(block)] = ((block @ planes) > 0).long() @ weights
    return np.argsort(codes, kind="stable")
