"""The GPU benchmark's parts that a CPU can check: its arithmetic, parsing, row selection and table, the clean
skip without CUDA, and (slow) every row end to end on the CPU with a tiny model (python -m bench.bench_gpu --smoke)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import bench_gpu, gpu_measure

REPO = Path(__file__).resolve().parents[1]


def test_skips_cleanly_without_a_gpu() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.bench_gpu"], cwd=REPO, capture_output=True, text=True,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("no CUDA device: skipping the GPU benchmark (--smoke runs every row on the CPU "
                                   "with a tiny model, to check the script)")


def test_useful_flops_of_bert_base() -> None:
    measure = gpu_measure
    from transformers import BertConfig, BertModel

    with torch.device("meta"):
        shape = measure.EncoderShape.of_bert(BertModel(BertConfig()))
    # 12 layers × (4·768² + 4·768 attention + 2·768·3072 + 3072 + 768 feed-forward + 2 LayerNorms of 2·768)
    assert shape == measure.EncoderShape(parameters=85_054_464, layers=12, hidden=768)
    tokens = measure.TokenStats.of([10, 20])
    assert tokens == measure.TokenStats(mean=15.0, mean_square=250.0)
    forward = 2 * 85_054_464 * 15 + 4 * 12 * 768 * 250  # one forward pass of the average sentence
    assert measure.flops_per_example(shape, tokens, train_passes=2) == 6 * forward  # ConSERT: two views
    assert measure.flops_per_example(shape, tokens, train_passes=1, forward_passes=1) == 4 * forward  # SG-OPT
    assert measure.mfu(1000.0, 6 * forward, 1e15) == pytest.approx(1000 * 6 * forward / 1e15, rel=1e-12)


def test_nvidia_smi_lines_parse_or_are_ignored() -> None:
    parse = gpu_measure.parse_smi_line
    assert parse("37, 1234\n") == (37.0, 1234.0)
    assert parse("0, 0") == (0.0, 0.0)
    assert parse("[N/A], 1234") is None
    assert parse("No devices were found") is None


def test_median_utilisation_counts_only_the_timed_window() -> None:
    measure = gpu_measure
    samples = [measure.Sample(at, utilisation, 1000.0) for at, utilisation in
               [(0.5, 0.0), (1.0, 90.0), (1.5, 80.0), (2.0, 70.0), (2.5, 5.0)]]
    assert measure.median_utilisation(samples, 1.0, 2.0) == 80.0
    assert measure.median_utilisation(samples, 3.0, 4.0) is None


def test_steady_rate_is_read_between_the_warm_up_line_and_the_last() -> None:
    measure = gpu_measure
    logged = [measure.LoggedStep(at, step, 1.0) for at, step in [(10.0, 1), (11.0, 10), (12.0, 20), (13.0, 30),
                                                                   (14.0, 40)]]
    window = measure.steady_window(logged, warmup_steps=20, examples_per_step=96)
    assert (window.start, window.end, window.steps, window.examples_per_s) == (12.0, 14.0, 20, 20 * 96 / 2.0)
    assert measure.steady_window(logged, warmup_steps=40, examples_per_step=96) is None  # one line left


def test_train_log_watcher_takes_each_whole_line_once(tmp_path: Path) -> None:
    measure = gpu_measure
    log = tmp_path / "train.log"
    watcher = measure.TrainLogWatcher(log)
    watcher.read_new()  # no file yet
    log.write_text('{"step": 1, "loss": 2.0, "examples_per_s": 50.0}\n{"step": 10, "lo')
    watcher.read_new()
    assert [(s.step, s.examples_per_s) for s in watcher.steps] == [(1, 50.0)]
    with log.open("a") as handle:
        handle.write('ss": 1.5, "examples_per_s": 60.0}\n{"step": 10, "dev": 0.5}\n')
    watcher.read_new()
    watcher.read_new()
    assert [(s.step, s.examples_per_s) for s in watcher.steps] == [(1, 50.0), (10, 60.0)]  # dev lines are not steps


def test_rows_and_their_selection() -> None:
    bench = bench_gpu
    rows = bench.plan_rows((96, 512), 16, compiled=False)
    assert len(rows) == 3 * 4 * 2 + 4
    assert [row.name for row in rows[:3]] == ["peer-fp32-96", "bare-fp32-96", "consert-fp32-96"]
    chosen = bench.select_rows(rows, "consert-bf16-*, sgopt-fp16-*")
    assert [row.name for row in chosen] == ["consert-bf16-96", "consert-bf16-512", "sgopt-fp16-16"]
    with pytest.raises(SystemExit) as caught:
        bench.select_rows(rows, "consert-*,ct-*")
    assert str(caught.value) == ("--only: 'ct-*' matches no row; rows are SYSTEM-PRECISION-BATCH, e.g. "
                                 "peer-fp32-96 (systems: peer, bare, bare_compiled, consert, consert_compiled, sgopt)")
    compiled = [row.name for row in bench.plan_rows((96,), 16, compiled=True) if row.precision == "bf16"]
    assert compiled == ["peer-bf16-96", "bare-bf16-96", "bare_compiled-bf16-96", "consert-bf16-96",
                        "consert_compiled-bf16-96", "sgopt-bf16-16"]


def test_rows_sentadapt_cannot_run_are_skipped_with_the_reason() -> None:
    bench = bench_gpu
    row = bench.Row
    assert bench.skip_reason(row("consert", "tf32", 96), cuda=True, flags=set()) == (
        "this sentadapt has no --tf32: its fp32 (TF32 off) is the fp32 row")
    assert bench.skip_reason(row("consert", "tf32", 96), cuda=True, flags={"--tf32"}) is None
    assert bench.skip_reason(row("consert", "bf16", 96), cuda=True, flags=set()) is None
    assert bench.skip_reason(row("bare", "tf32", 96), cuda=True, flags=set()) is None
    assert bench.skip_reason(row("consert_compiled", "bf16", 96), cuda=True, flags={"--tf32"}) == (
        "this sentadapt has no --compile")
    assert bench.skip_reason(row("peer", "fp16", 96), cuda=False, flags={"--tf32"}) == "fp16 needs a CUDA GPU"


def _measured(name: str, rate: float, run_id: str = "r1", **extra: object) -> dict[str, object]:
    system, precision, batch = name.split("-")
    return {"row": name, "system": system, "precision": precision, "batch": int(batch), "run_id": run_id,
            "examples_per_s": rate, "useful_mfu": 0.12, "peak_gpu_mb": 2048.0, "median_gpu_utilisation": 85.0,
            **extra}


def test_table_ratios_come_from_the_same_run_and_targets_say_what_is_missing() -> None:
    bench = bench_gpu
    run = {"run_id": "r1", "card": "NVIDIA H100 80GB HBM3", "started": "2026-11-25 10:00 UTC",
           "versions": "torch 2.11.0", "steps": 300, "warmup_steps": 20, "sentadapt_flags": ["--tf32"],
           "peak_tflops": {"fp32": 51.0, "bf16": 780.0}}
    rows = [_measured("peer-bf16-96", 500.0), _measured("bare-bf16-96", 1500.0),
            _measured("bare-fp32-96", 3000.0, run_id="r0"),  # another run: no ratio from it
            _measured("consert-bf16-96", 1600.0), _measured("consert-fp32-96", 1000.0),
            {"row": "consert-fp16-96", "system": "consert", "precision": "fp16", "batch": 96, "run_id": "r1",
             "error": "exit 1: CUDA out of memory"}]
    text = bench.render({"runs": [run], "rows": rows})
    assert text.startswith("**NVIDIA H100 80GB HBM3** (2026-11-25 10:00 UTC; torch 2.11.0): 300 steps per row, "
                           "timed after 20; measured matmul peak TFLOP/s: fp32 51, bf16 780.")
    assert ("| consert-bf16-96 | sentadapt ConSERT | bf16 | 96 | 1,600 | 1.07× | 3.20× | 1.60× | 12.0% | 2,048 MiB "
            "| 85 % |") in text
    assert "| consert-fp32-96 | sentadapt ConSERT | fp32 | 96 | 1,000 | – | – | 1.00× |" in text
    assert "- consert-fp16-96: exit 1: CUDA out of memory" in text
    assert "| ConSERT bf16, batch 96 ≥ 1,500 examples/s | 1,600 | yes |" in text
    assert "| ConSERT bf16, batch 96 ≥ 2.5× the sentence-transformers peer | 3.20× | yes |" in text
    assert "| ConSERT fp16, batch 96 ≥ 1,500 examples/s | not measured | – |" in text
    assert "| ConSERT fp32 with TF32, batch 96 ≥ 2,000 examples/s | not measured | – |" in text


def test_render_merges_runs_and_keeps_the_later_measurement_of_a_row(tmp_path: Path) -> None:
    bench = bench_gpu

    def run(run_id: str) -> dict[str, object]:
        return {"run_id": run_id, "card": "NVIDIA H200", "started": run_id, "versions": "torch 2.11.0", "steps": 300,
                "warmup_steps": 20, "sentadapt_flags": [], "peak_tflops": {"bf16": 790.0}}

    late, early = "2026-11-25T10:00:00Z", "2026-11-25T09:00:00Z"
    first, second = tmp_path / "late.json", tmp_path / "early.json"
    first.write_text(json.dumps({"runs": [run(late)], "rows": [_measured("consert-bf16-96", 1000.0, late),
                                                               _measured("bare-bf16-96", 1500.0, late)]}))
    second.write_text(json.dumps({"runs": [run(early)], "rows": [_measured("consert-bf16-96", 900.0, early)]}))
    merged = bench.merge([first, second])
    assert [(row["row"], row["examples_per_s"]) for row in merged["rows"]] == [("consert-bf16-96", 1000.0),
                                                                               ("bare-bf16-96", 1500.0)]
    assert [run["run_id"] for run in merged["runs"]] == [early, late]
    text = bench.render(merged)
    assert text.startswith(f"Run {early}: **NVIDIA H200**")
    assert f"| {late} | consert-bf16-96 | sentadapt ConSERT | bf16 | 96 | 1,000 | 0.67× | – |" in text
    with pytest.raises(SystemExit) as caught:
        bench.merge([tmp_path / "missing.json"])
    assert str(caught.value) == f"--render: {tmp_path / 'missing.json'} does not exist"


@pytest.mark.slow  # minutes: opt in with `pytest -m slow`
def test_smoke_runs_every_row_on_the_cpu(tiny_model_dir: Path, tmp_path: Path) -> None:
    """~4 min on 2 loaded cores: 14 fresh processes (sentadapt ConSERT and SG-OPT, the bare loop, the peer)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down after the {i}th backup\n" for i in range(40)))
    out = tmp_path / "gpu.json"
    done = subprocess.run([sys.executable, "-m", "bench.bench_gpu", "--smoke", "--tokenizer", str(tiny_model_dir),
                           "--corpus", str(corpus), "--work", str(tmp_path / "work"), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {row["row"]: row for row in json.loads(out.read_text())["rows"]}
    measured = {name for name, row in rows.items() if row.get("examples_per_s", 0) > 0 and row["useful_mfu"] > 0}
    assert measured == {f"{system}-{precision}-{batch}" for system in ("peer", "bare", "consert")
                        for precision in ("fp32", "bf16") for batch in (8, 16)} | {"sgopt-fp32-8", "sgopt-bf16-8"}
    skipped = {row["skipped"] for name, row in rows.items() if name not in measured}
    assert skipped == {"tf32 needs a CUDA GPU", "fp16 needs a CUDA GPU"}
    assert rows["consert-bf16-8"]["train_log_examples_per_s"] > 0 and rows["bare-bf16-8"]["tf32"] == "tf32"
    assert "| consert-bf16-16 | sentadapt ConSERT | bf16 | 16 |" in out.with_suffix(".md").read_text()
