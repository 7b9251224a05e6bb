"""`adapt --lora`: adapters on the encoder's linear layers (sentadapt/model/lora.py) — trained, resumed, saved merged
and apart, exported, and the bad values refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sentadapt.errors import ConfigError
from sentadapt.model.encoder import Encoder
from sentadapt.model.lora import LoraSettings, attach, lora_flags, merged_state_dict, target_modules
from sentadapt.train.loop import TrainingInterrupted
from tests.conftest import FLOAT32_RTOL, TINY_SENTENCES, run_adapt, run_config
from tests.train.test_train import Recorder, train

peft = pytest.importorskip("peft")

TWO_STEPS = ["--max-steps", "2", "--batch-size", "8", "--dev", "none"]


@pytest.mark.parametrize(("spec", "flags"), [
    ("r=8", {"lora_r": 8}),
    ("on", {"lora_r": 16}),
    ("r=4,alpha=8,dropout=0.1,targets=query+value", {"lora_r": 4, "lora_alpha": 8.0, "lora_dropout": 0.1,
                                                     "lora_targets": "query+value"}),
    ("alpha=64", {"lora_r": 16, "lora_alpha": 64.0}),
])
def test_the_lora_option_becomes_train_settings(spec: str, flags: dict[str, object]) -> None:
    assert lora_flags(spec) == flags


@pytest.mark.parametrize(("spec", "message"), [
    ("r=0", "--lora: r=0: the rank must be at least 1 (leave --lora out to train every weight)"),
    ("r=two", "--lora: r=two is not an integer"),
    ("rank=8", "--lora: 'rank=8' is not KEY=VALUE with KEY one of r, alpha, dropout, targets (e.g. --lora "
               "r=16,alpha=32,targets=attention, or --lora on)"),
])
def test_bad_lora_values_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        lora_flags(spec)
    assert str(error.value) == message


def test_targets_pick_the_attention_projections_or_every_linear_layer(tiny_encoder: Encoder) -> None:
    attention = target_modules(tiny_encoder.backbone, "attention")
    assert attention == [f"encoder.layer.{i}.attention.{part}" for i in range(2)
                         for part in ("self.query", "self.key", "self.value", "output.dense")]
    assert len(target_modules(tiny_encoder.backbone, "all-linear")) == 12  # + intermediate.dense, output.dense
    assert target_modules(tiny_encoder.backbone, "query+value") == [
        "encoder.layer.0.attention.self.query", "encoder.layer.0.attention.self.value",
        "encoder.layer.1.attention.self.query", "encoder.layer.1.attention.self.value"]
    with pytest.raises(ConfigError, match=r"^lora_targets: 'q_proj' matches no linear layer of this bert model; "
                                          r"use attention, all-linear or names joined by '\+' from: dense, key, "):
        target_modules(tiny_encoder.backbone, "q_proj")


def test_attached_adapters_start_at_the_base_and_only_theytrain(tiny_encoder: Encoder) -> None:
    before = tiny_encoder.encode(TINY_SENTENCES)
    attach(tiny_encoder, LoraSettings(r=4, alpha=8.0, dropout=0.0, targets="attention"))
    trainable = [name for name, p in tiny_encoder.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A." in name or ".lora_B." in name for name in trainable)
    assert len(trainable) == 2 * 8  # A and B on 4 projections × 2 layers
    torch.testing.assert_close(tiny_encoder.encode(TINY_SENTENCES), before)  # B starts at zero


def test_merged_weights_equal_the_adapted_forward(tiny_encoder: Encoder, tmp_path: Path) -> None:
    attach(tiny_encoder, LoraSettings(r=4, alpha=8.0, dropout=0.0, targets="all-linear"))
    with torch.no_grad():
        for name, parameter in tiny_encoder.named_parameters():
            if ".lora_B." in name:
                parameter.normal_(std=0.5)  # a trained adapter: B away from zero
    adapted = tiny_encoder.encode(TINY_SENTENCES)
    state = merged_state_dict(tiny_encoder.backbone)
    assert not any(".lora_" in key or ".base_layer." in key for key in state)
    tiny_encoder.save(tmp_path / "model")
    reloaded = Encoder.load(tmp_path / "model", device="cpu")
    assert not any("lora" in name for name, _ in reloaded.named_parameters())
    # two float32 paths, x·Wᵀ + s·(x·Aᵀ)·Bᵀ vs x·(W + s·B·A)ᵀ: equal to rounding
    torch.testing.assert_close(reloaded.encode(TINY_SENTENCES), adapted, rtol=1e-5, atol=1e-5)
    meta = json.loads((tmp_path / "model" / "lora-adapter" / "adapter_config.json").read_text())
    assert (meta["r"], meta["lora_alpha"], meta["peft_type"]) == (4, 8.0, "LORA")


def test_a_frozen_encoder_recipe_refuses_lora(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("sentence1\tsentence2\n" + "".join(f"{a}\t{a} again\n" for a in TINY_SENTENCES))
    result = run_adapt(str(pairs), "--recipe", "clsr", "--base", str(tiny_model_dir), "--output",
                       str(tmp_path / "run"), "--lora", "r=4", *TWO_STEPS)
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: --lora: clsr keeps the encoder frozen (it trains a head on fixed embeddings), so there is "
        "nothing for adapters to adapt; drop --lora")


@pytest.mark.parametrize("recipe", ["consert", "sg-opt"])
def test_a_lora_run_resumes_exactly_and_exports_merged(recipe: str, tiny_model_dir: Path, corpus: Path,
                                                      tmp_path: Path) -> None:
    """4 steps straight == 2, interrupted, + resume; the checkpoint's optimizer holds the adapters' state only;
    the published model is the merged one and SentenceTransformer reproduces sentadapt's vectors after export."""
    st = pytest.importorskip("sentence_transformers")
    flags = {"batch_size": 8, "max_length": 16, "lr": 1e-2, "eval_every": 0, "log_every": 1, "max_steps": 4,
             "checkpoint_every": 2, "lora_r": 4, "lora_alpha": 8.0}
    base = tmp_path / "base"  # a sentence-transformers base: the run keeps its pooling, so its adapters fit it
    Encoder.load(tiny_model_dir, device="cpu").save(base)
    sets = ["head_hidden=16"] if recipe == "sg-opt" else []
    straight = Recorder()
    train(run_config(recipe, base, corpus, tmp_path / "straight", flags, sets), straight)
    config = run_config(recipe, base, corpus, tmp_path / "resumed", flags, sets)
    with pytest.raises(TrainingInterrupted):
        train(config, Recorder(stop_at=2))
    checkpoint = tmp_path / "resumed" / "checkpoints" / "step-0000002"
    moments = torch.load(checkpoint / "optimizer.pt", weights_only=True)["state"]
    adapters = 2 * 4 * 2  # A and B × 4 attention projections × 2 layers
    assert len(moments) == adapters + (4 if recipe == "sg-opt" else 0)  # + SG-OPT's projection head
    resumed = Recorder()
    train(config, resumed, resume=True)
    for step in (3, 4):
        assert resumed.losses_by_step[step] == pytest.approx(straight.losses_by_step[step], rel=FLOAT32_RTOL), step
    vectors = Encoder.load(tmp_path / "resumed", device="cpu").encode(TINY_SENTENCES)
    torch.testing.assert_close(Encoder.load(tmp_path / "straight", device="cpu").encode(TINY_SENTENCES), vectors,
                               atol=1e-5, rtol=0)
    before = Encoder.load(base, device="cpu").encode(TINY_SENTENCES)
    assert (vectors - before).abs().max() > 1e-3  # the adapters trained: the merged model is not the base
    assert (tmp_path / "resumed" / "lora-adapter" / "adapter_model.safetensors").is_file()
    from sentadapt import export

    export(tmp_path / "resumed", tmp_path / "export")
    model = st.SentenceTransformer(str(tmp_path / "export"), device="cpu")
    torch.testing.assert_close(model.encode(TINY_SENTENCES, convert_to_tensor=True), vectors, rtol=1e-5, atol=1e-5)
    assert not (tmp_path / "export" / "lora-adapter").exists()  # merged: a plain model
    assert "- LoRA adapters: rank 4, alpha 8.0, on `attention` (base weights frozen; merged into these weights " \
           "unless exported with --adapters-only)" in (tmp_path / "export" / "README.md").read_text()
    # the last checkpoint, rebuilt as trained (base + adapters) and merged: the same model
    export(tmp_path / "resumed", tmp_path / "from-checkpoint", checkpoint="last")
    torch.testing.assert_close(Encoder.load(tmp_path / "from-checkpoint", device="cpu").encode(TINY_SENTENCES),
                               vectors, rtol=1e-5, atol=1e-5)
    # the adapters alone, loaded onto the base by sentence-transformers: only when the run kept the base's pooling
    if recipe == "sg-opt":  # SG-OPT publishes [CLS] pooling; the base pools by mean
        from sentadapt.errors import ExportError

        with pytest.raises(ExportError, match=r"^--adapters-only: the run's model pools with cls, its base .* with "
                                              r"mean; the adapters alone would not reproduce it: export it merged$"):
            export(tmp_path / "resumed", tmp_path / "adapters", adapters_only=True)
        return
    result = export(tmp_path / "resumed", tmp_path / "adapters", adapters_only=True)
    assert {"README.md", "adapter_config.json", "adapter_model.safetensors"} <= set(result.files)
    assert not any(name.endswith(("model.safetensors", "config.json")) and not name.startswith("adapter_")
                   for name in result.files)  # no base weights
    assert result.checks[0].label == "base + load_adapter(OUT)" and result.checks[0].min_cosine > 0.9999
    onto_base = st.SentenceTransformer(str(base), device="cpu")
    onto_base.load_adapter(str(tmp_path / "adapters"))
    torch.testing.assert_close(onto_base.encode(TINY_SENTENCES, convert_to_tensor=True), vectors, rtol=1e-5,
                               atol=1e-5)


def test_adapters_only_needs_a_lora_run_and_plain_options(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentadapt import export
    from sentadapt.errors import ExportError

    with pytest.raises(ExportError) as error:
        export(tiny_model_dir, tmp_path / "out", adapters_only=True)
    assert str(error.value) == (f"{tiny_model_dir}: holds no LoRA adapters (lora-adapter/ missing: it was trained "
                                "without --lora); export the model without --adapters-only")
    with pytest.raises(ConfigError, match=r"^--adapters-only: writes the published LoRA adapters as trained, which "
                                          r"load onto the base with its own pooling; drop --format onnx, "):
        export(tiny_model_dir, tmp_path / "out", adapters_only=True, format="onnx")


def test_lora_without_peft_installed_is_one_line_before_any_training(
        tiny_model_dir: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "peft", None)  # `import peft` raises ImportError, as when it is not installed
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--lora", "r=4", *TWO_STEPS)
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: --lora: needs peft, which is not installed; pip install 'sentadapt[lora]' (or pip install peft)")
    assert not (tmp_path / "run" / "checkpoints").exists()
