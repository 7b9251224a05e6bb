from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from sentadapt.errors import ConfigError
from sentadapt.recipes.augment import (
    AUGMENTATIONS,
    ViewInputs,
    element_dropout,
    feature_cutoff,
    make_view,
    shuffle_position_ids,
    span_cutoff,
    token_cutoff,
)

# right-padded batch; the last row is all padding (never produced by a tokenizer, must not crash)
LENGTHS = [10, 7, 3, 1, 12, 0]
SEQ, HIDDEN = 12, 16


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def right_padded_mask(lengths: list[int], seq: int = SEQ) -> torch.Tensor:
    return (torch.arange(seq).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()


MASK = right_padded_mask(LENGTHS)
IDS = torch.randint(5, 99, (len(LENGTHS), SEQ), generator=gen(1)) * MASK
# Gaussian entries are never exactly 0, so a 0 in an output marks an augmented element
EMB = torch.randn(len(LENGTHS), SEQ, HIDDEN, generator=gen(2))


def zero_rows(out: torch.Tensor) -> torch.Tensor:
    return (out == 0).all(dim=-1)


# ---------------------------------------------------------------------- shuffle


def test_shuffle_permutes_real_positions_and_keeps_padding() -> None:
    positions = shuffle_position_ids(MASK, gen(0))
    assert positions.shape == (len(LENGTHS), SEQ) and positions.dtype == torch.long
    for row, n in enumerate(LENGTHS):
        assert sorted(positions[row, :n].tolist()) == list(range(n))
        assert positions[row, n:].tolist() == list(range(n, SEQ))
    assert positions[0, :10].tolist() != list(range(10)), "a 10-token row should actually be shuffled"


def test_shuffle_offset_shifts_every_position() -> None:
    assert torch.equal(shuffle_position_ids(MASK, gen(3), offset=2), shuffle_position_ids(MASK, gen(3)) + 2)


def test_shuffle_draws_every_permutation_uniformly() -> None:
    # 6000 rows of 3 real tokens + 1 pad: each of the 3! orders should come up ~1000 times
    positions = shuffle_position_ids(right_padded_mask([3] * 6000, seq=4), gen(4))
    assert (positions[:, 3] == 3).all()
    orders, counts = positions[:, :3].unique(dim=0, return_counts=True)
    assert len(orders) == 6
    assert counts.min() > 850 and counts.max() < 1150


def test_shuffle_view_keeps_token_ids() -> None:
    view = make_view("shuffle", IDS, MASK, 0.0, gen(0))
    assert view.input_ids is IDS and view.attention_mask is MASK
    assert torch.equal(view.position_ids, shuffle_position_ids(MASK, gen(0)))


# ---------------------------------------------------------------------- token cutoff


def test_token_cutoff_zeroes_exactly_floor_n_rate_real_rows() -> None:
    out = token_cutoff(EMB, MASK, 0.3, gen(0))
    cut = zero_rows(out)
    assert cut.sum(dim=1).tolist() == [3, 2, 0, 0, 3, 0]  # int(n * 0.3)
    assert not (cut & ~MASK.bool()).any(), "a padding row was cut"
    assert torch.equal(out[~cut], EMB[~cut]), "rows that were not cut must be bit-identical"
    assert not (out[cut] != 0).any()


def test_token_cutoff_count_matches_python_int_not_float32() -> None:
    # 100 * 0.29 = 28.999999999999996 in float64 (the official code's int() gives 28) but 29.0 in float32
    mask = right_padded_mask([100], seq=100)
    out = token_cutoff(torch.randn(1, 100, 4, generator=gen(5)), mask, 0.29, gen(0))
    assert zero_rows(out).sum().item() == 28


def test_token_cutoff_picks_rows_uniformly() -> None:
    # 4000 rows of 4 real tokens + 2 pads at rate 0.5: 2 cuts per row, each position cut with p = 1/2
    mask = right_padded_mask([4] * 4000, seq=6)
    cut = zero_rows(token_cutoff(torch.ones(4000, 6, 2), mask, 0.5, gen(6)))
    assert cut.sum(dim=1).eq(2).all()
    frequency = cut.float().mean(dim=0)
    assert frequency[4:].tolist() == [0.0, 0.0]
    assert ((frequency[:4] - 0.5).abs() < 0.03).all()


def test_token_cutoff_keeps_gradient_to_uncut_rows() -> None:
    emb = EMB.clone().requires_grad_(True)
    out = token_cutoff(emb, MASK, 0.3, gen(0))
    out.sum().backward()
    assert torch.equal(emb.grad[:, :, 0] == 0, zero_rows(out))


# ---------------------------------------------------------------------- feature cutoff


def test_feature_cutoff_zeroes_floor_h_rate_columns_at_real_tokens_only() -> None:
    out = feature_cutoff(EMB, MASK, 0.2, gen(0))  # int(16 * 0.2) = 3 columns
    chosen = []
    for row, n in enumerate(LENGTHS):
        assert torch.equal(out[row, n:], EMB[row, n:]), "padding positions must be untouched"
        if n == 0:
            continue
        zero = out[row, :n] == 0
        columns = zero.all(dim=0)
        assert columns.sum().item() == 3
        assert torch.equal(zero.any(dim=0), columns), "a column must be zeroed at every real token or none"
        assert torch.equal(out[row, :n][:, ~columns], EMB[row, :n][:, ~columns])
        chosen.append(tuple(columns.nonzero().flatten().tolist()))
    assert len(set(chosen)) > 1, "columns must be drawn independently per example"


# ---------------------------------------------------------------------- element dropout


def test_element_dropout_has_no_rescaling_and_spares_padding() -> None:
    mask = right_padded_mask([20, 15, 8, 20] * 2, seq=20)
    emb = torch.randn(8, 20, 64, generator=gen(7))
    out = element_dropout(emb, mask, 0.5, gen(0))
    real = mask.bool()
    assert torch.equal(out[~real], emb[~real])
    kept = out != 0
    assert torch.equal(out[kept], emb[kept]), "kept elements must not be rescaled by 1/(1-p)"
    dropped_fraction = (~kept[real]).float().mean().item()
    assert abs(dropped_fraction - 0.5) < 0.03


def test_element_dropout_rate_zero_is_identity() -> None:
    assert torch.equal(element_dropout(EMB, MASK, 0.0, gen(0)), EMB)


# ---------------------------------------------------------------------- span cutoff


def test_span_cutoff_keeps_one_contiguous_span_of_the_right_length() -> None:
    out = span_cutoff(MASK, 0.3, gen(0))
    assert out.dtype == MASK.dtype and out.shape == MASK.shape
    expected = [7, 4, 2, 1, 8, 0]  # max(int(n * 0.7), 1); 0 for the all-padding row
    for row, n in enumerate(LENGTHS):
        kept = out[row].nonzero().flatten().tolist()
        assert len(kept) == expected[row]
        start = kept[0] if kept else 0
        assert kept == list(range(start, start + len(kept))), "the kept tokens must be contiguous"
        assert all(index < n for index in kept), "the span must lie inside the real tokens"


def test_span_cutoff_start_is_uniform() -> None:
    # 3000 rows of 4 real tokens at rate 0.5 keep 2 tokens: starts 0, 1, 2 each ~1000 times
    out = span_cutoff(right_padded_mask([4] * 3000, seq=5), 0.5, gen(8))
    assert out.sum(dim=1).eq(2).all()
    starts = out.argmax(dim=1)
    counts = torch.bincount(starts, minlength=4).tolist()
    assert counts[3] == 0 and min(counts[:3]) > 880 and max(counts[:3]) < 1120


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5, math.nan])
def test_rates_outside_zero_one_are_refused(rate: float) -> None:
    expected = f"augmentation rate must be in [0, 1), got {rate}"
    calls = [
        lambda: token_cutoff(EMB, MASK, rate),
        lambda: feature_cutoff(EMB, MASK, rate),
        lambda: element_dropout(EMB, MASK, rate),
        lambda: span_cutoff(MASK, rate),
        lambda: make_view("none", IDS, MASK, rate),
    ]
    for call in calls:
        with pytest.raises(ConfigError) as error:
            call()
        assert str(error.value) == expected


def test_unknown_augmentation_suggests_the_closest_name() -> None:
    with pytest.raises(ConfigError) as error:
        make_view("shufle", IDS, MASK, 0.1)
    assert str(error.value) == (
        "Unknown augmentation 'shufle'. Did you mean: shuffle? Available: dropout, encoder-dropout, "
        "feature-cutoff, none, shuffle, span-cutoff, token-cutoff"
    )


# ---------------------------------------------------------------------- make_view


def test_augmentation_names() -> None:
    assert AUGMENTATIONS == (
        "none", "shuffle", "token-cutoff", "feature-cutoff", "dropout", "span-cutoff", "encoder-dropout",
    )


@pytest.mark.parametrize("name", ["none", "encoder-dropout"])
def test_views_that_leave_inputs_unchanged(name: str) -> None:
    view = make_view(name, IDS, MASK, 0.2, gen(0))
    assert view == ViewInputs(IDS, MASK, None, None, model_dropout=name == "encoder-dropout")


@pytest.mark.parametrize(
    ("name", "function"),
    [("token-cutoff", token_cutoff), ("feature-cutoff", feature_cutoff), ("dropout", element_dropout)],
)
def test_embedding_views_apply_their_augmentation(name: str, function: Callable[..., torch.Tensor]) -> None:
    view = make_view(name, IDS, MASK, 0.3, gen(9))
    assert view.input_ids is IDS and view.attention_mask is MASK
    assert view.position_ids is None and view.model_dropout is False
    out = view.embedding_transform(EMB)
    assert torch.equal(out, function(EMB, MASK, 0.3, gen(9)))
    assert not torch.equal(out, EMB)
    # the mask is drawn once: a second forward through the same view sees the same corruption
    assert torch.equal(view.embedding_transform(EMB), out)


def test_span_view_only_changes_the_attention_mask() -> None:
    view = make_view("span-cutoff", IDS, MASK, 0.3, gen(9))
    assert view.input_ids is IDS and view.position_ids is None and view.embedding_transform is None
    assert view.model_dropout is False
    assert torch.equal(view.attention_mask, span_cutoff(MASK, 0.3, gen(9)))


@pytest.mark.parametrize("name", AUGMENTATIONS)
def test_same_seed_gives_the_same_view(name: str) -> None:
    def materialise(view: ViewInputs) -> list[torch.Tensor | None]:
        out = view.embedding_transform(EMB) if view.embedding_transform else None
        return [view.input_ids, view.attention_mask, view.position_ids, out]

    first = materialise(make_view(name, IDS, MASK, 0.3, gen(11)))
    second = materialise(make_view(name, IDS, MASK, 0.3, gen(11)))
    for a, b in zip(first, second):
        assert (a is None and b is None) or torch.equal(a, b)
    if name not in ("none", "encoder-dropout"):
        other = materialise(make_view(name, IDS, MASK, 0.3, gen(12)))
        assert any(a is not None and not torch.equal(a, b) for a, b in zip(first, other))


# ---------------------------------------------------------------------- through a real BERT


def test_token_cutoff_view_through_bert_changes_only_rows_with_cuts() -> None:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37)
    model = BertModel(config, add_pooling_layer=False).eval()
    lengths = [10, 3, 7, 2]  # at rate 0.3: 3, 0, 2, 0 tokens cut
    mask = right_padded_mask(lengths)
    ids = torch.randint(5, 99, (len(lengths), SEQ), generator=gen(1)) * mask
    view = make_view("token-cutoff", ids, mask, 0.3, gen(0))
    seen: list[torch.Tensor] = []

    def hook(_module: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        out = view.embedding_transform(output)
        seen.append(out)
        return out

    with torch.no_grad():
        plain = model(input_ids=ids, attention_mask=mask).last_hidden_state
        handle = model.embeddings.register_forward_hook(hook)
        try:
            augmented = model(input_ids=view.input_ids, attention_mask=view.attention_mask).last_hidden_state
        finally:
            handle.remove()
    assert zero_rows(seen[0]).sum(dim=1).tolist() == [3, 0, 2, 0]
    changed = (augmented - plain).abs().amax(dim=(1, 2)) > 1e-4
    assert changed.tolist() == [True, False, True, False]
    assert torch.allclose(augmented[~changed], plain[~changed], atol=1e-6)
