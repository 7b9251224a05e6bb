"""Training on a CUDA GPU: mixed precision steps, the fused optimizer, the device-side non-finite rule.

Marked `gpu`: skipped where torch sees no CUDA device (CI, laptops). On a GPU machine:
`make test TORCH=torch` runs them with the rest of the suite. What is bit-exact on CUDA and what is not:
two runs with the same seed on the same GPU give the same losses within FLOAT32_RTOL (cuBLAS may pick
different kernels between processes), so these tests compare within tolerance, never with `==`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from sentadapt.run.inputs import build_inputs
from sentadapt.train.loop import Trainer, TrainingDiverged
from tests.conftest import count_tensor_calls, poison, run_config
from tests.train.test_train import toy_corpus  # noqa: F401  (the module-scoped corpus fixture)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _config(model: Path, corpus: Path, output: Path, precision: str, **flags: object):
    settings = {"batch_size": 16, "max_length": 16, "lr": 3e-3, "max_steps": 20, "eval_every": 0,
                "checkpoint_every": 0, "mixed_precision": precision, **flags}
    return run_config("consert", model, corpus, output, settings, [], "none")


def _logged(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train.log").read_text().splitlines()]


@pytest.mark.parametrize("precision", ["no", "fp16", "bf16"])
def test_mixed_precision_trains_on_the_gpu_with_the_fused_optimizer(
    precision: str, tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path,  # noqa: F811
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    trainer = Trainer(build_inputs(_config(tiny_model_dir, toy_corpus, run, precision, log_every=1), lambda _t: None))
    result = trainer.run()
    assert trainer.accelerator.device.type == "cuda"
    assert trainer.optimizer.optimizer.defaults["fused"]
    assert result.environment["mixed_precision"] == precision
    assert result.environment["tf32"] in (True, None)  # None on a pre-Ampere card
    losses = [line["loss"] for line in _logged(run)]
    assert len(losses) == 20 and all(math.isfinite(value) for value in losses)
    assert sum(losses[-5:]) < sum(losses[:5])


@pytest.mark.parametrize("precision", ["no", "fp16", "bf16"])
def test_a_gpu_step_reads_nothing_back(precision: str, tiny_model_dir: Path, toy_corpus: Path,  # noqa: F811
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No `.item()` in 30 steps at log_every 10, fp16's grad scaler included (fused AdamW takes its found_inf)."""
    calls = count_tensor_calls(monkeypatch, "item")
    run = tmp_path / "run"
    run.mkdir()
    Trainer(build_inputs(_config(tiny_model_dir, toy_corpus, run, precision, max_steps=30, log_every=10),
                         lambda _t: None)).run()
    assert calls["item"] == 0


@pytest.mark.parametrize("precision", ["no", "fp16", "bf16"])
def test_a_nan_loss_on_the_gpu_stops_with_the_last_good_weights(
    precision: str, tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path,  # noqa: F811
) -> None:
    from safetensors.torch import load_file

    run = tmp_path / "run"
    run.mkdir()
    inputs = build_inputs(_config(tiny_model_dir, toy_corpus, run, precision, max_steps=8, log_every=10),
                          lambda _t: None)
    poison(inputs, {3})
    with pytest.raises(TrainingDiverged, match=r"^loss is nan at step 3; stopped\. The last good weights are in "):
        Trainer(inputs).run()
    checkpoint = run / "checkpoints" / "step-0000002"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step"] == 2
    assert all(torch.isfinite(t).all() for t in load_file(str(checkpoint / "model.safetensors")).values())


@pytest.mark.parametrize("setting", ["on", "graphs"])
def test_compiled_layers_train_in_bf16_on_the_gpu(setting: str, tiny_model_dir: Path, toy_corpus: Path,  # noqa: F811
                                                 tmp_path: Path) -> None:
    """`compile=graphs` replays CUDA graphs, which only a GPU runs: 20 bf16 steps, finite falling losses, and the
    layers plain modules again after the run (compiling.release)."""
    run = tmp_path / "run"
    run.mkdir()
    config = run_config("consert", tiny_model_dir, toy_corpus, run,
                        {"batch_size": 16, "max_length": 16, "lr": 3e-3, "max_steps": 20, "eval_every": 0,
                         "checkpoint_every": 0, "mixed_precision": "bf16", "log_every": 1},
                        [f"compile={setting}"], "none")
    trainer = Trainer(build_inputs(config, lambda _t: None))
    trainer.run()
    losses = [line["loss"] for line in _logged(run)]
    assert len(losses) == 20 and all(math.isfinite(value) for value in losses)
    assert sum(losses[-5:]) < sum(losses[:5])
    layers = trainer.inputs.encoder.backbone.encoder.layer
    assert all(getattr(layer, "_compiled_call_impl", None) is None for layer in layers)
