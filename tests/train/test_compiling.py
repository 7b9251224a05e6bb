"""`--set compile=on|graphs`: the transformer layers compiled for training only (sentadapt/model/compiling.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from sentadapt.config.merging import coerce
from sentadapt.errors import ConfigError
from sentadapt.model.compiling import compile_layers, eager_only, release, repeated_layers
from sentadapt.model.encoder import Encoder
from sentadapt.model.half_precision import cast_copy
from sentadapt.run.execute import train_stage, write_config
from sentadapt.run.inputs import build_inputs
from sentadapt.train.loop import Trainer
from tests.conftest import build_tiny_bert, run_adapt, run_config
from tests.train.test_train import Recorder

FLAGS = {"batch_size": 8, "max_length": 16, "lr": 1e-3, "eval_every": 2, "log_every": 1, "max_steps": 4}


@pytest.fixture(scope="module")
def no_dropout_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT without dropout: inductor draws its own dropout masks, so only a model without dropout can
    give the same losses compiled and eager."""
    folder = build_tiny_bert(tmp_path_factory.mktemp("tiny-no-dropout"))
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


class Noted(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []

    def message(self, text: str) -> None:
        self.notes.append(text)


def _train(model: Path, corpus: Path, dev: Path, output: Path, compile_setting: str) -> tuple[Trainer, Noted]:
    config = run_config("consert", model, corpus, output, FLAGS, [f"compile={compile_setting}"], dev=str(dev))
    write_config(config)
    recorder = Noted()
    trainer = Trainer(build_inputs(config, lambda _t: None), recorder)
    train_stage(trainer, False)
    return trainer, recorder


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the layers compile (tests/train/test_gpu_training.py)")
def test_on_the_cpu_compile_is_a_note_and_the_same_training(no_dropout_model: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down now {'very ' * (i % 9)}\n" for i in range(80)))
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"the server {i} is down\tserver {i} is {'down' if i % 2 else 'up'}\t{i % 5}\n" for i in range(12)))
    _, eager = _train(no_dropout_model, corpus, dev, tmp_path / "eager", "off")
    trainer, noted = _train(no_dropout_model, corpus, dev, tmp_path / "graphs", "graphs")
    assert "compile: graphs applies on a CUDA GPU; this cpu run trains uncompiled" in noted.notes
    assert noted.losses_by_step == eager.losses_by_step
    layers = repeated_layers(trainer.inputs.encoder.backbone)
    assert all(getattr(layer, "_compiled_call_impl", None) is None for layer in layers)


def _loss_and_gradients(encoder: Encoder, lengths: tuple[int, ...]) -> list[tuple[float, torch.Tensor]]:
    """ConSERT's shape of a step: an embedding-layer augmentation (a forward hook, as Encoder.run_backbone adds
    one), a pooled loss, backward; at several padded lengths."""
    generator = torch.Generator().manual_seed(0)
    out = []
    for length in lengths:
        encoder.zero_grad()
        ids = torch.randint(5, 100, (4, length), generator=generator)
        mask = torch.ones_like(ids)
        keep = (torch.rand((4, length, 1), generator=generator) > 0.2).float()  # a cutoff of token embeddings
        outputs = encoder.run_backbone(ids, mask, embedding_transform=lambda embedded, keep=keep: embedded * keep)
        loss = outputs.last_hidden_state.mean(dim=1).pow(2).sum()
        loss.backward()
        weight = encoder.backbone.encoder.layer[0].attention.self.query.weight
        out.append((float(loss.detach()), weight.grad.detach().clone()))
    return out


def test_the_compiled_layers_capture_the_eager_forward_and_backward(no_dropout_model: Path) -> None:
    """The graphs torch.compile captures (aot_eager: the same capture, forward and backward, without inductor's
    code generation, so no C++ compiler is needed) give the eager loss and gradients, through the embedding hook
    and three padded lengths (a static graph, then the dynamic one)."""
    encoder = Encoder.load(no_dropout_model, device="cpu")
    encoder.train()
    eager = _loss_and_gradients(encoder, (8, 16, 24))
    from torch._dynamo.utils import counters

    counters.clear()
    assert compile_layers(encoder.backbone, "on", backend="aot_eager") == 2
    try:
        compiled = _loss_and_gradients(encoder, (8, 16, 24))
    finally:
        release(encoder.backbone)
    assert counters["stats"]["unique_graphs"] == 2  # one static graph, then one for every length: compiled
    for (loss, gradient), (compiled_loss, compiled_gradient) in zip(eager, compiled, strict=True):
        assert compiled_loss == pytest.approx(loss, rel=1e-5)
        torch.testing.assert_close(compiled_gradient, gradient, rtol=1e-4, atol=1e-6)
    assert eager[0][0] != pytest.approx(eager[1][0], rel=1e-3)  # the lengths differ: not one input thrice


def test_a_compiled_layer_is_not_carried_into_a_cast_copy(tiny_encoder: Encoder) -> None:
    backbone = tiny_encoder.backbone
    assert compile_layers(backbone, "on", backend="aot_eager") == 2
    try:
        copied = cast_copy(backbone, torch.bfloat16)
        assert all(getattr(module, "_compiled_call_impl", None) is None for module in copied.modules())
        assert backbone.encoder.layer[0]._compiled_call_impl is not None
    finally:
        release(backbone)
    assert backbone.encoder.layer[0]._compiled_call_impl is None


def test_off_compiles_nothing_and_a_model_without_a_layer_stack_is_one_line(tiny_encoder: Encoder) -> None:
    assert compile_layers(tiny_encoder.backbone, "off") == 0
    assert tiny_encoder.backbone.encoder.layer[0]._compiled_call_impl is None
    flat = nn.Sequential(nn.Linear(4, 4), nn.GELU())
    assert repeated_layers(flat) is None
    with pytest.raises(ConfigError, match=r"^compile: Sequential has no stack of repeated layers to compile; use "
                                          r"--set compile=off$"):
        compile_layers(flat, "on")
    with eager_only():  # usable as a context wherever encode runs
        assert tiny_encoder.encode(["the server is down"]).shape == (1, 32)


def test_an_unknown_compile_mode_is_a_one_line_error(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(20)))
    result = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--output",
                       str(tmp_path / "run"), "--dev", "none", "--set", "compile=fast")
    assert result.exit_code == 2
    assert "compile: 'fast' is not one of off, on, graphs" in result.output
    assert "Traceback" not in result.output


def test_compile_with_gradient_checkpointing_is_refused_in_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(20)))
    result = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--output",
                       str(tmp_path / "run"), "--dev", "none", "--set", "compile=graphs", "--grad-checkpointing")
    assert result.exit_code == 2
    assert ("compile: graphs cannot compile layers that --grad-checkpointing recomputes; drop one of the two "
            "(compile=off, or no --grad-checkpointing)") in " ".join(result.output.split())
    assert not (tmp_path / "run" / "train.log").exists()


def test_a_yaml_on_or_off_is_the_setting_not_the_word_true() -> None:
    assert coerce("compile", True, str) == "on"
    assert coerce("teacher_check", False, str) == "off"
    assert coerce("compile", "graphs", str) == "graphs"


def test_a_long_gpu_run_without_compile_gets_a_hint_and_a_short_or_cpu_one_does_not(tiny_encoder: Encoder) -> None:
    from sentadapt.model.compiling import COMPILE_PAYS_STEPS, compiled_training

    def notes(setting: str, device_type: str, steps: int) -> list[str]:
        said: list[str] = []
        with compiled_training(tiny_encoder.backbone, setting, said.append, device_type, steps) as compiled:
            assert compiled == 0
        return said

    assert notes("off", "cuda", 10_000) == [
        "hint: 10,000 steps on a GPU are enough for --set compile=graphs to pay for its ~25 s of compiling "
        "(measured up to 1.6× faster steps: bench/README.md)"]
    assert notes("off", "cuda", COMPILE_PAYS_STEPS - 1) == []
    assert notes("off", "cpu", 10_000) == []
    assert notes("on", "cpu", 10_000) == ["compile: on applies on a CUDA GPU; this cpu run trains uncompiled"]
