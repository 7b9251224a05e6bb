"""bench/peers.py: the sentence-transformers peers the suites and benchmarks train."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_two_tsdae_peer_runs_of_the_same_command_train_the_same_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    """bench.peers seeds before TSDAE's decoder is built: its cross-attention layers are initialised fresh, and drew
    from torch's unseeded generator, so the domain suite's TSDAE rows changed from one run to the next."""
    pytest.importorskip("sentence_transformers")
    from safetensors.torch import load_file

    from bench.peers import train_peer

    sentences = [f"sentence number {i} about the server and the network" for i in range(16)]
    weights = []
    for name in ("a", "b"):
        import torch

        torch.manual_seed(len(name) * 1000 + ord(name))  # different global state before each run
        out = tmp_path / name
        train_peer("tsdae", str(tiny_model_dir), sentences, steps=2, batch_size=4, max_length=16, lr=3e-5,
                   bf16=False, output=str(out), save=True)
        weights.append(load_file(next(out.rglob("model.safetensors"))))
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])
