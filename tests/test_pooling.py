from __future__ import annotations

import pytest
import torch

from sentadapt.errors import ConfigError
from sentadapt.model.pooling import POOLING_NAMES, Pooling, pool_tokens

# two sentences, 3 positions, 2 features; the second sentence has one padding position
TOKENS = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, -6.0]], [[-1.0, 0.0], [7.0, 8.0], [100.0, 100.0]]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


def test_cls_takes_first_token() -> None:
    assert pool_tokens(TOKENS, MASK, "cls").tolist() == [[1.0, 2.0], [-1.0, 0.0]]


def test_mean_ignores_padding() -> None:
    assert pool_tokens(TOKENS, MASK, "mean").tolist() == [[3.0, 0.0], [3.0, 4.0]]


def test_max_ignores_padding() -> None:
    assert pool_tokens(TOKENS, MASK, "max").tolist() == [[5.0, 4.0], [7.0, 8.0]]


def test_lasttoken_takes_each_rows_last_real_token_whichever_side_is_padded() -> None:
    assert pool_tokens(TOKENS, MASK, "lasttoken").tolist() == [[5.0, -6.0], [7.0, 8.0]]
    left_padded = torch.tensor([[1, 1, 1], [0, 1, 1]])  # a decoder tokenizer's padding_side "left"
    assert pool_tokens(TOKENS, left_padded, "lasttoken").tolist() == [[5.0, -6.0], [100.0, 100.0]]
    # a prompt left out of pooling (include_prompt: false) leaves the last token where it is
    assert pool_tokens(TOKENS, MASK, "lasttoken", prompt_length=1).tolist() == [[5.0, -6.0], [7.0, 8.0]]


def test_layer_poolings_average_the_right_hidden_states() -> None:
    # hidden states 0..3 (embeddings + 3 layers); state k is filled with the value k
    hidden = tuple(torch.full((1, 2, 2), float(k)) for k in range(4))
    mask = torch.ones(1, 2, dtype=torch.long)
    last2 = Pooling.from_name("last2avg", num_layers=3)
    first_last = Pooling.from_name("firstlast", num_layers=3)
    assert last2(hidden[-1], mask, hidden).tolist() == [[2.5, 2.5]]  # (2 + 3) / 2
    assert first_last(hidden[-1], mask, hidden).tolist() == [[2.0, 2.0]]  # (1 + 3) / 2: layer 1, not embeddings


def test_layer_pooling_needs_hidden_states() -> None:
    with pytest.raises(ValueError, match="output_hidden_states"):
        Pooling.from_name("last2avg", 3)(TOKENS, MASK, None)


@pytest.mark.parametrize("name", POOLING_NAMES)
def test_names_round_trip(name: str) -> None:
    assert Pooling.from_name(name, 6).name(6) == name


def test_custom_layer_mix_is_named_descriptively() -> None:
    assert Pooling("mean", (2, 6), (1.0, 3.0)).name(6) == "mean(1*h2+3*h6)"


def test_equal_weights_in_other_scale_are_the_same_pooling() -> None:
    assert Pooling("mean", (5, 6), (2.0, 2.0)).name(6) == "last2avg"


def test_unknown_pooling_suggests_the_closest() -> None:
    with pytest.raises(ConfigError) as error:
        Pooling.from_name("maen", 6)
    assert str(error.value) == (
        "Unknown pooling 'maen'. Did you mean: mean, max? Available: cls, firstlast, last2avg, lasttoken, max, mean"
    )
