"""`--set compile=on|graphs`: the transformer layers compiled for training only (sentadapt/compiling.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from sentadapt.compiling import compile_layers, eager_only, release, repeated_layers
from sentadapt.config import coerce
from sentadapt.encoder import Encoder, cast_copy
from sentadapt.errors import ConfigError
from sentadapt.run.finish import train_stage
from sentadapt.run.inputs import build_inputs
from sentadapt.run.stages import write_config
from sentadapt.train.loop import Trainer
from tests.conftest import build_tiny_bert, run_adapt, run_config
from tests.test_train import Recorder

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


def _train(model: Path, corpus: Path, dev: Path, output: Path, compile_setting: str) -> tuple[Trainer, Recorder]:
    config = run_config("consert", model, corpus, output, FLAGS, [f"compile={compile_setting}"], dev=str(dev))
    write_config(config)
    recorder = Recorder()
    trainer = Trainer(build_inputs(config, lambda _t: None), recorder)
    train_stage(trainer, False)
    return trainer, recorder


def test_compiled_layers_train_to_the_eager_losses_and_are_plain_modules_after(
        no_dropout_model: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down now {'very ' * (i % 9)}\n" for i in range(80)))
    dev = tmp_path / "dev.tsv"  # scored every 2 steps, in the middle of compiled training (eagerly)
    dev.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"the server {i} is down\tserver {i} is {'down' if i % 2 else 'up'}\t{i % 5}\n" for i in range(12)))
    _, eager = _train(no_dropout_model, corpus, dev, tmp_path / "eager", "off")
    trainer, compiled = _train(no_dropout_model, corpus, dev, tmp_path / "compiled", "on")
    assert sorted(compiled.losses_by_step) == [1, 2, 3, 4]
    # inductor reorders float32 sums: the same losses within 1e-4 relative (measured: 4e-7); a different
    # function (a missed augmentation, another dropout) moves them by percents
    for step, loss in eager.losses_by_step.items():
        assert compiled.losses_by_step[step] == pytest.approx(loss, rel=1e-4), step
    layers = repeated_layers(trainer.inputs.encoder.backbone)
    assert layers is trainer.inputs.encoder.backbone.encoder.layer
    assert all(getattr(layer, "_compiled_call_impl", None) is None for layer in layers)
    metrics = json.loads((tmp_path / "compiled" / "metrics.json").read_text())
    assert metrics["steps"] == 4


def test_a_compiled_layer_is_not_carried_into_a_cast_copy(tiny_encoder: Encoder) -> None:
    backbone = tiny_encoder.backbone
    assert compile_layers(backbone, "on") == 2
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


def test_a_yaml_on_or_off_is_the_setting_not_the_word_true() -> None:
    assert coerce("compile", True, str) == "on"
    assert coerce("teacher_check", False, str) == "off"
    assert coerce("compile", "graphs", str) == "graphs"
