from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sentadapt.errors import ModelError
from sentadapt.model.encoder import DenseLayer, Encoder
from sentadapt.model.pooling import Pooling
from tests.conftest import TINY_SENTENCES


def _encode_one_by_one(encoder: Encoder, texts: list[str]) -> torch.Tensor:
    return torch.cat([encoder.encode([t], batch_size=1) for t in texts])


@pytest.mark.parity
def test_encode_matches_unbatched_and_restores_order(tiny_encoder: Encoder) -> None:
    texts = [*TINY_SENTENCES, TINY_SENTENCES[2], TINY_SENTENCES[0]]
    batched = tiny_encoder.encode(texts, batch_size=3)
    assert batched.shape == (len(texts), 32)
    assert torch.allclose(batched, _encode_one_by_one(tiny_encoder, texts), atol=1e-5)
    assert torch.equal(batched[-1], batched[0]) and torch.equal(batched[-2], batched[2])


def test_each_unique_text_is_encoded_once(tiny_encoder: Encoder) -> None:
    rows_seen: list[int] = []
    handle = tiny_encoder.backbone.embeddings.register_forward_hook(
        lambda module, inputs, output: rows_seen.append(output.shape[0])
    )
    try:
        tiny_encoder.encode(TINY_SENTENCES * 3, batch_size=4)
    finally:
        handle.remove()
    assert sum(rows_seen) == len(TINY_SENTENCES)


def test_batches_are_length_sorted(tiny_encoder: Encoder) -> None:
    widths: list[int] = []
    handle = tiny_encoder.backbone.embeddings.register_forward_hook(
        lambda module, inputs, output: widths.append(output.shape[1])
    )
    try:
        tiny_encoder.encode(["a", "the dog is running fast on the red car", "a b", "the server is down"], batch_size=1)
    finally:
        handle.remove()
    assert widths == sorted(widths, reverse=True)


def test_empty_input_gives_empty_matrix(tiny_encoder: Encoder) -> None:
    assert tiny_encoder.encode([]).shape == (0, 32)


def test_bf16_stays_close_to_fp32(tiny_encoder: Encoder) -> None:
    # bf16 encodes with a cast copy of the backbone (no autocast); tests/evaluation/test_eval_dtype.py covers it in full
    fp32 = tiny_encoder.encode(TINY_SENTENCES)
    bf16 = tiny_encoder.encode(TINY_SENTENCES, dtype="bf16")
    assert bf16.dtype == torch.float32
    assert torch.nn.functional.cosine_similarity(fp32, bf16).min() > 0.99


def test_plain_hf_folder_defaults_to_mean_pooling(tiny_encoder: Encoder) -> None:
    assert tiny_encoder.pooling_name == "mean"
    assert tiny_encoder.pooling_source == "default"


@pytest.mark.parity
def test_pooling_override(tiny_model_dir: Path) -> None:
    encoder = Encoder.load(tiny_model_dir, pooling="cls", device="cpu")
    assert encoder.pooling_name == "cls"
    ids = encoder.collate(encoder.tokenize_ids(["the server is down"]))
    hidden = encoder.backbone(input_ids=ids.input_ids, attention_mask=ids.attention_mask).last_hidden_state
    # encode() (inference mode, its own batching) vs a direct forward: another path, elements of scale ~1
    assert torch.allclose(encoder.encode(["the server is down"])[0], hidden[0, 0], atol=1e-5)


@pytest.mark.parametrize("pooling", ["cls", "mean", "max", "last2avg", "firstlast"])
def test_save_and_reload_keeps_pooling_and_vectors(tiny_model_dir_3layers: Path, tmp_path: Path, pooling: str) -> None:
    encoder = Encoder.load(tiny_model_dir_3layers, pooling=pooling, device="cpu")
    encoder.save(tmp_path / "out")
    reloaded = Encoder.load(tmp_path / "out", device="cpu")
    assert reloaded.pooling_name == pooling and reloaded.pooling_source == "modules.json"
    assert torch.allclose(reloaded.encode(TINY_SENTENCES), encoder.encode(TINY_SENTENCES), atol=1e-6)


def test_head_and_normalize_are_saved_and_reloaded(tiny_model_dir: Path, tmp_path: Path) -> None:
    encoder = Encoder.load(tiny_model_dir, device="cpu")
    torch.manual_seed(3)
    encoder.head = torch.nn.ModuleList([
        DenseLayer(32, 48, "torch.nn.modules.activation.ReLU"), DenseLayer(48, 32),
    ])
    encoder.configure(normalize=True)
    encoder.save(tmp_path / "out")
    modules = json.loads((tmp_path / "out" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Dense", "Dense", "Normalize"]
    reloaded = Encoder.load(tmp_path / "out", device="cpu")
    vectors = reloaded.encode(TINY_SENTENCES)
    assert torch.allclose(vectors, encoder.encode(TINY_SENTENCES), atol=1e-6)
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(len(TINY_SENTENCES)), atol=1e-5)


def test_pickle_weights_are_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    folder = tmp_path / "pickled"
    folder.mkdir()
    torch.save(load_file(str(tiny_model_dir / "model.safetensors")), folder / "pytorch_model.bin")
    for name in ("config.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (tiny_model_dir / name).exists():
            (folder / name).write_bytes((tiny_model_dir / name).read_bytes())
    assert not (folder / "model.safetensors").exists()
    with pytest.raises(ModelError) as error:
        Encoder.load(folder, device="cpu")
    assert str(error.value) == (
        f"{folder}: no safetensors weights; pickle checkpoints (.bin) can run code when loaded — convert the "
        "model to safetensors, or pass --allow-pickle if you trust it"
    )
    assert Encoder.load(folder, device="cpu", allow_pickle=True).encode(["a"]).shape == (1, 32)


def test_unsupported_st_module_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    encoder = Encoder.load(tiny_model_dir, device="cpu")
    encoder.save(tmp_path / "out")
    modules = json.loads((tmp_path / "out" / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_X", "type": "my_package.Evil"})
    (tmp_path / "out" / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelError, match=r"module type 'my_package.Evil' is not supported"):
        Encoder.load(tmp_path / "out", device="cpu")


def test_unknown_dense_activation_is_refused() -> None:
    with pytest.raises(ModelError, match=r"Dense activation 'os.system' is not supported"):
        DenseLayer(2, 2, "os.system")


def test_st_pooling_loaded_from_modules_json(tiny_model_dir: Path, tmp_path: Path) -> None:
    encoder = Encoder.load(tiny_model_dir, pooling="max", device="cpu")
    encoder.save(tmp_path / "out")
    assert Encoder.load(tmp_path / "out", device="cpu").pooling == Pooling("max")


def test_text_longer_than_the_position_table_is_truncated_to_it(tiny_encoder: Encoder) -> None:
    # the tiny BERT has 64 positions; asking for 512 tokens must not index past its position table
    long_text = " ".join(["the cat sat on the mat"] * 40)
    assert tiny_encoder.position_limit == 64 and tiny_encoder.max_length == 64
    assert [len(ids) for ids in tiny_encoder.tokenize_ids([long_text], max_length=512)] == [64]
    vectors = tiny_encoder.encode([long_text, "short"], max_length=512)
    assert vectors.shape == (2, 32) and torch.isfinite(vectors).all()


def test_weights_stored_in_fp16_load_as_float32(tiny_model_dir: Path, tmp_path: Path) -> None:
    """transformers 5 keeps a file's dtype; the encoder's weights are float32 whatever the folder holds."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "half"
    shutil.copytree(tiny_model_dir, folder)
    stored = load_file(str(folder / "model.safetensors"))
    save_file({name: tensor.half() for name, tensor in stored.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    encoder = Encoder.load(folder, device="cpu")
    assert {parameter.dtype for parameter in encoder.parameters()} == {torch.float32}
    reference = Encoder.load(tiny_model_dir, device="cpu")
    weight = "embeddings.word_embeddings.weight"
    assert torch.equal(dict(encoder.backbone.named_parameters())[weight],
                       dict(reference.backbone.named_parameters())[weight].half().float())
