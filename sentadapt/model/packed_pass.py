"""A CPU training pass *packed*: every row's tokens in one sequence, so the linear layers, LayerNorms and GELUs compute
no padding, in one pass whatever the rows' lengths; only attention takes the rows apart, in length chunks.

The length chunks (length_chunks.py) cut padding by running the backbone once per chunk, and a CPU pays for each more
pass (its cost is timed per CPU: train/pass_costs.py). Packed, the backbone runs once: attention, the one operation
that needs rows apart, runs per chunk inside it (each chunk padded to its own longest row, its keys masked as the
batch's attention mask says), through `packed_attention`, registered with transformers' AttentionInterface (its
extension point for attention kernels: nothing patched) and switched on for the one pass. Position ids restart at
each row (a shuffled view's are the view's), so the vectors are the padded pass's up to float reassociation
(tests/test_packed_pass.py). Measured first in bench/bench_packed_pass.py (bench/README.md, issue 84).

Only architectures whose positions are plain `arange` ids and whose attention goes through the interface are packed
(PACKABLE); any other runs in length chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.functional import scaled_dot_product_attention

from sentadapt.model.length_chunks import chunk_transform, last_attended

PACKED_ATTENTION = "sentadapt_packed"
PACKABLE = ("bert",)  # model types checked against the padded pass (a RoBERTa's positions start after its pad id)


@dataclass(frozen=True)
class PackedRows:
    """Where a batch's tokens sit packed: `kept` (rows × length) marks every token up to each row's last attended one,
    in the packed order; per attention chunk, `index` (chunk rows × its longest row) holds each place's packed position
    (0 where the row is shorter), `inside` where it is not, and `keys` which places attention may read (the batch's
    mask: a span cutoff's holes are tokens no other token reads, as in the padded pass)."""

    kept: torch.Tensor
    chunks: tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], ...]

    @classmethod
    def plan(cls, attention_mask: torch.Tensor, chunks: list[tuple[torch.Tensor, int]]) -> PackedRows:
        places = torch.arange(attention_mask.shape[1])
        lengths = last_attended(attention_mask)
        kept = places[None, :] < lengths[:, None]
        starts = torch.cumsum(lengths, 0) - lengths
        planned = []
        for rows, width in chunks:
            inside = kept[rows, :width]
            index = torch.where(inside, starts[rows][:, None] + places[None, :width], 0)
            planned.append((index, inside, inside & attention_mask[rows, :width].ne(0)))
        return cls(kept, tuple(planned))

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """A (rows × length …) tensor's kept places, as one sequence (1 × tokens …)."""
        return tensor[self.kept].unsqueeze(0)

    def backbone_inputs(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None,
                        token_type_ids: torch.Tensor | None = None) -> dict[str, Any]:
        """The backbone's keywords for the packed pass of a padded batch: its ids, positions (each row's own, `arange`
        where none are given) and token types (0 where none are given) packed, and these rows for the attention."""
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1]).expand_as(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        return {"input_ids": self.pack(input_ids), "position_ids": self.pack(position_ids),
                "token_type_ids": self.pack(token_type_ids), "packed_rows": self}

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """The packed sequence's vectors back in their rows (rows × length × width), zero where nothing was kept."""
        return packed.new_zeros((*self.kept.shape, packed.shape[-1])).index_put((self.kept,), packed[0])


def packed_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                     packed_rows: PackedRows | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention over a packed sequence (1 × heads × tokens × head size, as transformers hands it over), chunk by
    chunk; returns 1 × tokens × heads × head size, as transformers' own attention functions do. No dropout: only
    passes without the model's dropout are packed (its masks would be drawn over other shapes)."""
    if packed_rows is None or dropout:
        raise RuntimeError(f"{PACKED_ATTENTION} attention called outside a packed pass without dropout")
    by_token = [tensor[0].transpose(0, 1) for tensor in (query, key, value)]  # tokens × heads × head size
    output = torch.empty_like(by_token[0])
    for index, inside, keys in packed_rows.chunks:
        chunk_query, chunk_key, chunk_value = (tensor[index].transpose(1, 2) for tensor in by_token)
        attended = scaled_dot_product_attention(chunk_query, chunk_key, chunk_value, attn_mask=keys[:, None, None, :],
                                                scale=scaling)
        output[index[inside]] = attended.transpose(1, 2)[inside]
    return output.unsqueeze(0), None


def can_pack(backbone: nn.Module) -> bool:
    """Whether this backbone's passes can be packed: PACKABLE, attention through transformers' interface (the flag
    transformers sets on such models), and no recomputation in backward (it would run the layers again once the
    packed attention is switched off)."""
    config = getattr(backbone, "config", None)
    return (getattr(config, "model_type", None) in PACKABLE
            and bool(getattr(backbone, "_supports_attention_backend", False)) and not _recomputes(backbone))


def _recomputes(backbone: nn.Module) -> bool:
    """transformers' activation (gradient) checkpointing on, by its 5.x name or the older one."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(backbone), name):
            return bool(getattr(backbone, name))
    return False


@contextmanager
def packed_attention_on(backbone: Any) -> Iterator[None]:
    """The backbone's attention is packed_attention for one forward, its own put back after (a backward without
    recomputation does not call attention again)."""
    from transformers import AttentionInterface

    AttentionInterface.register(PACKED_ATTENTION, packed_attention)
    before = backbone.config._attn_implementation
    backbone.set_attn_implementation(PACKED_ATTENTION)
    try:
        yield
    finally:
        backbone.set_attn_implementation(before)


def packed_transform(transform: Callable[[torch.Tensor], torch.Tensor], rows: PackedRows,
                     chunks: list[tuple[torch.Tensor, int]], batch_shape: tuple[int, int],
                     ) -> Callable[[torch.Tensor], torch.Tensor]:
    """A whole-batch embedding transform (a view's) for the packed embeddings: each attention chunk's places gathered
    into its own padded shape, transformed as the length chunks transform them (length_chunks.chunk_transform), and
    its rows' tokens put back in the packed sequence."""
    by_chunk = [chunk_transform(transform, chunk_rows, width, batch_shape) for chunk_rows, width in chunks]

    def transformed(embeddings: torch.Tensor) -> torch.Tensor:
        tokens = embeddings[0]
        output = torch.empty_like(tokens)
        for (index, inside, _), chunk in zip(rows.chunks, by_chunk, strict=True):
            output[index[inside]] = chunk(tokens[index])[inside]
        return output.unsqueeze(0)

    return transformed
