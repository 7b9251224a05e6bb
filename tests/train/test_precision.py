"""mixed_precision=auto: bf16 autocast only on a CPU that multiplies bf16 natively (the detection faked both ways)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentadapt.train import compute
from sentadapt.train.compute import cpu_multiplies_bf16, resolve_mixed_precision  # the real check (conftest pins it)
from tests.conftest import build_tiny_bert, run_adapt


@pytest.mark.parametrize(("native", "on_gpu", "expected"), [(True, False, "bf16"), (False, False, "no"),
                                                            (True, True, "no"), (False, True, "no")])
def test_auto_is_bf16_only_on_a_cpu_with_native_bf16_matmuls(monkeypatch: pytest.MonkeyPatch, native: bool,
                                                             on_gpu: bool, expected: str) -> None:
    monkeypatch.setattr(compute, "cpu_multiplies_bf16", lambda: native)
    assert resolve_mixed_precision("auto", on_gpu=on_gpu) == expected
    for explicit in ("no", "bf16", "fp16") if on_gpu else ("no", "bf16"):  # an explicit choice is never second-guessed
        assert resolve_mixed_precision(explicit, on_gpu=on_gpu) == explicit


@pytest.mark.parametrize("name", ["_is_avx512_bf16_supported", "_is_amx_tile_supported"])
def test_either_instruction_set_counts_and_a_torch_without_the_checks_says_no(monkeypatch: pytest.MonkeyPatch,
                                                                             name: str) -> None:
    import torch

    for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        monkeypatch.setattr(torch.cpu, check, lambda check=check: check == name, raising=False)
    assert cpu_multiplies_bf16()
    for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        monkeypatch.delattr(torch.cpu, check, raising=False)
    assert not cpu_multiplies_bf16()


@pytest.mark.parametrize(("native", "trained_in"), [(True, "bf16"), (False, "no")])
def test_a_run_with_auto_trains_and_records_what_the_cpu_allows(monkeypatch: pytest.MonkeyPatch, native: bool,
                                                                trained_in: str, tiny_model_dir: Path, corpus: Path,
                                                                tmp_path: Path) -> None:
    monkeypatch.setattr(compute, "cpu_multiplies_bf16", lambda: native)
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--max-steps", "2", "--batch-size", "8", "--mixed-precision", "auto", "--dev", "none")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["environment"]["mixed_precision"] == trained_in
    assert f"mixed precision {trained_in}" in result.output


@pytest.mark.parametrize(("native", "trained_in"), [(True, "bf16"), (False, "no")])
def test_a_consert_teacher_run_trains_in_bf16_by_default_only_where_the_cpu_allows(
        monkeypatch: pytest.MonkeyPatch, native: bool, trained_in: str, tiny_model_dir: Path, corpus: Path,
        tmp_path: Path) -> None:
    """No precision flag: the teacher run's default (`auto`) decides, and metrics.json records what it trained in."""
    monkeypatch.setattr(compute, "cpu_multiplies_bf16", lambda: native)
    teacher = build_tiny_bert(tmp_path / "teacher", seed=1)
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--teacher", str(teacher), "--output",
                       str(tmp_path / "run"), "--max-steps", "2", "--batch-size", "8", "--dev", "none")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["environment"]["mixed_precision"] == trained_in


def test_an_auto_run_with_a_teacher_trains_each_candidate_in_its_own_precision(
        monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path) -> None:
    """`--recipe auto --teacher`: the ConSERT candidate defaults to bf16 on a native-bf16 CPU, the SG-OPT one to fp32,
    one after the other in one process (accelerate keeps one process-wide precision)."""
    monkeypatch.setattr(compute, "cpu_multiplies_bf16", lambda: True)
    teacher = build_tiny_bert(tmp_path / "teacher", seed=1)
    output = tmp_path / "auto"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--teacher", str(teacher), "--recipe", "auto",
                       "--candidates", "consert,sg-opt", "--dev", str(pairs_tsv), "--set", "teacher_check=off",
                       "--output", str(output), "--max-steps", "2", "--batch-size", "8", "--max-length", "16")
    assert result.exit_code == 0, result.output
    trained = {name: json.loads((output / "candidates" / name / "metrics.json").read_text())["environment"]
               ["mixed_precision"] for name in ("consert", "sg-opt")}
    assert trained == {"consert": "bf16", "sg-opt": "no"}
