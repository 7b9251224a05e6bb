"""Fault injection: a real `sentadapt adapt` subprocess is killed (SIGKILL), interrupted (SIGINT) or refused
writes by the kernel (RLIMIT_FSIZE → EFBIG) at a known step; checkpoints are truncated and corrupted; a full
disk (ENOSPC) is simulated in-process; NaN/inf losses and gradients are injected. Every run that is resumed
must end bit-for-bit (within float noise) where an uninterrupted run ends: nothing is lost. Every run of such a
comparison trains on the same device (CUDA where torch sees one, else the CPU), and losses and weights are compared
within FLOAT32_RTOL and atol 1e-5, not bit for bit: the subprocesses use one CPU thread where pytest may use more
(another reduction order), and CUDA kernels that accumulate with atomics need not repeat their last bit.

The subprocess is paused at a known point by a small driver (DRIVER below) that wraps one function of the
training loop, so the tests wait for a marker file instead of sleeping: no timed assertions.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sentadapt.storage.durable import verify_folder
from sentadapt.storage.run_folder import list_checkpoints
from tests.conftest import FLOAT32_RTOL, poison, run_adapt

COMMON = ["--batch-size", "8", "--max-steps", "10", "--max-length", "16", "--dev", "none", "--checkpoint-every", "1",
          "--eval-every", "0", "--set", "log_every=1", "--set", "keep_checkpoints=2"]
RESUME_HINT = "resume with: sentadapt adapt --resume --output {run}"

# argv: MODE STEP MARKER ADAPT-ARGS...; pauses (writes MARKER, waits for MARKER.go) at a known point, or from
# step STEP on lets no file grow past 20 KB so the kernel fails the next checkpoint's writes with EFBIG.
DRIVER = r'''
import sys, time
from pathlib import Path
import sentadapt.train.checkpoint as checkpoint
import sentadapt.train.tracking as tracking

mode, step, marker = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])


def pause():
    marker.write_text("paused")
    while not marker.with_suffix(".go").exists():
        time.sleep(0.01)


real_save_file, real_log = checkpoint.save_file, tracking.RunRecords.log


def save_file(state, filename, *args, **kwargs):  # inside checkpoint STEP's write: weights written, no manifest
    real_save_file(state, filename, *args, **kwargs)
    if mode == "pause-in-checkpoint" and f"step-{step:07d}" in filename:
        pause()


def log(self, record):  # after step STEP is logged, before its interrupt check and checkpoint
    real_log(self, record)
    if record.get("step") == step and "loss" in record:
        if mode == "pause-after-log":
            pause()
        elif mode == "file-size-limit":
            import resource, signal
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us instead of failing the write
            resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, resource.RLIM_INFINITY))


checkpoint.save_file, tracking.RunRecords.log = save_file, log

import sentadapt.stopping.training as stopping
import sentadapt.train.guard as guard

real_update, real_handle, updates = guard.GuardedUpdate.__call__, stopping.StopRequest._handle, []


def update(self, loss):  # mid-step STEP: its forward and backward done, its optimizer step not taken
    updates.append(1)
    if mode == "pause-in-step" and len(updates) == step:
        pause()
    return real_update(self, loss)


def handle(self, signum, frame):  # count the signals the loop's handler took, so a test sends the next after it
    counted = marker.with_suffix(".signals")
    counted.write_text(str(int(counted.read_text()) + 1 if counted.exists() else 1))
    return real_handle(self, signum, frame)


guard.GuardedUpdate.__call__, stopping.StopRequest._handle = update, handle
from sentadapt.cli import app
sys.argv = ["sentadapt", "adapt", *sys.argv[4:]]
app()
'''


@pytest.fixture(scope="module")
def fault_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fault-corpus") / "corpus.txt"
    path.write_text("".join(f"the server {i} is down\n" for i in range(40)))
    return path


@pytest.fixture(scope="module")
def straight(tiny_model_dir: Path, fault_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run every resumed run must reproduce."""
    output = tmp_path_factory.mktemp("straight") / "run"
    result = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(output), *COMMON)
    assert result.exit_code == 0, result.output
    return output


def start(mode: str, step: int, run: Path, model: Path, corpus: Path, *extra: str,
          ) -> tuple[subprocess.Popen[str], Path]:
    marker = run.parent / f"{run.name}.marker"
    # CUDA stays visible: the run must train on the device of the in-process runs it is compared with (`straight`,
    # the resumes). Hidden, a GPU machine ran the faulted steps on the CPU (its dropout masks come from the CPU
    # generator) against a straight run on CUDA (the CUDA generator): another step-1 loss, 2.771 vs 2.968.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", DRIVER, mode, str(step), str(marker), str(corpus), "--base", str(model),
         "--output", str(run), *COMMON, *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return process, marker


def wait_for_pause(process: subprocess.Popen[str], marker: Path) -> None:
    """Poll for the driver's marker; a process that exits first failed to reach the fault point."""
    while not marker.exists():
        if process.poll() is not None:
            pytest.fail(f"the run ended (rc {process.returncode}) before the fault point:\n{process.stderr.read()}")
        time.sleep(0.02)


def losses(run: Path) -> dict[int, tuple[float, float]]:
    """step → (loss, lr) from train.log; a step logged twice would be a resume that did not trim the log."""
    records = [json.loads(line) for line in (run / "train.log").read_text().splitlines()]
    steps = [r["step"] for r in records if "loss" in r]
    assert len(steps) == len(set(steps)), steps
    return {r["step"]: (r["loss"], r["lr"]) for r in records if "loss" in r}


def assert_same_as_straight(run: Path, straight: Path) -> None:
    ours, reference = losses(run), losses(straight)
    assert sorted(ours) == list(range(1, 11))
    for step in reference:
        assert ours[step] == pytest.approx(reference[step], rel=FLOAT32_RTOL), step  # (loss, lr)
    mine, theirs = load_file(str(run / "model.safetensors")), load_file(str(straight / "model.safetensors"))
    assert mine.keys() == theirs.keys()
    for name in mine:
        torch.testing.assert_close(mine[name], theirs[name], atol=1e-5, rtol=0)
    assert json.loads((run / "metrics.json").read_text())["steps"] == 10
    assert not (run / ".lock").exists()


def leftovers(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob(".tmp-*")) + sorted(
        str(p.relative_to(run)) for p in run.rglob(".old-*"))


# ---------------------------------------------------------------------------------------- real subprocesses


def test_kill_9_inside_a_checkpoint_write_then_resume_loses_nothing(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process, marker = start("pause-in-checkpoint", 6, run, tiny_model_dir, fault_corpus)
    wait_for_pause(process, marker)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL

    # What a kill -9 leaves: two complete checkpoints, a half-written one under a temporary name, a stale lock.
    checkpoints = run / "checkpoints"
    assert [p.name for p in list_checkpoints(checkpoints)] == ["step-0000005", "step-0000004"]
    half_written = next(checkpoints.glob(".tmp-step-0000006-*"))
    assert (half_written / "model.safetensors").is_file() and not (half_written / "manifest.json").exists()
    assert (run / ".lock").read_text() == str(process.pid)
    assert not (run / "metrics.json").exists() and not (run / "modules.json").exists()
    # ...and the newest complete checkpoint truncated on top (a disk that lost its last writes).
    newest_weights = checkpoints / "step-0000005" / "model.safetensors"
    newest_weights.write_bytes(newest_weights.read_bytes()[:1000])

    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    assert (f"--output {run}: taking over a stale lock (pid {process.pid} is not running; that run was killed)"
            in resumed.stderr)
    assert f"removed {half_written}, left by an interrupted write" in resumed.stderr
    assert f"skipping checkpoint: {newest_weights}: checksum mismatch (truncated or corrupted)" in resumed.stderr
    assert f"resumed from {checkpoints / 'step-0000004'} (step 4)" in resumed.stderr
    assert_same_as_straight(run, straight)
    assert leftovers(run) == []


def test_ctrl_c_checkpoints_exits_130_and_resumes_exactly(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process, marker = start("pause-after-log", 6, run, tiny_model_dir, fault_corpus)
    wait_for_pause(process, marker)
    process.send_signal(signal.SIGINT)  # the handler only sets a flag (it runs before the paused step goes on)
    marker.with_suffix(".go").write_text("go")
    _, stderr = process.communicate()
    assert process.returncode == 130, stderr
    checkpoint = run / "checkpoints" / "step-0000006"
    assert "interrupt: finishing this step, then writing a checkpoint (Ctrl-C again to stop at once)" in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"Error: interrupted at step 6; checkpoint saved to {checkpoint}; " + RESUME_HINT.format(run=run))
    verify_folder(checkpoint)
    assert not (run / ".lock").exists()

    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    assert f"resumed from {checkpoint} (step 6)" in resumed.stderr
    assert_same_as_straight(run, straight)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_preemption_signal_checkpoints_exits_128_plus_n_and_the_same_command_resumes_exactly(
    signum: int, tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path
) -> None:
    """What SLURM (--signal, preemption) and Kubernetes (pod deletion) do: SIGTERM or SIGUSR1 to a real run,
    then the requeued job reruns the very same command with --resume auto."""
    run = tmp_path / "run"
    process, marker = start("pause-after-log", 6, run, tiny_model_dir, fault_corpus, "--resume", "auto")
    wait_for_pause(process, marker)
    process.send_signal(signum)
    marker.with_suffix(".go").write_text("go")
    _, stderr = process.communicate()
    assert process.returncode == 128 + signum, stderr
    checkpoint = run / "checkpoints" / "step-0000006"
    name = signal.Signals(signum).name
    assert f"{name} received: finishing this step, then writing a checkpoint (a second signal stops at once)" in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"Error: stopped by {name} at step 6 (exit code {128 + signum}); checkpoint saved to {checkpoint}; "
        + RESUME_HINT.format(run=run))
    verify_folder(checkpoint)
    assert not (run / ".lock").exists() and not (run / "metrics.json").exists()

    requeued = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(run), *COMMON,
                         "--resume", "auto")
    assert requeued.exit_code == 0, requeued.output
    assert (f"--resume auto: resuming the run in {run} from its last checkpoint (with its saved config.yaml)"
            in requeued.stderr)
    assert "ignoring" not in requeued.stderr  # the same command again: its options are the saved ones
    assert f"resumed from {checkpoint} (step 6)" in requeued.stderr
    assert_same_as_straight(run, straight)


def test_resume_auto_starts_a_new_run_when_there_is_none(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    result = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(run), *COMMON,
                       "--resume", "auto")
    assert result.exit_code == 0, result.output
    assert "--resume auto" not in result.stderr and "resumed from" not in result.stderr
    assert_same_as_straight(run, straight)


def test_resume_auto_restarts_a_run_stopped_before_its_first_checkpoint(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path
) -> None:
    """A job killed while loading the model leaves config.yaml and a stale lock, no checkpoint: start again."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text((straight / "config.yaml").read_text())
    (run / "train.log").write_text('{"step": 1, "loss": 123.0, "lr": 0.0}\n')
    (run / ".lock").write_text("999999999")
    result = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(run), *COMMON,
                       "--resume", "auto")
    assert result.exit_code == 0, result.output
    assert (f"--resume auto: {run} holds no checkpoint yet; starting the run again from the beginning"
            in result.stderr)
    assert_same_as_straight(run, straight)


def test_resume_auto_on_a_finished_run_exits_0_without_training(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path
) -> None:
    before = {p: p.stat().st_mtime_ns for p in straight.rglob("*")}
    result = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(straight), *COMMON,
                       "--resume", "auto")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == (
        f"--resume auto: {straight} is a finished run (metrics.json is written); nothing to do")
    assert {p: p.stat().st_mtime_ns for p in straight.rglob("*")} == before  # nothing written, nothing trained


def test_writes_refused_by_the_kernel_stop_cleanly_then_resume(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path
) -> None:
    """RLIMIT_FSIZE makes the kernel fail writes past 20 KB with EFBIG, like a full disk fails them with
    ENOSPC: the same code path (a write that raises mid-file), with a real partial write underneath."""
    run = tmp_path / "run"
    process, _ = start("file-size-limit", 6, run, tiny_model_dir, fault_corpus)
    _, stderr = process.communicate()
    assert process.returncode == 1, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"Error: {run / 'checkpoints' / 'step-0000006'}: could not be written (File too large (os error 27)); "
        f"the run did not finish; its checkpoints up to step-0000005 are intact; free space in {run} "
        "(or fix its permissions), then " + RESUME_HINT.format(run=run))
    assert "Traceback" not in stderr
    assert [p.name for p in list_checkpoints(run / "checkpoints")] == ["step-0000005", "step-0000004"]
    for checkpoint in list_checkpoints(run / "checkpoints"):
        verify_folder(checkpoint)
    assert leftovers(run) == []  # the half-written checkpoint was removed
    assert not (run / "model.safetensors").exists() and not (run / "metrics.json").exists()
    assert not (run / ".lock").exists()

    # one flipped byte in the newest checkpoint: detected, the previous one is used
    optimizer = run / "checkpoints" / "step-0000005" / "optimizer.pt"
    data = bytearray(optimizer.read_bytes())
    data[len(data) // 2] ^= 0xFF
    optimizer.write_bytes(bytes(data))
    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    assert f"skipping checkpoint: {optimizer}: checksum mismatch (truncated or corrupted)" in resumed.stderr
    assert_same_as_straight(run, straight)


# ---------------------------------------------------------------------------------------- in-process faults


def test_disk_full_while_publishing_leaves_no_model_and_resumes(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    run = tmp_path / "run"
    real_copyfile = shutil.copyfile

    def copyfile(source: str | Path, destination: str | Path, **kwargs: object) -> object:
        if Path(source).name == "tokenizer.json":  # after model.safetensors and config.json were copied
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(destination))
        return real_copyfile(source, destination, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copyfile)
    failed = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(run), *COMMON)
    assert failed.exit_code == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        f"Error: {run}: the model could not be published (No space left on device); no model file was replaced; "
        f"the run did not finish; its checkpoints up to step-0000010 are intact; free space in {run} (or fix its "
        "permissions), then " + RESUME_HINT.format(run=run))
    published = [p.name for p in run.iterdir() if p.is_file()]
    assert sorted(published) == ["config.yaml", "train.log"]  # no model file, no metrics.json, no temporaries
    assert leftovers(run) == []

    monkeypatch.setattr(shutil, "copyfile", real_copyfile)
    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    assert_same_as_straight(run, straight)


def test_disk_full_while_checkpointing_names_the_file(
    tiny_model_dir: Path, fault_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    real_save = torch.save

    def save(obj: object, path: object, *args: object, **kwargs: object) -> None:
        if "step-0000003" in str(path) and str(path).endswith("optimizer.pt"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    failed = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(run), *COMMON)
    assert failed.exit_code == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        f"Error: {run / 'checkpoints' / 'step-0000003'}: could not be written (No space left on device); the run "
        f"did not finish; its checkpoints up to step-0000002 are intact; free space in {run} (or fix its "
        "permissions), then " + RESUME_HINT.format(run=run))
    assert leftovers(run) == []
    verify_folder(run / "checkpoints" / "step-0000002")


def test_preflight_refuses_a_run_that_cannot_fit(
    tiny_model_dir: Path, fault_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentadapt.storage import space as storage

    monkeypatch.setattr(storage, "free_bytes", lambda _path: 4096)
    run = tmp_path / "run"
    weights = (tiny_model_dir / "model.safetensors").stat().st_size
    need = storage.size_text(weights * (3 * (2 + 1) + 3))  # 2 kept checkpoints + the one being written
    result = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(run), *COMMON)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: --output {run}: needs about {need} free for checkpoints and the model, but {tmp_path} has "
        "4.0 KB; free space, pass --set keep_checkpoints=1, or set SENTADAPT_NO_SPACE_CHECK=1 if the estimate "
        "is wrong")
    assert not run.exists()  # refused before anything was written
    monkeypatch.setenv("SENTADAPT_NO_SPACE_CHECK", "1")
    storage.check_free_space(run, weights, 2)  # the escape hatch for a wrong estimate


def test_a_live_lock_refuses_a_second_run_and_keeps_its_files(
    tiny_model_dir: Path, fault_corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("recipe: consert\n")
    (run / ".lock").write_text(str(os.getppid()))  # a live process that is not this one
    result = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(run), "--overwrite",
                       *COMMON)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: --output {run}: another sentadapt run (pid {os.getppid()}) is writing here; wait for it or "
        f"remove {run / '.lock'} if that process is not sentadapt")
    assert (run / "config.yaml").is_file()  # --overwrite deleted nothing under a live run


def test_ctrl_c_while_the_lock_is_taken_leaves_a_lock_that_names_its_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C between the lock file's creation and its pid's write left an empty lock, which refused the same
    command typed again at once ("the lock has no pid yet"); the interrupt now comes once the pid is written, and
    the next run takes over a lock whose process is gone."""
    from sentadapt.run.execute import acquire_lock

    real_open = os.open

    def open_then_interrupted(*args: object, **kwargs: object) -> int:
        descriptor = real_open(*args, **kwargs)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # an unheld SIGINT raises here, before the pid is written
        return descriptor

    # Python's own Ctrl-C handler, whatever this process inherited (a background shell starts it with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        monkeypatch.setattr(os, "open", open_then_interrupted)
        with pytest.raises(KeyboardInterrupt):
            acquire_lock(tmp_path)
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGINT, previous)
    assert (tmp_path / ".lock").read_text() == str(os.getpid())


# ---------------------------------------------------------------------------------------- NaN / inf


def test_nan_skip_mode_counts_and_stops_at_its_limit(tiny_model_dir: Path, fault_corpus: Path,
                                                     tmp_path: Path) -> None:
    from sentadapt.run.inputs import build_inputs
    from sentadapt.train.loop import Trainer, TrainingDiverged
    from tests.train.test_train import Recorder, make_config

    config = make_config(tiny_model_dir, fault_corpus, tmp_path / "run", max_steps=6, batch_size=8,
                         sets=("on_nan=skip", "max_nan_skips=1"))
    inputs = build_inputs(config, lambda _t: None)
    poison(inputs, {2, 4}, "loss")
    messages: list[str] = []
    recorder = Recorder()
    recorder.message = messages.append  # type: ignore[method-assign]
    (tmp_path / "run").mkdir()
    with pytest.raises(TrainingDiverged) as error:
        Trainer(inputs, recorder).run()
    checkpoint = tmp_path / "run" / "checkpoints" / "step-0000003"
    assert "step 2: loss is nan; step skipped (1/1)" in messages
    assert str(error.value) == (
        f"loss is nan at step 4; stopped after 1 skipped step (max_nan_skips). The last good weights are in "
        f"{checkpoint}. Try a lower --lr, a higher temperature, or --mixed-precision no")
    assert json.loads((checkpoint / "trainer_state.json").read_text())["nan_skips"] == 1
    assert all(torch.isfinite(t).all() for t in load_file(str(checkpoint / "model.safetensors")).values())


def test_infinite_gradients_with_a_finite_loss_stop_before_the_weights_change(
    tiny_model_dir: Path, fault_corpus: Path, tmp_path: Path
) -> None:
    from sentadapt.run.inputs import build_inputs
    from sentadapt.train.loop import Trainer, TrainingDiverged
    from tests.train.test_train import make_config

    for clip in ("1.0", "0"):  # with and without clipping (the norm comes from clip_grad_norm_ or is computed)
        output = tmp_path / f"run-clip-{clip}"
        config = make_config(tiny_model_dir, fault_corpus, output, max_steps=6, batch_size=8,
                             sets=(f"max_grad_norm={clip}",))
        inputs = build_inputs(config, lambda _t: None)
        poison(inputs, {3}, "gradient")
        output.mkdir()
        checkpoint = output / "checkpoints" / "step-0000002"
        # inf flowing back through softmax meets inf - inf, so the norm can come out as nan as well as inf
        expected = (r"^the gradient norm is (nan|inf) at step 3; stopped\. The last good weights are in "
                    + re.escape(str(checkpoint)) + r"\. Try a lower --lr")
        with pytest.raises(TrainingDiverged, match=expected):
            Trainer(inputs).run()
        weights = load_file(str(checkpoint / "model.safetensors"))
        assert all(torch.isfinite(t).all() for t in weights.values())


def test_recovery_puts_back_a_folder_caught_between_its_two_renames(tmp_path: Path) -> None:
    """kill -9 after `best` was renamed to `.old-best-PID` and before the new one was renamed into place."""
    from sentadapt.storage.durable import atomic_folder, recover_interrupted_writes

    with atomic_folder(tmp_path / "best") as folder:
        (folder / "weights").write_text("good")
    (tmp_path / "best").rename(tmp_path / ".old-best-4242")
    (tmp_path / ".tmp-best-4242").mkdir()
    (tmp_path / ".tmp-best-4242" / "weights").write_text("half")
    (tmp_path / ".tmp-metrics.json").write_text("{")
    done = recover_interrupted_writes(tmp_path)
    assert done == [f"restored {tmp_path / 'best'} from an interrupted write",
                    f"removed {tmp_path / '.tmp-best-4242'}, left by an interrupted write",
                    f"removed {tmp_path / '.tmp-metrics.json'}, left by an interrupted write"]
    verify_folder(tmp_path / "best")
    assert (tmp_path / "best" / "weights").read_text() == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]


def test_resume_from_another_working_directory_continues_exactly(
    tiny_model_dir: Path, fault_corpus: Path, straight: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A requeued job starts elsewhere: config.yaml names the corpus and the base absolutely, not as typed."""
    work = tmp_path / "job"
    work.mkdir()
    (work / "corpus.txt").write_bytes(fault_corpus.read_bytes())
    marker = work / "run.marker"
    process = subprocess.Popen(
        [sys.executable, "-c", DRIVER, "pause-after-log", "6", str(marker), "corpus.txt", "--base",
         os.path.relpath(tiny_model_dir, work), "--output", "run", *COMMON],
        cwd=work, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    wait_for_pause(process, marker)
    process.send_signal(signal.SIGINT)
    marker.with_suffix(".go").write_text("go")
    _, stderr = process.communicate()
    assert process.returncode == 130, stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    resumed = run_adapt("--resume", "--output", str(work / "run"), "--base", "other-model")
    assert resumed.exit_code == 0, resumed.output
    assert "--resume uses the run's saved config.yaml; ignoring --base" in resumed.stderr
    assert_same_as_straight(work / "run", straight)


def test_resume_refuses_a_corpus_that_changed_since_the_run_started(
    tiny_model_dir: Path, fault_corpus: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(fault_corpus.read_bytes())
    run = tmp_path / "run"
    process, marker = start("pause-after-log", 2, run, tiny_model_dir, corpus)
    wait_for_pause(process, marker)
    process.send_signal(signal.SIGINT)
    marker.with_suffix(".go").write_text("go")
    assert process.wait() == 130
    corpus.write_text(corpus.read_text().replace("server 3 ", "server three "))
    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 2, resumed.output
    assert resumed.stderr.strip().splitlines()[-1] == (
        f"Error: --resume: {corpus} changed since the run started (its sha256 is not the one in {run / 'config.yaml'});"
        " put the original file back, or start a new run (--overwrite) on the new one")


# ------------------------------------------------ a resumed run evaluates where the uninterrupted one does (issue 67)

DEV_ROWS = [("the server is down", "the server is not running", 4.5),
            ("the backup failed", "the backup job failed", 4.0),
            ("a man plays a guitar", "a man is playing music", 3.5), ("a woman is cooking", "a person is cooking", 3.0),
            ("the dog is running fast", "a cat is running", 2.0), ("dns timeout", "the red car is big", 0.0),
            ("user login failed", "the password is new", 1.5), ("the red car is big", "a big red car", 5.0)]


@pytest.fixture(scope="module")
def fault_dev(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fault-dev") / "dev.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in DEV_ROWS))
    return path


def with_dev(dev: Path) -> list[str]:
    """COMMON with a dev set evaluated every 2 steps (the later options win)."""
    return ["--dev", str(dev), "--eval-every", "2"]


@pytest.fixture(scope="module")
def straight_with_dev(tiny_model_dir: Path, fault_corpus: Path, fault_dev: Path,
                      tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("straight-dev") / "run"
    result = run_adapt(str(fault_corpus), "--base", str(tiny_model_dir), "--output", str(output), *COMMON,
                       *with_dev(fault_dev))
    assert result.exit_code == 0, result.output
    return output


@pytest.mark.parametrize(("mode", "step"), [
    ("pause-after-log", 3),  # before an evaluation step
    ("pause-after-log", 4),  # on one: the stop is checked before step 4's evaluation
    ("pause-after-log", 5),  # after one
    ("pause-in-checkpoint", 4),  # inside the checkpoint written after step 4's evaluation
], ids=["before-eval-step", "on-eval-step", "after-eval-step", "inside-checkpoint"])
def test_a_resumed_run_evaluates_at_the_same_steps_and_decides_as_the_uninterrupted_one(
    mode: str, step: int, tiny_model_dir: Path, fault_corpus: Path, fault_dev: Path, straight_with_dev: Path,
    tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process, marker = start(mode, step, run, tiny_model_dir, fault_corpus, *with_dev(fault_dev))
    wait_for_pause(process, marker)
    process.send_signal(signal.SIGINT)
    marker.with_suffix(".go").write_text("go")
    _, stderr = process.communicate()
    assert process.returncode == 130, stderr
    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    ours, reference = (json.loads((folder / "metrics.json").read_text()) for folder in (run, straight_with_dev))
    assert [entry["step"] for entry in ours["history"]] == [entry["step"] for entry in reference["history"]] == [0,
        2, 4, 6, 8, 10]
    for mine, theirs in zip(ours["history"], reference["history"]):
        assert mine["dev"] == pytest.approx(theirs["dev"], abs=1e-3)
    assert ours["dev_evidence"]["options"] == reference["dev_evidence"]["options"] == 5
    assert ours["dev_evidence"]["risk"] == pytest.approx(reference["dev_evidence"]["risk"], abs=0.02)
    assert (ours["decision"], ours["best_step"]) == (reference["decision"], reference["best_step"])
    assert_same_as_straight(run, straight_with_dev)


@pytest.mark.parametrize("signals", [2, 3], ids=["two-ctrl-c", "three-ctrl-c"])
def test_ctrl_c_twice_or_thrice_mid_step_rewrites_no_checkpoint_and_the_resumed_run_is_the_uninterrupted_one(
    signals: int, tiny_model_dir: Path, fault_corpus: Path, fault_dev: Path, straight_with_dev: Path, tmp_path: Path
) -> None:
    """Issue 82: the second Ctrl-C, mid-step 3 (step 2 evaluated and checkpointed), rewrote checkpoints/step-0000002
    with the RNG part-way through step 3, and the resumed run's dev curve, risk and weights differed. Now the second
    signal stops at once and writes nothing; a third, while it unwinds, changes nothing."""
    run = tmp_path / "run"
    process, marker = start("pause-in-step", 3, run, tiny_model_dir, fault_corpus, *with_dev(fault_dev))
    wait_for_pause(process, marker)
    step_2 = run / "checkpoints" / "step-0000002"
    before = {path.name: path.read_bytes() for path in step_2.iterdir()}
    counted = marker.with_suffix(".signals")
    for sent in range(1, signals + 1):
        process.send_signal(signal.SIGINT)
        while sent < signals and not (counted.exists() and int(counted.read_text() or 0) >= sent):
            if process.poll() is not None:  # a later signal may land after the loop's handlers are gone
                break
            time.sleep(0.01)  # the loop's handler took it: the next one is a request of its own, not the same one
    _, stderr = process.communicate()
    assert process.returncode == 130, stderr
    assert f"resume from the last checkpoint with: sentadapt adapt --resume --output {run}" in stderr
    assert {path.name: path.read_bytes() for path in step_2.iterdir()} == before
    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    ours, reference = (json.loads((folder / "metrics.json").read_text()) for folder in (run, straight_with_dev))
    assert [entry["step"] for entry in ours["history"]] == [entry["step"] for entry in reference["history"]]
    for mine, theirs in zip(ours["history"], reference["history"], strict=True):
        assert mine["dev"] == pytest.approx(theirs["dev"], abs=1e-3)
    assert ours["dev_evidence"]["risk"] == pytest.approx(reference["dev_evidence"]["risk"], abs=0.02)
    assert (ours["decision"], ours["best_step"]) == (reference["decision"], reference["best_step"])
    assert_same_as_straight(run, straight_with_dev)


def test_a_command_ending_for_a_stop_signal_ignores_the_next_one_and_any_other_ending_does_not() -> None:
    """Issue 82: a third Ctrl-C landing after "Error: interrupted; …" killed the interpreter mid-exit (status -2, not
    130; seen once in CI). Once the line is being said for a stop, later stop signals are ignored; after any other
    error line Ctrl-C still stops a slow exit."""
    from sentadapt.stopping import process

    saved = {signum: signal.getsignal(signum) for signum in process.STOP_SIGNALS}
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        process.told(2)  # a bad option: not a stop
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        process.told(128 + signal.SIGINT)
        assert all(signal.getsignal(signum) is signal.SIG_IGN for signum in process.STOP_SIGNALS)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        process._told.clear()
