"""bench_packed_pass: the packed pass (attention per length chunk through transformers' AttentionInterface) gives the
padded pass's vectors and gradients, on a tiny BERT with rows of very different lengths."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.bench_packed_pass import chunked, load_models, packed, padded
from tests.conftest import build_tiny_bert


@pytest.mark.parametrize("overhead", [0, 1000])  # a chunk per length, and one chunk of every row
def test_the_packed_pass_gives_the_padded_pass_s_vectors_and_gradients(tmp_path: Path, overhead: int) -> None:
    padded_model, packed_model = load_models(build_tiny_bert(tmp_path / "tiny"))
    lengths = torch.tensor([3, 17, 5, 5, 40, 9, 2, 28])
    mask = (torch.arange(40)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, 150, (8, 40), generator=torch.Generator().manual_seed(0)) * mask

    expected = padded(padded_model, ids, mask)
    expected.pow(2).sum().backward()
    got = packed(packed_model, ids, mask, overhead)
    got.pow(2).sum().backward()

    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(chunked(padded_model, ids, mask, overhead), expected.detach(), rtol=1e-5, atol=1e-5)
    grads = {name: parameter.grad for name, parameter in padded_model.named_parameters()}
    for name, parameter in packed_model.named_parameters():
        torch.testing.assert_close(parameter.grad, grads[name], rtol=1e-4, atol=1e-5, msg=name)
