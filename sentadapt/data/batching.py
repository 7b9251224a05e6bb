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

import torch

from sentadapt.encoder import pad_batch

GROUPING_WINDOW = 50  # batches per length-sorted window


@dataclass
class TokenizedExamples:
    """Pre-tokenized examples: `columns` of token-id lists (1 for sentences, 2 for pairs/NLI) + labels."""

    columns: list[list[list[int]]]
    labels: list[int] | None = None

    def __len__(self) -> int:
        return len(self.columns[0])

    def lengths(self) -> list[int]:
        return [max(len(column[i]) for column in self.columns) for i in range(len(self))]

    def collate(self, indices: list[int], pad_id: int) -> dict[str, torch.Tensor]:
        return collate(self, indices, pad_id)


@dataclass
class RowPairs:
    """Positive pairs as rows of a precomputed embedding matrix (recipes on a frozen encoder, e.g. CLSR)."""

    a_rows: list[int]
    b_rows: list[int]

    def __len__(self) -> int:
        return len(self.a_rows)

    def lengths(self) -> list[int]:
        return [1] * len(self)  # nothing to pad

    def collate(self, indices: list[int], pad_id: int) -> dict[str, torch.Tensor]:
        return {"a_rows": torch.tensor([self.a_rows[i] for i in indices], dtype=torch.long),
                "b_rows": torch.tensor([self.b_rows[i] for i in indices], dtype=torch.long)}


def plan_epoch(
    lengths: Sequence[int], global_batch: int, seed: int, epoch: int, group_by_length: bool
) -> list[list[int]]:
    """The epoch's global batches as index lists (drop_last); identical for every process."""
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(len(lengths), generator=generator).tolist()
    usable = len(order) - len(order) % global_batch
    order = order[:usable]
    if group_by_length:
        window = global_batch * GROUPING_WINDOW
        order = [i for start in range(0, usable, window)
                 for i in sorted(order[start:start + window], key=lambda i: -lengths[i])]
    batches = [order[start:start + global_batch] for start in range(0, usable, global_batch)]
    if group_by_length:
        shuffled = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in shuffled]
    return batches


def shard(batch: list[int], rank: int, world_size: int) -> list[int]:
    """This process's contiguous slice of a global batch (rank order = gather order)."""
    size = len(batch) // world_size
    return batch[rank * size:(rank + 1) * size]


def collate(examples: TokenizedExamples, indices: list[int], pad_id: int) -> dict[str, torch.Tensor]:
    """Dynamic padding per column: sentences → input_ids/attention_mask; pairs → a_* and b_* (+ labels)."""
    if len(examples.columns) == 1:
        padded = pad_batch([examples.columns[0][i] for i in indices], pad_id)
        return {"input_ids": padded.input_ids, "attention_mask": padded.attention_mask}
    batch: dict[str, torch.Tensor] = {}
    for side, column in zip("ab", examples.columns):
        padded = pad_batch([column[i] for i in indices], pad_id)
        batch[f"{side}_input_ids"] = padded.input_ids
        batch[f"{side}_attention_mask"] = padded.attention_mask
    if examples.labels is not None:
        batch["labels"] = torch.tensor([examples.labels[i] for i in indices], dtype=torch.long)
    return batch
