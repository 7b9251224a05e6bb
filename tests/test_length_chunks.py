"""A CPU training pass in chunks of similar length (sentadapt/model/length_chunks.py, issue 70): the plan is the
cheapest cut, and a chunked pass gives the whole batch's vectors and gradients, views and their random draws
included."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from sentadapt.model import encoder as encoder_module
from sentadapt.model.encoder import Encoder
from sentadapt.model.length_chunks import plan_chunks, real_lengths
from sentadapt.recipes.augment import make_view, stack_views

SENTENCES = ["the server is down", "a man plays guitar while the woman cooks food in the kitchen", "dns timeout",
             "the backup job failed on the cluster again last night", "login failed", "a big red car",
             "the dog runs", "the database backup failed and the cluster has a dns error on every node", "ok",
             "a woman cooks", "the red car is big", "user login failed because the password is new"]


def _cost(chunks: list[np.ndarray], lengths: np.ndarray, overhead: int) -> int:
    return sum(len(rows) * int(lengths[rows].max()) + overhead for rows in chunks)


def _cheapest_by_enumeration(lengths: np.ndarray, overhead: int) -> int:
    """Every cut of the length-sorted rows into consecutive chunks: the least cost."""
    ordered = np.sort(lengths)
    best = None
    for cuts in itertools.product((False, True), repeat=len(ordered) - 1):
        bounds = [0, *(i + 1 for i, cut in enumerate(cuts) if cut), len(ordered)]
        cost = sum((high - low) * int(ordered[high - 1]) + overhead for low, high in itertools.pairwise(bounds))
        best = cost if best is None else min(best, cost)
    assert best is not None
    return best


@pytest.mark.parametrize("overhead", [0, 5, 40, 1000])
def test_plan_is_the_cheapest_cut_and_covers_every_row_once(overhead: int) -> None:
    lengths = np.random.default_rng(overhead).integers(1, 60, size=11)
    chunks = plan_chunks(lengths, overhead)
    assert sorted(np.concatenate(chunks).tolist()) == list(range(11))
    assert _cost(chunks, lengths, overhead) == _cheapest_by_enumeration(lengths, overhead)


def test_plan_keeps_one_chunk_when_padding_costs_less_than_a_pass() -> None:
    lengths = np.array([10, 12, 11, 9])
    assert len(plan_chunks(lengths, overhead=100)) == 1  # 4 × 12 = 48 tokens, 7 of them padding: not worth a pass
    assert [len(rows) for rows in plan_chunks(np.array([3] * 40 + [60] * 2), overhead=100)] == [40, 2]


def test_real_lengths_end_at_the_last_attended_token() -> None:
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 1, 1, 1, 1]])  # a span cutoff's hole in row 2
    assert real_lengths(mask).tolist() == [3, 4, 5]


def _views_pass(encoder: Encoder, whole_batch: bool, cutoff: str, opaque: bool = False,
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """ConSERT's two stacked views (shuffle, a cutoff) of the sentences, dropout off, on fixed seeds; `opaque`:
    their transform wrapped in a function that cannot be sliced (the chunks then place it in the whole batch)."""
    batch = encoder.collate(encoder.tokenize_ids(SENTENCES))
    generator = torch.Generator().manual_seed(7)
    first = make_view("shuffle", batch.input_ids, batch.attention_mask, 0.0, generator)
    second = make_view(cutoff, batch.input_ids, batch.attention_mask, 0.2, generator)
    view = stack_views(first, second)
    transform = view.embedding_transform
    assert transform is not None
    encoder.zero_grad()
    with encoder.dropout(False):
        vectors = encoder(view.input_ids, view.attention_mask, position_ids=view.position_ids,
                          embedding_transform=(lambda e: transform(e)) if opaque else transform,
                          whole_batch=whole_batch)
    (vectors * torch.linspace(-1, 1, vectors.numel()).view_as(vectors)).sum().backward()
    return vectors.detach(), [p.grad.clone() for p in encoder.parameters() if p.grad is not None]


@pytest.mark.parametrize(("cutoff", "opaque"), [("token-cutoff", False), ("feature-cutoff", False),
                                               ("token-cutoff", True)])
def test_a_chunked_pass_gives_the_whole_batch_vectors_and_gradients(tiny_encoder: Encoder, cutoff: str, opaque: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder_module, "can_pack", lambda backbone: False)  # a backbone packed_pass cannot pack
    tiny_encoder.train()
    calls: list[int] = []
    pooled = tiny_encoder._pooled
    monkeypatch.setattr(tiny_encoder, "_pooled",
                        lambda *args: calls.append(args[0].input_ids.shape[1]) or pooled(*args))
    whole, whole_grads = _views_pass(tiny_encoder, whole_batch=True, cutoff=cutoff)
    assert len(calls) == 1
    tiny_encoder.cost_passes_at(8)
    chunked, chunked_grads = _views_pass(tiny_encoder, whole_batch=False, cutoff=cutoff, opaque=opaque)
    assert len(calls) > 2 and max(calls[1:]) == calls[0] and min(calls[1:]) < calls[0] / 3  # trimmed chunks
    # float32 sums in other orders (other matmul shapes): agreement to a few ulps of the values' scale
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-5)
    assert len(chunked_grads) == len(whole_grads)
    for chunk_grad, whole_grad in zip(chunked_grads, whole_grads, strict=True):
        torch.testing.assert_close(chunk_grad, whole_grad, rtol=1e-4, atol=1e-5)


def test_passes_with_the_model_dropout_without_gradient_or_on_request_run_whole(tiny_encoder: Encoder,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder_module, "can_pack", lambda backbone: False)
    tiny_encoder.train()
    widths: list[int] = []
    pooled = tiny_encoder._pooled
    monkeypatch.setattr(tiny_encoder, "_pooled",
                        lambda *args: widths.append(args[0].input_ids.shape[1]) or pooled(*args))
    tiny_encoder.cost_passes_at(0)
    batch = tiny_encoder.collate(tiny_encoder.tokenize_ids(SENTENCES))
    with tiny_encoder.dropout(True):  # the model's dropout draws masks over the batch's shape: never chunked
        tiny_encoder(batch.input_ids, batch.attention_mask)
    with tiny_encoder.dropout(False):
        tiny_encoder(batch.input_ids, batch.attention_mask, whole_batch=True)
        with torch.no_grad():  # encode and frozen passes: no gradient, batches sorted by length already
            tiny_encoder(batch.input_ids, batch.attention_mask)
    assert widths == [batch.input_ids.shape[1]] * 3
    with tiny_encoder.dropout(False):
        tiny_encoder(batch.input_ids, batch.attention_mask)
    assert len(widths) > 4
