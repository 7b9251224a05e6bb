"""The hostile-input list (docs/reliability.md, "Every failure leaves a way forward"): each input a new user can get
wrong, with the exact one-line message, the exit code, and — where a run directory is involved — proof that the
same command works again once the input is fixed, without --overwrite.

The sections follow issue 34: early stops and failures of `adapt`, outputs checked before the work, label columns,
folders without weights, the Python API's argument checks, honest summaries, help and 80-column tables."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_adapt

QUICK = ["--batch-size", "8", "--max-steps", "2", "--max-length", "16", "--dev", "none"]


def last_line(stderr: str) -> str:
    """The one line an error ends with (notes may come before it)."""
    return stderr.strip().splitlines()[-1]


# ---------------------------------------------------------------------- 1. a run stopped before it started

# Pauses `adapt` inside build_inputs (the models and the corpus loading), where a Ctrl-C finds no step to finish.
LOADING_DRIVER = r'''
import sys, time
from pathlib import Path
import sentadapt.run.inputs as inputs

marker = Path(sys.argv[1])


def build_inputs(*args, **kwargs):
    marker.write_text("loading")
    while True:
        time.sleep(0.01)


inputs.build_inputs = build_inputs
from sentadapt.cli import app
sys.argv = ["sentadapt", "adapt", *sys.argv[2:]]
app()
'''


def paused_while_loading(command: list[str], marker: Path) -> subprocess.Popen[str]:
    """`sentadapt adapt COMMAND` in a subprocess, returned once it is inside build_inputs (LOADING_DRIVER)."""
    process = subprocess.Popen([sys.executable, "-c", LOADING_DRIVER, str(marker), *command],
                               env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    while not marker.exists():
        if process.poll() is not None:
            pytest.fail(f"adapt ended (rc {process.returncode}) before loading:\n{process.stderr.read()}")
        time.sleep(0.02)
    return process


def test_ctrl_c_while_loading_prints_one_line_and_the_same_command_starts_again(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    command = [str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK]
    process = paused_while_loading(command, tmp_path / "loading.marker")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate()
    assert process.returncode == 130, stderr
    assert stderr.strip() == ("Error: interrupted before the first checkpoint (while loading); nothing to resume: "
                              "run the same command again (or add --resume auto) to start it over")
    assert not (run / ".lock").exists()

    again = run_adapt(*command)  # no --overwrite
    assert again.exit_code == 0, again.output
    assert (f"--output {run}: holds a run stopped before its first checkpoint; starting it again from the "
            "beginning") in again.stderr
    assert (run / "metrics.json").is_file()


def test_an_interrupt_swallowed_while_loading_still_stops_before_training(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt raised inside a finalizer is printed and ignored by Python (a CI run once lost Ctrl-C in
    a tokenizer's regex `__del__` and trained all 400 steps, exit 0): the signal is remembered and the run stops
    before its first step, with the loading stop's one line."""
    import sentadapt.run.inputs as inputs_module

    real = inputs_module.build_inputs

    def loading_that_swallows(*args, **kwargs):
        inputs = real(*args, **kwargs)
        with contextlib.suppress(KeyboardInterrupt):  # what a finalizer does with the interrupt its signal raised
            signal.raise_signal(signal.SIGINT)
        return inputs

    monkeypatch.setattr(inputs_module, "build_inputs", loading_that_swallows)
    run = tmp_path / "run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK)
    assert result.exit_code == 130, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: interrupted before the first checkpoint (while loading); nothing to resume: run the same command "
        "again (or add --resume auto) to start it over")
    assert not (run / "metrics.json").exists()


SENTADAPT = [sys.executable, "-m", "sentadapt"]  # what the console script runs: sentadapt/__main__.py


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (Linux: the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (signum - 1) & 1)


def stop_after(seconds: float, command: list[str], signum: int = signal.SIGINT) -> tuple[int | None, str]:
    """Start `command`, send `signum` after `seconds`; (exit code, stderr), or (None, "") when it finished first.
    The signal waits, past `seconds`, until sentadapt's stop handlers are installed (SIGTERM caught: Python itself
    catches only SIGINT): before `python -m sentadapt` runs its first line the interpreter is still starting (over
    a second on a loaded machine), and that window is Python's, not sentadapt's."""
    process = subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    deadline = time.monotonic() + 60
    while (sys.platform == "linux" and process.poll() is None and time.monotonic() < deadline
           and not catches(process.pid, signal.SIGTERM)):
        time.sleep(0.01)
    if process.poll() is not None:
        process.communicate()
        return None, ""
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


@pytest.mark.parametrize("seconds", [0.5, 1.0, 2.0, 3.0])
def test_ctrl_c_at_any_moment_of_adapt_is_one_line_and_exit_130_and_the_same_command_continues(
    seconds: float, tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    """0.5–2 s: Python is importing typer, rich, torch or transformers (a half-imported torch once turned the
    `finally:` of cli/adapt.py into a 300-line traceback); later, loading or training."""
    run = tmp_path / "run"
    command = [*SENTADAPT, "adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(run),
               "--batch-size", "8", "--max-length", "16", "--max-steps", "400", "--dev", "none",
               "--set", "checkpoint_every=50"]
    code, stderr = stop_after(seconds, command)
    assert code is not None, "adapt finished before the signal"
    lines = stderr.strip().splitlines()
    assert code == 130, stderr
    assert "Traceback" not in stderr and lines[-1].startswith("Error: interrupted"), stderr
    # the stop is one line; the run's own notes (the corpus read, the training line's acknowledgement) come before
    assert [line for line in lines if line.startswith("Error")] == lines[-1:], stderr
    assert all(not line.startswith(" ") for line in lines) and len(lines) <= 6, stderr
    again = run_adapt(*command[4:-2], "--max-steps", "2", "--resume", "auto")
    assert again.exit_code == 0, again.output


# A module that signals its own process while it is being imported, then keeps importing for 0.3 s.
SIGNALLED_IMPORT = "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(0.3)\nfinished = True\n"
AFTER_THE_IMPORT = r'''
import sys, time
from sentadapt.stopping import process as stop_signals
stop_signals.WAIT_AT_MOST_S = float(sys.argv[1])
stop_signals.stop_signals_raise()
try:
    import signalled_import
    time.sleep(5)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted;", "imported" if "signalled_import" in sys.modules else "half-imported",
          stop_signals.received_signal())
'''


@pytest.mark.parametrize(("wait_at_most", "expected"), [(10.0, "interrupted; imported 2"),
                                                        (0.1, "interrupted; half-imported 2")])
def test_a_stop_signal_during_an_import_waits_until_the_import_returns(wait_at_most: float, expected: str,
                                                                       tmp_path: Path) -> None:
    """A KeyboardInterrupt raised while torch.distributed's C++ initialiser runs Python aborted the process (exit -6,
    "terminate called after throwing an instance of 'pybind11::error_already_set'"): the signal is held until the
    import returns, then raised; an import still running after WAIT_AT_MOST_S is interrupted all the same."""
    (tmp_path / "signalled_import.py").write_text(SIGNALLED_IMPORT)
    paths = os.pathsep.join([str(Path(__file__).resolve().parents[2]), str(tmp_path)])
    result = subprocess.run([sys.executable, "-c", AFTER_THE_IMPORT, str(wait_at_most)], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": paths}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


IN_A_FINALIZER = r'''
import signal, time
from sentadapt.stopping import process as stop_signals
stop_signals.stop_signals_raise()


class Finalized:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)  # its handler runs here, where Python cannot raise


try:
    Finalized()
    time.sleep(5)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted", stop_signals.received_signal())
'''


def test_a_stop_signal_raised_inside_a_finalizer_is_raised_again_where_it_can_be(tmp_path: Path) -> None:
    """Python prints "Exception ignored in ..." and a traceback for a KeyboardInterrupt raised in a finalizer (a
    tokenizer's `__del__`, importlib's module-lock callback), then carries on: the signal is sent again instead."""
    paths = os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", IN_A_FINALIZER], cwd=tmp_path, env={**os.environ,
                            "PYTHONPATH": paths}, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout.strip(), result.stderr) == (0, f"interrupted {signal.SIGTERM}", "")


@pytest.mark.parametrize(("seconds", "signum"), [(0.5, signal.SIGTERM), (1.0, signal.SIGINT), (1.5, signal.SIGUSR1)])
def test_a_stop_signal_at_any_moment_of_eval_is_one_line(seconds: float, signum: int, tiny_model_dir: Path,
                                                         pairs_tsv: Path) -> None:
    code, stderr = stop_after(seconds, [*SENTADAPT, "eval", str(tiny_model_dir), "--pairs", str(pairs_tsv)], signum)
    if code is None:
        pytest.skip("eval finished before the signal on this machine")
    assert code == 128 + signum, stderr
    name = ("interrupted (Ctrl-C)" if signum == signal.SIGINT
            else f"stopped by {signal.Signals(signum).name} (exit code {128 + signum})")
    assert stderr.strip() == f"Error: {name} before the command finished; run it again"


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by its relative path, with its bytes: a run compared before and after."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def finished_run(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> Path:
    """A finished run (its model, metrics.json, a checkpoint) that an `--overwrite` run is about to replace."""
    run = tmp_path / "run"
    done = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK,
                     "--set", "checkpoint_every=1")
    assert done.exit_code == 0, done.output
    assert (run / "metrics.json").is_file() and (run / "checkpoints").is_dir()
    return run


PUT_BACK = "the new run stopped before its first checkpoint; the run it was to replace is back as it was"


def test_an_overwrite_whose_teacher_trails_leaves_the_finished_run_byte_identical(
    finished_run: Path, tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentadapt.evaluation.evaluator import Delta, Evaluator
    from tests.teacher.test_teacher import build_tiny_teacher

    teacher = build_tiny_teacher(tmp_path / "teacher")
    before = files_of(finished_run)
    monkeypatch.setattr(Evaluator, "compare_outputs", lambda self, a, b: Delta(-3.0, (-5.0, -1.0)))
    failed = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--teacher", str(teacher), "--output",
                       str(finished_run), "--dev", str(pairs_tsv), "--batch-size", "8", "--max-length", "16",
                       "--max-steps", "1", "--overwrite")
    assert failed.exit_code == 2, failed.output
    assert "it trails on these pairs; stopped before training" in last_line(failed.stderr)
    assert f"--output {finished_run}: {PUT_BACK}" in failed.stderr
    assert files_of(finished_run) == before
    assert not list(finished_run.parent.glob(".run.*"))  # nothing left beside it


def test_an_overwrite_with_a_bad_corpus_line_leaves_the_finished_run_byte_identical(
    finished_run: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    before = files_of(finished_run)
    bad = tmp_path / "bad.txt"  # the bad bytes are past the first batch check_has_sentences reads
    bad.write_bytes(b"".join(f"the disk {i} is full\n".encode() for i in range(3000)) + b"caf\xe9 ouvert\n")
    failed = run_adapt(str(bad), "--base", str(tiny_model_dir), "--output", str(finished_run), *QUICK, "--overwrite")
    assert failed.exit_code == 1, failed.output  # a DataError
    assert last_line(failed.stderr).startswith(f"Error: {bad}:3001: not valid UTF-8")
    assert files_of(finished_run) == before


def test_ctrl_c_before_the_first_checkpoint_of_an_overwrite_leaves_the_finished_run_byte_identical(
    finished_run: Path, tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    before = files_of(finished_run)
    command = [str(corpus), "--base", str(tiny_model_dir), "--output", str(finished_run), *QUICK, "--overwrite"]
    process = paused_while_loading(command, tmp_path / "loading.marker")
    assert not (finished_run / "metrics.json").exists()  # the new run is in the folder, the old one aside
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate()
    assert process.returncode == 130, stderr
    assert f"--output {finished_run}: {PUT_BACK}" in stderr
    assert files_of(finished_run) == before


def test_a_killed_overwrite_is_undone_by_the_next_command(finished_run: Path, tiny_model_dir: Path, corpus: Path,
                                                          tmp_path: Path) -> None:
    """SIGKILL leaves the earlier run set aside: the next `adapt` into the folder puts it back first."""
    from sentadapt.run.execute import Replacement

    before = files_of(finished_run)
    Replacement.set_aside(finished_run)  # as a killed --overwrite run leaves it: set aside, never settled
    finished_run.mkdir()
    (finished_run / "config.yaml").write_text("recipe: consert\n")
    again = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(finished_run), *QUICK,
                      "--resume", "auto")
    assert again.exit_code == 0, again.output
    assert (f"--output {finished_run}: put back the run that an interrupted --overwrite run had set aside in "
            f"{tmp_path / '.run.replaced'}") in again.stderr
    assert f"--resume auto: {finished_run} is a finished run" in again.stderr
    assert files_of(finished_run) == before


def test_an_overwrite_replaces_the_run_once_it_has_finished(finished_run: Path, tiny_model_dir: Path,
                                                                corpus: Path) -> None:
    old_metrics = (finished_run / "metrics.json").read_bytes()
    replaced = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(finished_run), *QUICK,
                         "--set", "seed=7", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert (finished_run / "metrics.json").read_bytes() != old_metrics
    assert not list(finished_run.parent.glob(".run.*"))


def test_resume_auto_and_resume_restart_a_run_stopped_before_its_first_checkpoint(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    failed = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK,
                       "--lora", "targets=nosuch")
    assert failed.exit_code == 2
    auto = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK, "--resume", "auto")
    assert auto.exit_code == 0, auto.output
    assert f"--resume auto: {run} holds no checkpoint yet; starting the run again from the beginning" in auto.stderr

    second = tmp_path / "second"
    (second / "checkpoints").mkdir(parents=True)  # made, but nothing written into it yet
    (second / "config.yaml").write_text((run / "config.yaml").read_text().replace(str(run), str(second)))
    resumed = run_adapt("--resume", "--output", str(second))
    assert resumed.exit_code == 0, resumed.output
    assert (f"--output {second}: holds a run stopped before its first checkpoint; starting it again from the "
            "beginning with its saved config.yaml") in resumed.stderr


def test_an_empty_corpus_is_refused_before_anything_is_written(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus, run = tmp_path / "corpus.txt", tmp_path / "run"
    corpus.write_text("\n  \n")
    command = [str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK]
    result = run_adapt(*command)
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: {corpus}: no sentences (2 lines read: 2 blank); pass text with one "
                                     "sentence per line")
    assert not run.exists()
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(40)))
    assert run_adapt(*command).exit_code == 0


def test_a_lora_target_that_matches_nothing_fails_before_the_corpus_and_the_base_score(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sentadapt.run.inputs as inputs

    read: list[str] = []
    real_training_data = inputs.training_data
    monkeypatch.setattr(inputs, "training_data", lambda *a, **k: read.append("corpus") or real_training_data(*a, **k))
    run = tmp_path / "run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK,
                       "--lora", "targets=nosuch")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("Error: lora_targets: 'nosuch' matches no linear layer of this bert model; use "
                                     "attention, all-linear or names joined by '+' from: dense, key, query, value")
    assert read == []  # the corpus was never read, so the base was never scored either
    fixed = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK,
                      "--lora", "targets=query")
    assert fixed.exit_code == 0, fixed.output


def test_a_teacher_folder_without_weights_is_refused_before_anything_is_written(
    tiny_model_dir: Path, tiny_model_dir_3layers: Path, corpus: Path, tmp_path: Path
) -> None:
    empty_teacher, run = tmp_path / "teacher", tmp_path / "run"
    empty_teacher.mkdir()
    (empty_teacher / "config.json").write_text((tiny_model_dir_3layers / "config.json").read_text())
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK,
                       "--teacher", str(empty_teacher))
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: --teacher {empty_teacher}: holds no model weights (no "
                                     "model.safetensors or pytorch_model.bin); pass the folder the model was saved "
                                     "to, with its weight files")
    assert not run.exists()
    for name in os.listdir(tiny_model_dir_3layers):  # the weights arrive: the same command now trains
        (empty_teacher / name).write_bytes((tiny_model_dir_3layers / name).read_bytes())
    assert run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK,
                     "--teacher", str(empty_teacher)).exit_code == 0


# ---------------------------------------------------------------------- 2. outputs checked before the work


def run_cli(*args: str):
    from typer.testing import CliRunner

    from sentadapt.cli import app

    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize("command", ["eval", "diagnose"])
def test_a_json_path_that_is_a_folder_is_refused_before_any_model_loads(
    command: str, tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentadapt.model.encoder import Encoder

    monkeypatch.setattr(Encoder, "load", lambda *a, **k: pytest.fail("a model loaded before --json was checked"))
    folder = tmp_path / "emptydir"
    folder.mkdir()
    result = run_cli(command, str(tiny_model_dir), "--pairs", str(pairs_tsv), "--json", str(folder))
    assert result.exit_code == 2
    example = folder / f"{command}.json"
    assert result.stderr.strip() == f"Error: --json {folder}: is a directory; pass a file name, e.g. {example}"
    monkeypatch.undo()  # the next step the line gives works
    extra = ["--report", "anisotropy"] if command == "diagnose" else ["--bootstrap", "0"]
    again = run_cli(command, str(tiny_model_dir), "--pairs", str(pairs_tsv), "--json", str(example), *extra)
    assert again.exit_code == 0, again.output
    assert example.is_file()


def test_a_json_path_below_a_file_and_a_plot_folder_that_is_a_file_are_refused(
    tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    below = run_cli("eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--json", str(pairs_tsv / "r.json"))
    assert below.exit_code == 2
    assert below.stderr.strip() == f"Error: --json {pairs_tsv / 'r.json'}: {pairs_tsv} is a file, not a directory"
    plot = run_cli("diagnose", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--plot", str(pairs_tsv))
    assert plot.exit_code == 2
    assert plot.stderr.strip() == f"Error: --plot {pairs_tsv}: is a file; pass a folder (made if missing)"


def disk_full(*_args: object, **_kwargs: object) -> None:
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("command", ["eval", "diagnose"])
def test_a_json_write_that_fails_at_the_end_prints_the_results_then_one_line(
    command: str, tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentadapt.diagnostics.analysis import DiagnoseResult
    from sentadapt.evaluation.evaluate import EvalResult

    monkeypatch.setattr(EvalResult if command == "eval" else DiagnoseResult, "write_json", disk_full)
    out = tmp_path / "out.json"
    extra = ["--report", "anisotropy"] if command == "diagnose" else []
    result = run_cli(command, str(tiny_model_dir), "--pairs", str(pairs_tsv), "--json", str(out), *extra)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert ("pairs.tsv" if command == "eval" else "anisotropy") in result.stdout  # the results came first
    assert last_line(result.stderr) == (f"Error: --json {out}: could not be written (No space left on device); the "
                                        "results are complete but not saved there; run again with another --json")


def test_the_api_keeps_the_result_when_its_json_cannot_be_written(
    tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sentadapt
    from sentadapt.errors import ResultNotWritten
    from sentadapt.evaluation.evaluate import EvalResult

    monkeypatch.setattr(EvalResult, "write_json", disk_full)
    with pytest.raises(ResultNotWritten) as caught:
        sentadapt.evaluate([tiny_model_dir], pairs=[pairs_tsv], json_out=tmp_path / "r.json", bootstrap=0)
    assert isinstance(caught.value.result, EvalResult)


def test_pairs_output_in_a_folder_that_cannot_be_made_is_refused_before_loading(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    target = corpus / "to-label.tsv"
    result = run_cli("pairs", str(corpus), "--base", str(tiny_model_dir), "-n", "4", "--output", str(target))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: --output {target}: {corpus} is a file, not a directory"


# ---------------------------------------------------------------------- 3. label columns: one rule


def labelled(path: Path, labels: list[str]) -> Path:
    """A pairs file with a 'label' column: the header is line 1, the first pair line 2."""
    rows = "".join(f"sentence {i} a\tsentence {i} b\t{label}\n" for i, label in enumerate(labels))
    path.write_text("sentence1\tsentence2\tlabel\n" + rows)
    return path


GRADED_THEN_YES = ["0", "0", "0", "1", "2.5", "2.5", "0.5", "0", "yes"]  # 'yes' is on line 10


def test_eval_blames_the_row_that_breaks_the_label_rule_not_a_valid_graded_one(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    path = labelled(tmp_path / "dev.tsv", GRADED_THEN_YES)
    result = run_cli("eval", str(tiny_model_dir), "--pairs", str(path))
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: {path}:10: label 'yes' is not a number; label each pair 1 = same "
                                     "meaning, 0 = different, or a similarity score such as 0-5")


def test_adapt_dev_applies_the_same_label_rule_before_anything_is_written(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    path = labelled(tmp_path / "dev.tsv", GRADED_THEN_YES)
    run = tmp_path / "run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), *QUICK[:-2],
                       "--dev", str(path))
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: {path}:10: label 'yes' is not a number; label each pair 1 = same "
                                     "meaning, 0 = different, or a similarity score such as 0-5")
    assert not run.exists()


@pytest.mark.parametrize(("labels", "kind"), [(["0", "1", "1", "0"], "pair-classification"),
                                              (["0", "2.5", "5", "1"], "sts")])
def test_a_label_column_is_0_1_or_graded_by_one_rule(labels: list[str], kind: str, tmp_path: Path) -> None:
    from sentadapt.evaluation.task_types import detect_task_type

    assert detect_task_type(labelled(tmp_path / "pairs.tsv", labels)) == kind


@pytest.mark.parametrize("command", ["eval", "adapt"])
def test_a_0_1_label_file_with_one_typo_is_an_error_naming_its_row_not_a_scored_file(
    command: str, tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    path = labelled(tmp_path / "dev.tsv", ["0", "1"] * 10 + ["11"] + ["1", "0"] * 5)  # '11' is on line 22
    if command == "eval":
        result = run_cli("eval", str(tiny_model_dir), "--pairs", str(path))
    else:
        result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                           *QUICK[:-2], "--dev", str(path))
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (f"Error: {path}:22: label '11' is not 0 or 1, but 30 of the 31 labels are; fix "
                                     "it (1 = same meaning, 0 = different), or give every pair a similarity score "
                                     "(such as 0-5)")
    assert not (tmp_path / "run").exists()


def test_the_pairs_file_header_states_the_same_rule() -> None:
    from sentadapt.data.pair_files import LABEL_RULE

    assert LABEL_RULE == "1 = same meaning, 0 = different, or a similarity score such as 0-5"


# ---------------------------------------------------------------------- 5. the Python API's arguments


def api_error(call) -> str:
    """The ConfigError a call raises before any work (its one-line message)."""
    from sentadapt.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        call()
    assert caught.value.exit_code == 2
    return str(caught.value)


def test_adapt_refuses_wrong_types_with_the_options_name(corpus: Path, tmp_path: Path) -> None:
    import sentadapt

    out = tmp_path / "run"
    assert api_error(lambda: sentadapt.adapt(123, output=out)) == (
        "Invalid value for 'CORPUS': expected a path or a list of paths, got int 123")
    assert api_error(lambda: sentadapt.adapt(corpus, output=out, lora=4)) == (
        "Invalid value for '--lora': expected a string, got int 4")
    assert api_error(lambda: sentadapt.adapt(corpus, output=out, max_steps="10")) == (
        "Invalid value for '--max-steps': expected a whole number, got str '10'")
    assert api_error(lambda: sentadapt.adapt(corpus, output=out, set_options="temperature=0.05", max_steps=1,
                                             dry_run=True, batch_size=1)) == (
        "batch_size: 1 is out of range; valid: [2, inf] (contrastive training needs at least 2 sentences per batch "
        "for in-batch negatives)")  # a lone --set string is one item (the range check then runs, as on the CLI)
    assert not out.exists()


def test_evaluate_takes_a_lone_path_as_one_file_and_refuses_wrong_types(tiny_model_dir: Path, pairs_tsv: Path,
                                                                        ) -> None:
    import sentadapt

    result = sentadapt.evaluate(tiny_model_dir, pairs=str(pairs_tsv), bootstrap=0)  # not read letter by letter
    assert [evaluator.title.split(" — ")[0] for evaluator in result.evaluators] == ["pairs.tsv"]
    assert api_error(lambda: sentadapt.evaluate([tiny_model_dir], pairs=[pairs_tsv], batch_size="8")) == (
        "Invalid value for '--batch-size': expected a whole number, got str '8'")
    assert api_error(lambda: sentadapt.evaluate(42, pairs=[pairs_tsv])) == (
        "Invalid value for 'MODELS': expected a path or a list of paths, got int 42")
    assert api_error(lambda: sentadapt.evaluate([tiny_model_dir], pairs=[pairs_tsv], bootstrap=-1)) == (
        "Invalid value for '--bootstrap': Input should be greater than or equal to 0")  # the CLI's own line


def test_propose_pairs_refuses_a_count_given_as_text(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    import sentadapt

    out = tmp_path / "to-label.tsv"
    assert api_error(lambda: sentadapt.propose_pairs([corpus], str(tiny_model_dir), "5", out)) == (
        "Invalid value for '-n': expected a whole number, got str '5'")
    assert api_error(lambda: sentadapt.propose_pairs([corpus], str(tiny_model_dir), 0, out)) == (
        "-n 0: must be ≥ 1 (the number of pairs to propose)")
    written = sentadapt.propose_pairs(str(corpus), str(tiny_model_dir), 4, str(out))  # a lone path, a str output
    assert len(written) == 4 and out.is_file()


def test_diagnose_refuses_wrong_types(tiny_model_dir: Path) -> None:
    import sentadapt

    assert api_error(lambda: sentadapt.diagnose(tiny_model_dir, sample=1.5)) == (
        "Invalid value for '--sample': expected a whole number, got float 1.5")
    assert api_error(lambda: sentadapt.diagnose(tiny_model_dir, report=3)) == (
        "Invalid value for '--report': expected a string or a list of strings, got int 3")
    assert api_error(lambda: sentadapt.diagnose(tiny_model_dir, max_k=0)) == (
        "Invalid value for '--max-k': Input should be greater than or equal to 1")


def test_export_refuses_wrong_types(tiny_model_dir: Path, tmp_path: Path) -> None:
    import sentadapt

    assert api_error(lambda: sentadapt.export(tiny_model_dir, 5)) == (
        "Invalid value for 'OUTPUT': expected a path, got int 5")
    assert api_error(lambda: sentadapt.export(tiny_model_dir, tmp_path / "out", normalize="yes")) == (
        "Invalid value for '--normalize': expected True or False, got str 'yes'")


# ---------------------------------------------------------------------- 4. a model folder without weights


@pytest.mark.parametrize("allow_pickle", [[], ["--allow-pickle"]], ids=["plain", "allow-pickle"])
def test_a_model_folder_without_weights_says_so_not_allow_pickle(
    allow_pickle: list[str], tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "only-config"
    folder.mkdir()
    (folder / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    result = run_cli("eval", str(folder), "--pairs", str(pairs_tsv), *allow_pickle)
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"Error: {folder}: holds no model weights (no model.safetensors or "
                                     "pytorch_model.bin); pass the folder the model was saved to, with its weight "
                                     "files")


def test_adapt_with_a_weightless_base_writes_nothing(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    folder, run = tmp_path / "only-config", tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    result = run_adapt(str(corpus), "--base", str(folder), "--output", str(run), *QUICK)
    assert result.exit_code == 1
    assert last_line(result.stderr).startswith(f"Error: {folder}: holds no model weights")
    assert not run.exists()


# ---------------------------------------------------------------------- 6. the summary says what ran


def test_the_summary_reports_the_effective_lr_every_changed_setting_lora_prompt_and_paths_as_given(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sentadapt

    monkeypatch.chdir(tmp_path)
    corpus_name = os.path.relpath(corpus, tmp_path)
    base = os.path.relpath(tiny_model_dir, tmp_path)
    result = sentadapt.adapt(corpus_name, base=base, output="run", max_steps=2, batch_size=8, max_length=16,
                             dev="none", lr=5e-4, lora="r=4", set_options=["temperature=0.05"])
    rows = {row.cells[0].text: row.cells[1].text for row in result.summary.rows}
    assert rows["base model"] == base and rows["corpus"] == corpus_name  # as typed, not resolved
    assert rows["lr"] == "0.0005 (peak; linear decay after 10% warm-up)"
    assert rows["settings"] == "max_steps 2, batch_size 8, lr 0.0005, max_length 16, temperature 0.05"
    assert rows["LoRA"] == ("r 4, alpha 8, dropout 0, targets attention; the base frozen, the saved model merged")
    assert "prompt" not in rows and "teacher" not in rows  # none used


def test_result_objects_print_their_intervals_rounded(tiny_model_dir: Path, pairs_tsv: Path) -> None:
    import sentadapt
    from sentadapt.run.dispatch import AdaptResult

    evaluated = sentadapt.evaluate([tiny_model_dir, tiny_model_dir], pairs=[pairs_tsv], bootstrap=50)
    text = repr(evaluated)
    assert text.splitlines()[0] == f"EvalResult(models={[str(tiny_model_dir)] * 2!r}, bootstrap=50, seed=0)"
    assert all(len(number.split(".")[1]) == 2 for number in re.findall(r"-?\d+\.\d+", text))
    metrics = {"base_score": 76.04246427235717, "best_score": 76.5393407628246, "best_step": 4,
               "dev_change": 0.4968764904674, "dev_change_ci": [0.009928761508870228, 1.9688996976445496]}
    adapted = AdaptResult(Path("runs/x"), "trained", "use-adapted", "the reason", "risk", 0.0123456, metrics, ())
    assert repr(adapted) == ("AdaptResult(output='runs/x', status='trained', decision='use-adapted', rule='risk', "
                             "risk=0.012, dev='base 76.04, best 76.54 at step 4, Δ +0.50 [+0.01, +1.97]', "
                             "reason='the reason')")


# ---------------------------------------------------------------------- 7. help, and tables at 80 columns


def test_every_option_of_every_command_has_help() -> None:
    import typer.main

    from sentadapt.cli import app

    def options(command, path: str):
        for name, sub in getattr(command, "commands", {}).items():
            yield from options(sub, f"{path} {name}".strip())
        for param in command.params:
            if param.param_type_name == "option":
                yield path, param

    missing = [f"{path} {'/'.join(param.opts)}" for path, param in options(typer.main.get_command(app), "")
               if not (param.help or "").strip()]
    assert missing == []


def test_adapt_help_leaves_its_descriptions_room_at_80_columns() -> None:
    result = run_cli_env({"COLUMNS": "80", "TERMINAL_WIDTH": "80"}, "adapt", "--help")
    recipe = next(line for line in result.stdout.splitlines() if "--recipe " in line)
    assert len(recipe) - recipe.index("consert") - 2 >= 33  # the description column (was 23 characters)


def run_cli_env(env: dict[str, str], *args: str):
    from typer.testing import CliRunner

    from sentadapt.cli import app

    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from sentadapt.cli import _common

    monkeypatch.setattr(_common.console, "_width", 80)


def test_eval_of_two_long_paths_prints_every_number_whole_at_80_columns(
    long_paths: list[Path], pairs_tsv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    at_80_columns(monkeypatch)
    out = tmp_path / "r.json"
    result = run_cli("eval", *map(str, long_paths), "--pairs", str(pairs_tsv), "--json", str(out))
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    second = json.loads(out.read_text())[1]
    delta = second["delta_vs_first"][0]["tasks"]["pairs.tsv"]["spearman"]
    for number in (second["reports"][0]["tasks"]["pairs.tsv"]["spearman"], *delta["ci"]):
        assert f"{number:.2f}".lstrip("-") in result.stdout
    assert f"{delta['delta']:+.2f}" in result.stdout
    numbers = re.findall(r"[-+]?\d+\.\d+…|…\d", result.stdout)
    assert numbers == []  # no number was cut


def test_diagnose_compare_prints_every_number_whole_at_80_columns(
    long_paths: list[Path], pairs_tsv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_80_columns(monkeypatch)
    result = run_cli("diagnose", str(long_paths[0]), "--compare", str(long_paths[1]), "--pairs", str(pairs_tsv),
                     "--report", "anisotropy,spectrum")
    assert result.exit_code == 0, result.output
    assert re.findall(r"[-+]?\d+\.\d*…|…\d", result.stdout) == []  # no number was cut
    table = result.stdout.split("\n  ")[0]  # the summary, before the verdicts
    assert all(len(line) <= 80 for line in table.splitlines())
    assert re.findall(r"[-+]\d\.\d{3}", table)  # the Δ column's values, whole


def _auto_record(rule: str) -> dict:
    """An auto run's metrics.json (run/auto/choice.py's record) with two long-named candidates, as the rule decided."""
    rows = [{"name": "consert-temperature=0.05-batch_size=64", "dev_score": 80.12, "dev_change": 1.5,
             "dev_change_ci": [0.4, 2.61], "dev_change_adjusted_ci": [0.1, 2.9], "risk": 0.031, "steps": 500,
             "best_step": 400, "seconds": 3723.0, "failed": None},
            {"name": "sg-opt-lr=1e-05", "dev_score": 78.0, "dev_change": -0.62, "dev_change_ci": [-1.8, 0.55],
             "dev_change_adjusted_ci": [-2.1, 0.8], "risk": None, "steps": 500, "best_step": 100, "seconds": 61.0,
             "failed": None}]
    confidence = 0.975 if rule == "strict" else 0.969
    return {"candidates": rows, "chosen": rows[0]["name"], "dev": "my-domain-dev-pairs.tsv", "base_score": 78.62,
            "decision_rule": rule, "risk_limit": 0.2, "adjustment": {"confidence": confidence}}


@pytest.mark.parametrize(("rule", "column", "cells"), [
    ("risk", "risk", ["0.031", "untested"]),
    ("strict", "97.50 % CI", ["[+0.10, +2.90]", "[-2.10, +0.80]"]),
])
def test_the_auto_summary_names_its_columns_after_the_rule_and_keeps_every_number_at_80_columns(
    rule: str, column: str, cells: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from sentadapt.cli._common import draw
    from sentadapt.run.summary import auto_table

    table = auto_table(_auto_record(rule))
    assert [c.header for c in table.columns] == ["candidate", "dev", "Δ, 95 % CI", column, "step", "time"]
    assert [row.cells[3].text for row in table.rows] == cells
    assert ("Bonferroni" in table.title) == (rule == "strict")
    assert ("fixed sequence" in table.title and "risk ≤ the first look's share of --risk 0.2" in table.title) == (
        rule == "risk")
    console = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(draw(table, width=80))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for value in ["80.12", "+1.50", "[+0.40, +2.61]", *cells, "01:02:03", "400"]:
        assert value in text, value


def test_a_teacher_run_logged_to_a_file_says_something_at_least_every_interval(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    """stderr is a file: no progress bar is drawn, so the heartbeat (every SENTADAPT_HEARTBEAT_S, 20 s by default)
    prints the training line or the count of the work under way. Lines are timed as they arrive."""
    from tests.teacher.test_teacher import build_tiny_teacher

    teacher = build_tiny_teacher(tmp_path / "teacher")
    command = [*SENTADAPT, "adapt", str(corpus), "--base", str(tiny_model_dir), "--teacher", str(teacher),
               "--output", str(tmp_path / "run"), "--batch-size", "8", "--max-length", "16", "--max-steps", "60",
               "--dev", "none"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SENTADAPT_HEARTBEAT_S": "0.25"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    arrivals, lines = [time.monotonic()], []
    for line in process.stderr:
        arrivals.append(time.monotonic())
        lines.append(line.rstrip("\n"))
    assert process.wait() == 0, "\n".join(lines)
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert max(gaps) < 3.0, (max(gaps), lines)  # 0.25 s beats; slack for a loaded machine's import time
    assert any(re.fullmatch(r"step \d+/60  loss \d\.\d{4}.*ETA \d:\d\d:\d\d", line) for line in lines), lines
