"""What a training pass costs on the CPU a run trains on (sentadapt/train/pass_costs.py, issue 84): the rule that
turns timings into `auto`'s precision and the length chunks' pass cost, the real timing, and its cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sentadapt.model.encoder import Encoder
from sentadapt.options import PASS_OVERHEAD_TOKENS
from sentadapt.run.summary import environment_rows
from sentadapt.train import compute, pass_costs
from sentadapt.train.pass_costs import (
    MAX_PASS_COST,
    SHAPES,
    Arithmetic,
    arithmetic_from_timings,
    choose_arithmetic,
    fitted_pass_cost,
    planned_arithmetic,
    time_passes,  # the real timing (conftest replaces the module's with fixed figures)
)

TOKENS = [rows * length for rows, length in SHAPES]


def _line(intercept: float, per_token: float) -> list[float]:
    return [intercept + per_token * tokens for tokens in TOKENS]


@pytest.mark.parametrize(("seconds", "cost"), [
    (_line(0.05, 0.001), 50),  # a pass costs 50 tokens' work
    (_line(0.0, 0.001), 0),
    (_line(-0.02, 0.001), 0),  # noise tilting the line below zero: no pass is free, but none costs less than nothing
    (_line(30.0, 0.001), MAX_PASS_COST),  # a pass costs more than any batch pads: one padded pass
    ([0.3, 0.2, 0.2, 0.1, 0.05], MAX_PASS_COST),  # longer passes timed faster: nothing fits, one padded pass
])
def test_the_pass_cost_is_the_fitted_lines_intercept_over_its_slope(seconds: list[float], cost: int) -> None:
    assert fitted_pass_cost(seconds) == cost


def test_auto_is_bf16_only_where_its_passes_take_at_most_0_9_of_fp32s() -> None:
    fp32 = _line(0.05, 0.001)
    assert arithmetic_from_timings("auto", True, {"no": fp32, "bf16": [0.88 * took for took in fp32]}) == Arithmetic(
        "bf16", 50, "auto: bf16's passes took 0.88× fp32's time on this CPU")
    slower = {"no": fp32, "bf16": [0.95 * took for took in _line(0.2, 0.001)]}
    assert arithmetic_from_timings("auto", True, slower) == Arithmetic(
        "no", 50, "auto: bf16's passes took 1.07× fp32's time on this CPU, above the 0.9× bf16 needs")
    assert arithmetic_from_timings("auto", False, {"no": fp32}) == Arithmetic(
        "no", 50, "auto: this CPU has no native bf16 matmuls")
    given = arithmetic_from_timings("bf16", False, {"bf16": _line(0.2, 0.001)})
    assert given == Arithmetic("bf16", 200, "")  # a precision given is never second-guessed


def test_a_run_times_each_precision_once_per_cpu_and_model_and_keeps_it(tiny_encoder: Encoder,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    monkeypatch.setenv("SENTADAPT_CACHE", str(tmp_path / "cache"))
    for name in pass_costs.KERNEL_VARIABLES:  # the shell's own (ATEN_CPU_CAPABILITY=default, ...) set below
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(compute, "cpu_multiplies_bf16", lambda: True)
    timed: list[bool] = []
    monkeypatch.setattr(pass_costs, "time_passes", lambda encoder, bf16: timed.append(bf16) or (
        [0.5 * took for took in _line(0.04, 0.001)] if bf16 else _line(0.05, 0.001)))
    said: list[str] = []
    chosen = choose_arithmetic("auto", tiny_encoder, on_gpu=False, processes=1, message=said.append)
    assert chosen == Arithmetic("bf16", 40, "auto: bf16's passes took 0.50× fp32's time on this CPU")
    assert timed == [False, True]
    assert said == ["timing the training pass on this CPU in fp32 and bf16 (once per CPU, torch and model; kept in "
                    "the cache)"]
    [kept] = (tmp_path / "cache" / "pass-costs").glob("*.json")
    record = json.loads(kept.read_text())
    assert record["key"]["model"]["hidden_size"] == tiny_encoder.backbone.config.hidden_size
    assert record["seconds"]["no"] == _line(0.05, 0.001)
    # the next run on this CPU and model reads them, for any option
    assert choose_arithmetic("auto", tiny_encoder, False, 1, said.append) == chosen
    assert choose_arithmetic("no", tiny_encoder, False, 1, said.append) == Arithmetic("no", 50, "")
    assert timed == [False, True] and len(said) == 1
    # other kernels are another machine: timed again
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    choose_arithmetic("no", tiny_encoder, False, 1, said.append)
    assert timed == [False, True, False]


def test_a_gpu_a_frozen_encoder_or_several_processes_time_nothing(tiny_encoder: Encoder,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pass_costs, "time_passes", lambda encoder, bf16: pytest.fail("timed"))
    assert choose_arithmetic("auto", tiny_encoder, on_gpu=True, processes=1, message=print) == Arithmetic(
        "no", None, "auto: fp32 on a GPU")  # nothing is chunked on a GPU
    assert choose_arithmetic("no", tiny_encoder, on_gpu=False, processes=2, message=print) == Arithmetic(
        "no", PASS_OVERHEAD_TOKENS, "several processes time nothing")
    tiny_encoder.backbone.requires_grad_(False)  # CLSR's: no pass of it is trained, none is chunked
    assert choose_arithmetic("auto", tiny_encoder, on_gpu=False, processes=1, message=print) == Arithmetic(
        "no", None, "")


def test_the_timing_runs_real_passes_and_leaves_no_gradient_behind(tiny_encoder: Encoder) -> None:
    tiny_encoder.train()
    seconds = time_passes(tiny_encoder, bf16=False)
    assert len(seconds) == len(SHAPES) and all(took > 0 for took in seconds)
    assert all(parameter.grad is None for parameter in tiny_encoder.parameters())
    assert tiny_encoder.backbone.training  # the model's dropout as it was


def test_the_encoder_plans_its_chunks_with_the_pass_cost_it_is_given(tiny_encoder: Encoder) -> None:
    tiny_encoder.train()
    mask = torch.zeros(40, 60, dtype=torch.long)
    mask[:38, :3] = 1
    mask[38:] = 1  # 38 rows of 3 tokens and 2 of 60: splitting saves 38 × 57 padded tokens
    with tiny_encoder.dropout(False):
        tiny_encoder.cost_passes_at(100)
        assert tiny_encoder._length_chunks(mask) is not None
        tiny_encoder.cost_passes_at(MAX_PASS_COST)
        assert tiny_encoder._length_chunks(mask) is None


def test_the_dry_run_says_what_will_be_timed_or_what_the_cache_holds(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("SENTADAPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(pass_costs, "_gpu_visible", lambda: False)
    monkeypatch.setattr(pass_costs, "_cpu_flags_name_bf16", lambda: True)
    architecture = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                    "intermediate_size": 64}
    assert planned_arithmetic("auto", architecture) == (
        "arithmetic: the run first times its training pass on this CPU in fp32 and bf16 (11 passes each, kept in the "
        "cache), then trains in bf16 where it takes ≤ 0.9× fp32's time")
    assert planned_arithmetic("no", None) == (
        "arithmetic: the run first times its training pass on this CPU in fp32 (11 passes, kept in the cache)")
    assert planned_arithmetic("fp16", architecture) == ""  # a CPU run refuses it
    key = pass_costs.machine_key(architecture)
    pass_costs.write_json_file(pass_costs.timings_file(key), {
        "key": key, "shapes": [list(shape) for shape in SHAPES], "timed": "2026-12-07",
        "seconds": {"no": _line(0.05, 0.001), "bf16": _line(0.05, 0.002)}})
    assert planned_arithmetic("auto", architecture) == (
        "arithmetic: fp32 (auto: bf16's passes took 1.96× fp32's time on this CPU, above the 0.9× bf16 needs), "
        "length chunks where they save over 50 tokens (this CPU's timing of 2026-12-07, in the cache)")


def test_the_summary_says_why_and_the_pass_cost() -> None:
    env = {"processes": 1, "device": "cpu", "backend": None, "mixed_precision": "no", "tf32": None,
           "precision_reason": "auto: this CPU has no native bf16 matmuls", "pass_cost": 58, "global_batch": 64,
           "per_process_batch": 64, "grad_accum": 1, "seed": 42, "versions": {"torch": "2.13.0"}}
    assert environment_rows(env)[0] == ("ran on", "1 process on cpu, mixed precision no (auto: this CPU has no native "
                                                  "bf16 matmuls), length chunks where they save over 58 tokens")


def test_a_cpu_run_says_what_it_times_before_and_what_it_chose_after(tiny_model_dir: Path, corpus: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    from tests.conftest import run_adapt

    monkeypatch.setenv("SENTADAPT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pass_costs, "_gpu_visible", lambda: False)
    args = [str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--max-steps", "1",
            "--batch-size", "8", "--dev", "none"]
    planned = run_adapt(*args, "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "arithmetic: the run first times its training pass on this CPU in fp32 (11 passes, kept in the cache)\n" \
        in planned.stderr
    trained = run_adapt(*args)
    assert trained.exit_code == 0, trained.output
    assert "timing the training pass on this CPU in fp32 (once per CPU, torch and model; kept in the cache)" \
        in trained.output
    environment = json.loads((tmp_path / "run" / "metrics.json").read_text())["environment"]
    assert [environment[key] for key in ("mixed_precision", "precision_reason", "pass_cost")] == ["no", None, 100]
    again = run_adapt(*args, "--dry-run")  # the cache now holds this CPU's timing (conftest's: 100 tokens)
    assert "arithmetic: fp32, length chunks where they save over 100 tokens (this CPU's timing of " in again.stderr


def test_the_dry_run_reads_the_architecture_where_modules_json_keeps_the_transformer(tmp_path: Path) -> None:
    """A sentence-transformers folder may keep its transformer in a subfolder: its config.json is the one the run's
    timing is keyed by, not a file at the folder's root."""
    from sentadapt.model.st_modules import transformer_config

    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    assert transformer_config(tmp_path) == tmp_path / "0_Transformer" / "config.json"
    assert transformer_config(tmp_path / "plain") == tmp_path / "plain" / "config.json"
