"""bench_packed_pass: its three ways of running a batch (one padded pass, the length chunks, the packed pass) give the
same vectors and gradients on a tiny BERT with rows of very different lengths, so its timings compare like with like."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.bench_packed_pass import load_model, modes
from tests.conftest import build_tiny_bert


def test_every_mode_gives_the_padded_pass_s_vectors_and_gradients(tmp_path: Path) -> None:
    model = load_model(build_tiny_bert(tmp_path / "tiny"))
    lengths = torch.tensor([3, 17, 5, 5, 40, 9, 2, 28])
    mask = (torch.arange(40)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, 150, (8, 40), generator=torch.Generator().manual_seed(0)) * mask
    results = {}
    for name, way in modes(model).items():
        model.zero_grad(set_to_none=True)
        vectors = way(ids, mask)
        vectors.pow(2).sum().backward()
        results[name] = (vectors.detach(), {key: parameter.grad.clone() for key, parameter in model.named_parameters()
                                            if parameter.grad is not None})
    assert len(results) == 5
    expected, expected_grads = results.pop("padded")
    for name, (vectors, grads) in results.items():
        torch.testing.assert_close(vectors, expected, rtol=1e-5, atol=1e-5, msg=name)
        assert grads.keys() == expected_grads.keys() and len(grads) > 20
        for key, grad in grads.items():
            torch.testing.assert_close(grad, expected_grads[key], rtol=1e-4, atol=1e-5, msg=f"{name}: {key}")
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("overhead", [0, 1000])
def test_a_packed_pass_runs_the_backbone_once(tmp_path: Path, overhead: int) -> None:
    from bench.bench_packed_pass import packed

    model = load_model(build_tiny_bert(tmp_path / "tiny"))
    calls: list[tuple[int, ...]] = []
    model.register_forward_pre_hook(lambda _module, _args, kwargs: calls.append(tuple(kwargs["input_ids"].shape)),
                                    with_kwargs=True)
    mask = (torch.arange(12)[None, :] < torch.tensor([2, 12, 7])[:, None]).long()
    packed(model, torch.full((3, 12), 9) * mask, mask, overhead)
    assert calls == [(1, 21)]
