"""A CPU training pass packed (sentadapt/model/packed_pass.py, issue 84): one backbone pass of the real tokens,
attention in length chunks, gives the padded pass's vectors and gradients — views, span-cutoff holes and shuffled
positions included — and only where the backbone can be packed."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from sentadapt.model import packed_pass
from sentadapt.model.encoder import Encoder
from sentadapt.model.packed_pass import PACKED_ATTENTION, PackedRows, can_pack, packed_attention
from sentadapt.recipes.augment import make_view, stack_views
from tests.test_length_chunks import SENTENCES


def _pass(encoder: Encoder, whole_batch: bool, cutoff: str, opaque: bool = False,
          ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Two stacked views (shuffle, `cutoff`) of the sentences, dropout off, fixed seeds: vectors and gradients."""
    batch = encoder.collate(encoder.tokenize_ids(SENTENCES))
    generator = torch.Generator().manual_seed(7)
    view = stack_views(make_view("shuffle", batch.input_ids, batch.attention_mask, 0.0, generator),
                       make_view(cutoff, batch.input_ids, batch.attention_mask, 0.3, generator))
    transform = view.embedding_transform
    if opaque and view.embedding_transform is not None:
        sliceable = view.embedding_transform

        def transform(embeddings: torch.Tensor) -> torch.Tensor:  # cannot be sliced: placed in the batch
            return sliceable(embeddings)
    encoder.zero_grad()
    with encoder.dropout(False):
        vectors = encoder(view.input_ids, view.attention_mask, position_ids=view.position_ids,
                          embedding_transform=transform, whole_batch=whole_batch)
    (vectors * torch.linspace(-1, 1, vectors.numel()).view_as(vectors)).sum().backward()
    return vectors.detach(), [p.grad.clone() for p in encoder.parameters() if p.grad is not None]


@pytest.mark.parametrize(("cutoff", "opaque"), [("token-cutoff", False), ("feature-cutoff", False),
                                               ("span-cutoff", False), ("token-cutoff", True)])
def test_a_packed_pass_gives_the_whole_batch_vectors_and_gradients_in_one_backbone_pass(
        tiny_encoder: Encoder, cutoff: str, opaque: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny_encoder.train()
    whole, whole_grads = _pass(tiny_encoder, whole_batch=True, cutoff=cutoff)
    passes: list[tuple[int, ...]] = []
    attention_chunks: list[int] = []
    tiny_encoder.backbone.register_forward_pre_hook(lambda _module, args, kwargs: passes.append(
        tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    monkeypatch.setattr(packed_pass, "scaled_dot_product_attention", lambda *args, **kwargs: attention_chunks.append(
        args[0].shape[0]) or torch.nn.functional.scaled_dot_product_attention(*args, **kwargs))
    tiny_encoder.cost_passes_at(8)

    packed, packed_grads = _pass(tiny_encoder, whole_batch=False, cutoff=cutoff, opaque=opaque)

    batch = tiny_encoder.collate(tiny_encoder.tokenize_ids(SENTENCES))
    real = int(batch.attention_mask.sum()) * 2  # two views of each sentence, every real token once
    ((rows, tokens),) = passes  # one backbone pass, of one packed sequence
    assert rows == 1 and (tokens < real if cutoff == "span-cutoff" else tokens == real)  # a span cut at a row's end
    layers = tiny_encoder.num_layers
    assert len(attention_chunks) % layers == 0 and len(attention_chunks) // layers > 1
    assert sum(attention_chunks[: len(attention_chunks) // layers]) == 2 * len(SENTENCES)
    torch.testing.assert_close(packed, whole, rtol=1e-5, atol=1e-5)
    assert len(packed_grads) == len(whole_grads)
    for packed_grad, whole_grad in zip(packed_grads, whole_grads, strict=True):
        torch.testing.assert_close(packed_grad, whole_grad, rtol=1e-4, atol=1e-5)
    assert tiny_encoder.backbone.config._attn_implementation != PACKED_ATTENTION  # switched back after the pass


def test_packed_rows_keep_every_token_up_to_the_last_attended_and_mask_the_holes() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 1, 1, 1, 1]])  # row 1: a span cutoff's hole
    rows = PackedRows.plan(mask, [(torch.tensor([0, 1]), 4), (torch.tensor([2]), 5)])
    assert rows.kept.sum(1).tolist() == [3, 4, 5]
    (index, inside, keys), (last_index, _, last_keys) = rows.chunks
    assert index.tolist() == [[0, 1, 2, 0], [3, 4, 5, 6]] and last_index.tolist() == [[7, 8, 9, 10, 11]]
    assert inside.tolist() == [[True, True, True, False], [True] * 4]
    assert keys.tolist() == [[True, True, True, False], [True, False, True, True]] and bool(last_keys.all())
    values = torch.arange(15.0).view(3, 5, 1)
    assert rows.pack(values)[0, :, 0].tolist() == [0, 1, 2, 5, 6, 7, 8, 10, 11, 12, 13, 14]
    assert torch.equal(rows.unpack(rows.pack(values)), values * rows.kept.unsqueeze(-1))


def test_only_a_plain_bert_without_recomputation_is_packed(tiny_encoder: Encoder) -> None:
    class Other(torch.nn.Module):
        config: Any = type("Config", (), {"model_type": "roberta"})()
        _supports_attention_backend = True

    assert can_pack(tiny_encoder.backbone) and not can_pack(Other())
    tiny_encoder.enable_gradient_checkpointing()
    assert not can_pack(tiny_encoder.backbone)


REFUSED = r"^sentadapt_packed attention called outside a packed pass without dropout$"


def test_the_packed_attention_refuses_a_pass_that_is_not_packed() -> None:
    query = torch.zeros(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match=REFUSED):
        packed_attention(torch.nn.Module(), query, query, query, None)
    rows = PackedRows.plan(torch.ones(1, 3, dtype=torch.long), [(torch.tensor([0]), 3)])
    with pytest.raises(RuntimeError, match=REFUSED):
        packed_attention(torch.nn.Module(), query, query, query, None, dropout=0.1, packed_rows=rows)
    assert packed_attention(torch.nn.Module(), query, query, query, None, packed_rows=rows)[0].shape == (1, 3, 2, 4)
