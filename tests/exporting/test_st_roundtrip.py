"""Folders sentadapt writes load in sentence-transformers itself and give the same vectors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sentadapt.model.encoder import DenseLayer, Encoder
from tests.conftest import TINY_SENTENCES

st = pytest.importorskip("sentence_transformers")


@pytest.mark.parametrize("pooling", ["cls", "mean", "max", "last2avg", "firstlast"])
def test_sentence_transformers_reproduces_our_vectors(
    tiny_model_dir_3layers: Path, tmp_path: Path, pooling: str
) -> None:
    encoder = Encoder.load(tiny_model_dir_3layers, pooling=pooling, device="cpu")
    encoder.save(tmp_path / "out")
    theirs = st.SentenceTransformer(str(tmp_path / "out"), device="cpu").encode(
        TINY_SENTENCES, convert_to_tensor=True
    )
    ours = encoder.encode(TINY_SENTENCES)
    assert torch.nn.functional.cosine_similarity(ours, theirs.cpu()).min() >= 0.9999


def test_sentence_transformers_reproduces_dense_head(tiny_model_dir: Path, tmp_path: Path) -> None:
    encoder = Encoder.load(tiny_model_dir, device="cpu")
    torch.manual_seed(5)
    encoder.head = torch.nn.ModuleList([DenseLayer(32, 64, "torch.nn.modules.activation.ReLU"), DenseLayer(64, 32)])
    encoder.save(tmp_path / "out")
    theirs = st.SentenceTransformer(str(tmp_path / "out"), device="cpu").encode(TINY_SENTENCES, convert_to_tensor=True)
    ours = encoder.encode(TINY_SENTENCES)
    assert torch.nn.functional.cosine_similarity(ours, theirs.cpu()).min() >= 0.9999


def test_we_read_folders_sentence_transformers_writes(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import models

    transformer = models.Transformer(str(tiny_model_dir), max_seq_length=40)
    modules = [transformer, models.Pooling(32, pooling_mode="max"), models.Dense(32, 16), models.Normalize()]
    model = st.SentenceTransformer(modules=modules, device="cpu")
    model.save(str(tmp_path / "st"))
    encoder = Encoder.load(tmp_path / "st", device="cpu")
    assert encoder.pooling_name == "max" and encoder.max_length == 40 and encoder.embedding_dim == 16
    theirs = model.encode(TINY_SENTENCES, convert_to_tensor=True).cpu()
    assert torch.nn.functional.cosine_similarity(encoder.encode(TINY_SENTENCES), theirs).min() >= 0.9999
