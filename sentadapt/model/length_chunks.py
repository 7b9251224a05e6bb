"""A training forward on the CPU in chunks of similar length, each padded to its own longest row (issue 70).

A batch is padded to its longest sentence, and a CPU spends its time in proportion to the tokens it is handed, padding
included: on the teacher run's 3,000 short STS sentences (neighbour batches of 64) 57 % of the tokens an encoder pass
computed were padding (bench/README.md, "The teacher run on every CPU"). Sorting the batch's rows by length and
cutting them into a few chunks, each trimmed to its own longest row, computes the same rows with a fraction of the
padding; the rows are put back in the batch's order after pooling, so the loss sees the same batch: the same in-batch
negatives, the same vectors up to float reassociation. Only passes without the model's dropout are chunked (a pass
with it would draw its masks over other shapes: another random stream, not the same vectors).

On a GPU a step is bound by kernel launches, not by arithmetic (bench/README.md, H200): more, smaller passes would cost
time, so only CPU passes are chunked.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from sentadapt.options import PASS_OVERHEAD_TOKENS


def last_attended(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each row's length up to its last attended token (a span cutoff's mask has holes inside a row; padding is only
    ever on the right)."""
    positions = torch.arange(1, attention_mask.shape[1] + 1, device=attention_mask.device)
    return (attention_mask.ne(0) * positions).amax(dim=1)


def real_lengths(attention_mask: torch.Tensor) -> np.ndarray:
    """last_attended, on the host (for the plan)."""
    return last_attended(attention_mask).cpu().numpy()


def plan_chunks(lengths: np.ndarray, overhead: int = PASS_OVERHEAD_TOKENS) -> list[np.ndarray]:
    """Row indices of each chunk, shortest rows first, minimising Σ chunk rows × chunk's longest + overhead per chunk.

    The rows sorted by length, the best cut is a dynamic programme over the sorted order: best[j] (the first j rows)
    = min over i < j of best[i] + (j − i) · length[j − 1] + overhead — O(n²) for a batch of n rows, one vectorised
    line per j (n ≤ a few hundred)."""
    order = np.argsort(lengths, kind="stable")
    ordered = lengths[order].astype(np.int64)
    count = len(ordered)
    best = np.zeros(count + 1, dtype=np.int64)
    start = np.zeros(count + 1, dtype=np.int64)
    starts = np.arange(count)
    for stop in range(1, count + 1):
        costs = best[:stop] + (stop - starts[:stop]) * ordered[stop - 1] + overhead
        start[stop] = int(np.argmin(costs))
        best[stop] = costs[start[stop]]
    bounds = [count]
    while bounds[-1] > 0:
        bounds.append(int(start[bounds[-1]]))
    bounds.reverse()
    return [order[low:high] for low, high in itertools.pairwise(bounds)]


def chunk_transform(transform: Callable[[torch.Tensor], torch.Tensor], rows: torch.Tensor, width: int,
                    batch_shape: tuple[int, int]) -> Callable[[torch.Tensor], torch.Tensor]:
    """A whole-batch embedding transform for one chunk's rows: sliced where the transform says how
    (sliced_transform), else by PlacedInBatch's placing of the chunk in a tensor of the whole batch's shape."""
    sliced = sliced_transform(transform, rows, width)
    return sliced if sliced is not None else PlacedInBatch(transform, rows, batch_shape)


def sliced_transform(transform: Callable[[torch.Tensor], torch.Tensor], rows: torch.Tensor, width: int,
                     ) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The transform's own `for_rows(rows, width)` (ConSERT's view masks, two stacked views' split: the whole
    batch's mask sliced, no tensor of the whole batch built per chunk), or None when it has none."""
    for_rows = getattr(transform, "for_rows", None)
    return None if for_rows is None else for_rows(rows, width)


@dataclass
class PlacedInBatch:
    """A whole-batch embedding transform that cannot be sliced (ConSERT's adversarial perturbation, any plain
    function) applied to one chunk: the chunk's embeddings are placed in a zero tensor of the batch's shape, the
    transform runs on it, and the chunk's rows and columns are taken back. A mask drawn on the transform's first call
    is drawn for the whole batch, so the random numbers drawn are those of an unchunked pass."""

    transform: Callable[[torch.Tensor], torch.Tensor]
    rows: torch.Tensor
    batch_shape: tuple[int, int]

    def __call__(self, embeddings: torch.Tensor) -> torch.Tensor:
        width = embeddings.shape[1]
        whole = embeddings.new_zeros((*self.batch_shape, embeddings.shape[-1]))
        whole[self.rows, :width] = embeddings
        return self.transform(whole)[self.rows, :width]
