"""--report-to: Accelerate's experiment trackers get the loss and its parts, lr, examples/s, dev scores and the
verdict (TensorBoard's event files read back); a tracker that is not installed is one line naming the extra."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import run_adapt

pytest.importorskip("tensorboard", reason="the dev extra installs tensorboard")


def read_events(folder: Path) -> tuple[dict[str, list[tuple[int, float]]], dict[str, list[str]]]:
    """Scalars (tag → [(step, value)]) and text (tag → [text]) of the event file TensorBoard's writer left."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    [events] = folder.glob("events.out.tfevents.*")  # one writer per run; hparams go to a subfolder
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    scalars = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}
    texts = {tag: [e.tensor_proto.string_val[0].decode() for e in accumulator.Tensors(tag)]
             for tag in accumulator.Tags()["tensors"]}
    return scalars, texts


def test_tensorboard_gets_losses_lr_throughput_dev_scores_and_the_verdict(
    tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    run = tmp_path / "my-run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), "--dev", str(pairs_tsv),
                       "--batch-size", "8", "--max-steps", "4", "--max-length", "16", "--eval-every", "2",
                       "--set", "log_every=1", "--report-to", "tensorboard")
    assert result.exit_code == 0, result.output

    scalars, texts = read_events(run / "tensorboard" / "sentadapt")
    log = [json.loads(line) for line in (run / "train.log").read_text().splitlines()]
    metrics = json.loads((run / "metrics.json").read_text())
    trained = [r for r in log if "loss" in r]
    assert [step for step, _ in scalars["train/loss"]] == [1, 2, 3, 4]
    # TensorBoard stores float32: equal to train.log's float64 within float32 rounding (2^-24 ≈ 6e-8 relative)
    for tag, key in [("train/loss", "loss"), ("train/contrastive", "contrastive"), ("train/lr", "lr"),
                     ("train/examples_per_s", "examples_per_s")]:
        assert [v for _, v in scalars[tag]] == pytest.approx([r[key] for r in trained], rel=1e-6), tag
    assert [step for step, _ in scalars["dev/score"]] == [h["step"] for h in metrics["history"]] == [0, 2, 4]
    assert [v for _, v in scalars["dev/score"]] == pytest.approx([h["dev"] for h in metrics["history"]], rel=1e-6)
    assert [step for step, _ in scalars["dev/best"]] == [2, 4]
    for key in ("base_score", "best_score", "dev_change"):
        assert scalars[f"final/{key}"] == [(4, pytest.approx(metrics[key], rel=1e-6))]
    assert scalars["final/improved"] == [(4, float(metrics["improved"]))]
    [verdict] = texts["final/verdict/text_summary"]
    [decision] = texts["final/decision/text_summary"]
    assert (decision, verdict) == (metrics["decision"], metrics["decision_reason"])
    # hyperparameters: the run's resolved config, flattened
    [hparams] = (run / "tensorboard" / "sentadapt").glob("*/hparams.yml")
    assert "train.batch_size: 8" in hparams.read_text().splitlines()


@pytest.mark.parametrize(("report_to", "message"), [
    ("mlflow", "--report-to mlflow: the mlflow package is not installed; install it with: pip install "
               "'sentadapt[mlflow]'"),
    ("all", "--report-to all: no tracker is installed; install one with: pip install 'sentadapt[tensorboard]' "
            "(or [wandb], [mlflow])"),
])
def test_a_tracker_that_is_not_installed_is_one_line_naming_the_extra_before_loading(
    report_to: str, message: str, tiny_model_dir: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name in ("tensorboard", "wandb", "mlflow") else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    run = tmp_path / "run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), "--dev", "none",
                       "--report-to", report_to)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {message}"
    assert not run.exists()  # refused before the model loaded or the run directory was made
