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

REPO = Path(__file__).resolve().parents[2]


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
    ordered = bench.select_rows(rows, "sgopt-fp16-16,bare-bf16-96,consert-bf16-*,bare-bf16-96")
    assert [row.name for row in ordered] == ["sgopt-fp16-16", "bare-bf16-96", "consert-bf16-96", "consert-bf16-512"]
    with pytest.raises(SystemExit) as caught:
        bench.select_rows(rows, "consert-*,ct-*")
    assert str(caught.value) == ("--only: 'ct-*' matches no row; rows are SYSTEM-PRECISION-BATCH, e.g. "
                                 "peer-fp32-96 (systems: peer, bare, bare_compiled, consert, consert_compiled, sgopt, "
                                 "eval)")
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
    assert bench.skip_reason(row("consert_compiled", "bf16", 96), cuda=True, flags={"--tf32"}) is None
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


# ---------------------------------------------------------------------- --quick: what fits one lent session


def test_quick_plan_fits_one_session_with_the_deciding_rows_first() -> None:
    bench = bench_gpu
    plan = bench.quick_plan()
    session = [chunk for chunk in plan if not chunk.later]
    assert [chunk.number for chunk in plan] == list(range(1, len(plan) + 1))
    assert all(chunk.estimate_s <= 480 for chunk in session) and sum(c.estimate_s for c in session) <= 1200
    assert [chunk.tests for chunk in plan].count(True) == 1 and session[-1].tests  # the GPU-marked tests: own chunk
    chunk_of = {row.name: chunk.number for chunk in plan for row in chunk.rows}
    assert [row.name for row in session[0].rows][:4] == ["consert-bf16-96", "consert-fp16-96", "consert-tf32-96",
                                                         "bare-bf16-96"]
    deciding = ["consert-bf16-512", "bare-bf16-512", "sgopt-fp16-16", "eval-fp32-128", "eval-fp16-128"]
    assert [chunk_of[name] for name in deciding] == [2, 2, 2, 3, 3]  # then the sentence-transformers peer
    assert chunk_of["peer-bf16-96"] == 3 and not any(c.later for c in plan if c.number <= session[-1].number)
    everything = [row.name for row in bench.plan_rows((96, 512), 16, compiled=False)] + [
        f"eval-{precision}-128" for precision in ("fp32", "fp16", "bf16")]
    assert sorted(chunk_of) == sorted(everything)  # every row once; the rest in later chunks
    # the estimates: 40 s a row + 300 steps × batch / issue 21's rate, 45 s a chunk
    assert bench.row_estimate_s(bench.Row("consert", "bf16", 96)) == pytest.approx(40 + 300 * 96 / 713)
    assert bench.row_estimate_s(bench.Row("consert", "tf32", 96)) == pytest.approx(40 + 300 * 96 / 1108)  # fp32's
    assert session[0].estimate_s == pytest.approx(45 + sum(bench.row_estimate_s(row) for row in session[0].rows))
    assert bench.device_calls(plan) == [[1], [2], [3, 4]]
    smoke = bench.quick_plan(smoke=True)
    assert [(c.number, c.estimate_s, c.tests) for c in smoke] == [(c.number, c.estimate_s, c.tests) for c in plan]
    assert [row.name for row in smoke[1].rows] == ["consert-bf16-16", "bare-bf16-16", "sgopt-fp16-8"]


def test_the_readme_plan_table_is_the_plan() -> None:
    text = (REPO / "bench" / "README.md").read_text()
    plan = bench_gpu.quick_plan()
    for chunk in plan:
        if not chunk.later:
            rows = "`pytest -m gpu` (the GPU-marked tests)" if chunk.tests else chunk.label
            assert f"| {chunk.number} | {rows} | {chunk.estimate_s:,.0f} s |" in text
    later = [chunk for chunk in plan if chunk.later]
    assert (f"| {later[0].number}–{later[-1].number} | the other {sum(len(c.rows) for c in later)} rows, for a later "
            f"session (`--chunk K`) | {sum(c.estimate_s for c in later):,.0f} s |") in text
    assert "-d bench/out/gpu-carry/wheels datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19" in text
    assert "python3 -m bench.bench_gpu --quick --chunk $K --tokenizer $C/tokenizer --corpus $C/corpus.txt" in text


def test_the_results_file_survives_a_cut_line_and_says_what_is_done(tmp_path: Path) -> None:
    bench = bench_gpu
    results = tmp_path / "results.jsonl"
    bench.append_record(results, {"kind": "row", "row": "consert-bf16-96", "examples_per_s": 1600.0})
    with results.open("a") as handle:
        handle.write('{"kind": "row", "row": "bare-bf16-96", "exam')  # the call was killed mid-line
    bench.append_record(results, {"kind": "row", "row": "consert-fp16-96", "error": "exit 1: out of memory"})
    bench.append_record(results, {"kind": "row", "row": "consert-tf32-96", "skipped": "no --tf32"})
    bench.append_record(results, {"kind": "tests", "row": "tests-gpu", "returncode": 1, "summary": "1 failed"})
    records = bench.read_records(results)
    assert [record["row"] for record in records] == ["consert-bf16-96", "consert-fp16-96", "consert-tf32-96",
                                                     "tests-gpu"]
    assert bench.finished(records) == {"consert-bf16-96", "consert-fp16-96", "consert-tf32-96", "tests-gpu"}
    assert bench.finished(records, retry_failed=True) == {"consert-bf16-96", "consert-tf32-96"}


def test_quick_section_pairs_the_rows_of_one_card_across_chunks() -> None:
    bench = bench_gpu
    card = "NVIDIA H100 80GB HBM3"

    def run(chunk: int, started: str) -> dict[str, object]:
        return {"kind": "run", "chunk": chunk, "run_id": started, "card": card, "started": started,
                "versions": "torch 2.11.0", "steps": 300, "warmup_steps": 20, "sentadapt_flags": ["--tf32"],
                "peak_tflops": {"bf16": 780.0, "fp32": 51.0}}

    def row(chunk: int, name: str, rate: float) -> dict[str, object]:
        return {**_measured(name, rate, run_id=f"c{chunk}"), "kind": "row", "chunk": chunk, "card": card,
                "process_seconds": 70.0}

    records = [run(1, "2026-11-26 10:00 UTC"), row(1, "consert-bf16-96", 1600.0), row(1, "bare-bf16-96", 1500.0),
               {"kind": "chunk", "chunk": 1, "seconds": 351.0, "estimate_s": 392.0, "card": card},
               run(3, "2026-11-26 10:20 UTC"), row(3, "peer-bf16-96", 500.0), row(3, "eval-fp32-128", 3000.0),
               row(3, "eval-fp16-128", 6000.0),
               {"kind": "tests", "row": "tests-gpu", "chunk": 4,
                "command": "pytest -m gpu tests/train/test_gpu_training.py",
                "returncode": 0, "summary": "11 passed, 1 skipped in 84.20s", "seconds": 95.0, "card": card}]
    text = bench.quick_section(records, bench.quick_plan(), "results.jsonl")
    assert "| 1 | consert-bf16-96, consert-fp16-96, consert-tf32-96, bare-bf16-96, bare-fp16-96 | 392 s | " \
           "2 measured of 5 | 351 s |" in text
    assert "| 4 | `pytest -m gpu` | 120 s | 11 passed, 1 skipped in 84.20s (exit 0) | – |" in text
    assert text.count(f"**{card}** (chunks 1, 3, from 2026-11-26 10:00 UTC; torch 2.11.0)") == 1  # one run
    # chunk 1's ConSERT against chunk 3's peer: the same card
    assert "| consert-bf16-96 | sentadapt ConSERT | bf16 | 96 | 1,600 | 1.07× | 3.20× |" in text
    assert "| eval-fp16-128 | sentadapt eval (Encoder.encode) | fp16 | 128 | 6,000 | – | – | 2.00× |" in text
    assert "| eval fp16 faster than fp32 (Encoder.encode, batch 128) | 2.00× | yes |" in text
    assert "| consert-bf16-96 | 713 | 1,600 | 2.24× |" in text
    assert ("**The suite with CUDA** (`pytest -m gpu tests/train/test_gpu_training.py`) on NVIDIA H100 80GB HBM3: "
            "11 passed, 1 skipped in 84.20s, exit 0 (green).") in text


def _quick_smoke(tiny_model_dir: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("".join(f"the server {i} is down after the {i}th backup\n" for i in range(40)))
    return subprocess.run([sys.executable, "-m", "bench.bench_gpu", "--quick", "--smoke", "--tokenizer",
                           str(tiny_model_dir), "--corpus", str(corpus), "--work", str(tmp_path / "work"),
                           "--results", str(tmp_path / "results.jsonl"), "--readme", str(tmp_path / "README.md"),
                           *extra], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""})


def test_quick_smoke_runs_every_chunk_and_rewrites_the_readme_section(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Every session chunk on the CPU, one row each (--smoke-rows 1: 3 row processes + pytest, ~40-70 s)."""
    readme = tmp_path / "README.md"
    before = (REPO / "bench" / "README.md").read_text()
    readme.write_text(before)
    done = _quick_smoke(tiny_model_dir, tmp_path, "--smoke-rows", "1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = bench_gpu.read_records(tmp_path / "results.jsonl")
    measured = [r["row"] for r in records if r.get("kind") == "row" and r.get("examples_per_s", 0) > 0]
    assert measured == ["bare-bf16-8", "bare-bf16-16", "eval-fp32-128"]  # the cheapest row of each chunk
    skipped = {r["row"]: r["skipped"] for r in records if "skipped" in r}
    assert skipped == {"consert-fp16-8": "fp16 needs a CUDA GPU", "consert-tf32-8": "tf32 needs a CUDA GPU",
                       "bare-fp16-8": "fp16 needs a CUDA GPU", "sgopt-fp16-8": "fp16 needs a CUDA GPU",
                       "eval-fp16-128": "fp16 needs a CUDA GPU"}
    tests = [r for r in records if r.get("kind") == "tests"]
    assert len(tests) == 1 and tests[0]["returncode"] == 0 and "skipped" in tests[0]["summary"]
    assert [r["chunk"] for r in records if r.get("kind") == "chunk"] == [1, 2, 3, 4]
    begin, end = "<!-- generated: bench_gpu --quick -->", "<!-- end generated: bench_gpu --quick -->"
    after = readme.read_text()
    assert after[:after.index(begin)] == before[:before.index(begin)]  # only the section changed
    assert after[after.index(end):] == before[before.index(end):]
    section = after[after.index(begin):after.index(end)]
    assert "| 1 | consert-bf16-8, consert-fp16-8, consert-tf32-8, bare-bf16-8, bare-fp16-8 | 392 s | " \
           "1 measured, 3 skipped of 5 |" in section
    assert "| bare-bf16-16 | bare PyTorch loop | bf16 | 16 |" in section
    assert "**The suite with CUDA** (`pytest -m gpu tests/" in section
    assert (tmp_path / "results.md").read_text() in after


def test_quick_chunks_skip_what_the_results_file_holds(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A rerun after a timeout goes on where the file stops: here everything of chunks 1 and 4 is there."""
    results = tmp_path / "results.jsonl"
    for row in bench_gpu.quick_plan(smoke=True)[0].rows:
        bench_gpu.append_record(results, {**_measured(row.name, 10.0), "kind": "row", "chunk": 1, "card": "CPU"})
    bench_gpu.append_record(results, {"kind": "tests", "row": "tests-gpu", "chunk": 4, "returncode": 0,
                                      "summary": "12 skipped", "command": "pytest -m gpu", "card": "CPU"})
    (tmp_path / "README.md").write_text("# bench\n")
    done = _quick_smoke(tiny_model_dir, tmp_path, "--chunk", "1,4")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ("already recorded in " + str(results) + ", skipped: consert-bf16-8, consert-fp16-8, consert-tf32-8, "
            "bare-bf16-8, bare-fp16-8") in done.stdout
    assert f"already recorded in {results}: tests-gpu" in done.stdout
    kinds = [record["kind"] for record in bench_gpu.read_records(results)]
    assert kinds == ["row"] * 5 + ["tests", "chunk", "chunk"]  # no run started, nothing measured again
    assert "<!-- generated: bench_gpu --quick -->" in (tmp_path / "README.md").read_text()


def test_chunk_numbers_and_an_unknown_chunk() -> None:
    assert bench_gpu.chunk_numbers("3,4") == [3, 4] and bench_gpu.chunk_numbers("1") == [1]
    done = subprocess.run([sys.executable, "-m", "bench.bench_gpu", "--chunk", "99", "--smoke"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 1 and done.stderr.strip().endswith("--chunk: 99 is not in the plan (chunks 1 to 13)")


def test_a_compiling_row_gets_time_to_compile() -> None:
    row = bench_gpu.Row
    allowance = bench_gpu.COMPILE_ALLOWANCE_S
    assert bench_gpu.compile_allowance_s(row("consert_compiled", "bf16", 96), []) == allowance
    assert bench_gpu.compile_allowance_s(row("consert", "bf16", 96), ["compile=graphs"]) == allowance
    assert bench_gpu.compile_allowance_s(row("consert", "bf16", 96), ["compile=off"]) == 0.0
    assert bench_gpu.compile_allowance_s(row("bare", "bf16", 96), ["compile=on"]) == 0.0  # not a sentadapt row
    assert bench_gpu.compile_allowance_s(row("consert", "bf16", 96), ["pad_multiple=1"]) == 0.0


def test_the_compile_section_of_the_bench_readme_is_drawn_from_its_stored_outputs() -> None:
    from bench import gpu_compile_study
    from tools.doc_sections import markers

    begin, end = markers(gpu_compile_study.SECTION)
    text = gpu_compile_study.README.read_text(encoding="utf-8")
    stored = text[text.index(begin) + len(begin): text.index(end)].strip()
    assert stored == gpu_compile_study.render(), "stale: python -m bench.gpu_compile_study --write"


def test_a_rate_over_logged_intervals_is_their_examples_over_their_seconds(tmp_path: Path) -> None:
    from bench.gpu_compile_study import intervals, rate, seconds_to

    log = tmp_path / "train.log"
    log.write_text("\n".join(json.dumps({"step": step, "loss": 1.0, "examples_per_s": value}) for step, value in
                             [(1, 10.0), (10, 90.0), (20, 100.0), (30, 400.0)]) + "\n")
    spans = intervals(log, batch=10)
    assert spans == [(1, 1, 1.0), (2, 10, 1.0), (11, 20, 1.0), (21, 30, 0.25)]
    assert rate(spans, 10, batch=10) == pytest.approx(200 / 1.25)  # not the mean of 100 and 400
    assert seconds_to(spans, 20) == pytest.approx(3.0)


def test_the_compile_figures_quoted_in_the_docs_are_the_stored_study_s() -> None:
    """docs/usage.md and bench/README.md's reading quote the steady rates; they must be what the study draws."""
    from bench import gpu_compile_study

    rows = {(r["row"].label, r["row"].compile): r for r in gpu_compile_study.measured()}
    graphs, tf32 = rows[("ConSERT bf16, batch 96", "graphs")], rows[("ConSERT TF32, batch 96", "off")]
    usage = (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
    assert f"ran {graphs['steady']:,.0f} examples/s against {tf32['steady']:,.0f} for TF32" in " ".join(usage.split())
    readme = " ".join(gpu_compile_study.README.read_text(encoding="utf-8").split())
    assert f"bf16 with `compile=graphs` trains {graphs['steady']:,.0f} examples/s" in readme
    assert f"{graphs['steady'] / tf32['steady']:.2f}× TF32 without it" in readme
