"""Executing a checked run: every stage trained under the output folder's lock (`train_run`), config.yaml written
first, each stage built (run/inputs.py) and trained (train/loop.py), then published and decided (run/finish.py); a
failed write becomes one line.

The lock: one writer at a time (`OUTPUT/.lock` holds the writer's pid; `acquire_lock`).

`--overwrite` without losing the run it replaces (`Replacement`): a new run into a folder that holds an earlier run
(finished or not) does not delete it first. The earlier run is renamed to a hidden sibling, `.NAME.replaced` (one
rename on the same file system: nothing is copied), the new run starts in NAME, and the earlier run is deleted only
once the new one has *finished* (its metrics.json is written): until then the new run may still be stopped, and a
user who stops it must be able to choose either run. When the new run stops early (a teacher that trails the base, a
bad corpus line, Ctrl-C or SIGTERM while loading or training, a full disk):
- before its first checkpoint: nothing of it is worth keeping, so the earlier run is put back as it was, byte for
  byte;
- after a checkpoint: both are kept, and one line says where each is, how to continue the new one (`--resume`, which
  deletes the earlier run when it finishes) and how to get the earlier one back.
A process killed outright (SIGKILL, a lost node) cannot say so itself: the next `adapt` into NAME does (`recover`),
before anything else. Only the main process touches the folders; the lock is held throughout."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.config.schema import RunConfig
from sentadapt.errors import ConfigError, StorageError
from sentadapt.events import Note, quiet
from sentadapt.run.plan import Events, ResolvedRun
from sentadapt.stopping.process import stop_signals_held
from sentadapt.stopping.training import StopAtOnce, TrainingInterrupted, stopped_early
from sentadapt.storage.run_folder import LOCK_FILE, RunDir, aside_path
from sentadapt.train.compute import is_main_process, training_device

if TYPE_CHECKING:
    from sentadapt.train.loop import Trainer
    from sentadapt.train.state import TrainResult


# ---------------------------------------------------------- the stages, under the output folder's lock


def claim_output(output: Path, replace: bool, note: Callable[[str], None]) -> tuple[Path, Replacement]:
    """Lock the output folder (made if missing) for this process; with `replace`, the run it holds is set aside until
    the new one finishes (`Replacement`); without, a run an earlier --overwrite set aside still waits for
    this one (resumed) to finish. Returns the lock and the replacement to settle at the end. The lock is taken before
    anything moves, so --overwrite never touches what a live run is writing."""
    if output.is_dir():
        acquire_lock(output, note)
    replacement = Replacement.set_aside(output, note) if replace else Replacement.waiting(output, note)
    output.mkdir(parents=True, exist_ok=True)
    return acquire_lock(output, note), replacement


def train_run(run: ResolvedRun, resume: bool, overwrite: bool, trust_remote_code: bool, allow_pickle: bool,
              events: Events | None = None, base_dev: tuple[float, dict[str, Any]] | None = None) -> Any:
    """Train every stage of the recipe under the output folder's lock; returns the last stage's TrainResult (None
    on ranks other than 0). `run`: what check_run resolved. `base_dev`: the base model's dev score and outputs
    when already known (auto)."""
    from sentadapt.run.inputs import build_inputs, stage_outputs
    from sentadapt.train.loop import Trainer
    from sentadapt.train.tracking import NoteReporter

    events = (events or Events()).for_process()
    config = run.config
    output = Path(config.output)
    main = is_main_process()
    lock, replacement = None, None
    if main:
        lock, replacement = claim_output(output, overwrite and not resume, events.note)
        if not resume:
            write_config(config)  # the whole run's config, for --resume
    result = None
    stop = StopAtOnce()
    try:
        stop.__enter__()  # a signal while loading stops at once (the loop handles its own while it trains)
        stages = stage_outputs(config, tuple(stage.name for stage in run.recipe_class.stages(config.recipe_args)))
        for number, (stage, stage_config) in enumerate(stages, start=1):
            stage_dir = RunDir(stage_config.output)
            # only a resumed run skips finished stages (with --overwrite, rank 0 may not have deleted them yet)
            if resume and number < len(stages) and stage_dir.is_finished():
                events.note(f"stage {number}/{len(stages)} ({stage}) already complete in {stage_dir.path}")
                continue
            if len(stages) > 1:
                events.note(f"stage {number}/{len(stages)}: {stage} → {stage_dir.path}")
            stage_resume = resume and stage_dir.checkpoints.is_dir()
            if resume and not stage_resume and number == len(stages) == 1:
                raise ConfigError(f"--resume: no checkpoint in {stage_dir.checkpoints}; start without --resume")
            if main and not stage_resume and not stage_dir.has_config():
                write_config(stage_config)  # an earlier stage's folder: its config, as export and eval read it
            # a later stage trains from the previous stage's model, and is weighed against the run's base model,
            # as the first stage scored it: the decision answers whether the run beat what the user started from
            if number > 1:
                base_dev = _run_base_dev(stages[0][1], config.base, events.note)
            inputs = build_inputs(run.for_stage(stage_config), events.note, device=training_device(),
                                  trust_remote_code=trust_remote_code, allow_pickle=allow_pickle, stage=stage,
                                  progress=events.progress, base_dev=base_dev)
            if number > 1 and (base_dev is not None or inputs.evaluator is None):  # else scored from where it starts
                inputs = dataclasses.replace(inputs, base_model=config.base)
            reporter = events.reporter() if events.reporter is not None else NoteReporter(events.note)
            trainer = Trainer(inputs, reporter, on_checkpoint=events.checkpoint_written)
            stop.stop_if_requested()  # a signal while loading whose interrupt something swallowed
            result = _train_stage(trainer, stage_resume, output)
            if main and events.stage_done is not None:
                events.stage_done(result, stage_config)
    except KeyboardInterrupt:  # outside a step's boundary: while loading, or a second signal (nothing written)
        raise stopped_early(stop.signum, output, RunDir(output).has_progress()) from None
    finally:
        stop.__exit__()
        if replacement is not None:
            replacement.settle()  # the run it replaces goes once this one finished, else it is kept or back
        if lock is not None:
            lock.unlink(missing_ok=True)
    return result if main else None


def write_config(config: RunConfig) -> None:
    """config.yaml in the run folder `config.output`: the one writer of that file. Written before training, so
    `--resume` (and `--recipe auto`'s plan) read back exactly the settings the run trains with."""
    from sentadapt.config.merging import save_run_config

    run_dir = RunDir(Path(config.output))
    run_dir.path.mkdir(parents=True, exist_ok=True)
    save_run_config(config, run_dir.config_file)


def train_stage(trainer: Trainer, resume: bool = False) -> TrainResult:
    """Train, then publish and decide (run/finish.py: on the main process; the others wait for the published model,
    which a next stage loads on every process). The trackers are open for both: the final values go to them too."""
    from sentadapt.run.finish import finish
    from sentadapt.train.tracking import hyperparameters

    trainer.trackers.start(hyperparameters(trainer.config.to_dict()))
    try:
        training = trainer.run(resume=resume)
        return finish(training, trainer.inputs, trainer.is_main, trainer.trackers.log,
                      trainer.accelerator.wait_for_everyone)
    finally:
        trainer.trackers.finish()


def _run_base_dev(first_stage: RunConfig, base: str, note: Note) -> tuple[float, dict[str, Any]] | None:
    """The run's base model's dev score and per-unit outputs, as the first stage scored and recorded them (its
    metrics.json and dev_outputs.json, also when an earlier command finished that stage); None without a dev set."""
    folder = RunDir(first_stage.output)
    metrics, outputs = folder.read_metrics() or {}, folder.read_dev_outputs() or {}
    if metrics.get("base_score") is None or outputs.get("base") is None:
        return None
    note(f"weighed against the base model {base} (dev {metrics['base_score']:.2f}, scored in stage 1)")
    return metrics["base_score"], outputs["base"]


def _train_stage(trainer: Trainer, resume: bool, output: Path) -> TrainResult:
    """`train_stage`, where a write that fails (disk full, file too large, no permission) becomes one line that says
    what is intact and how to continue."""
    from sentadapt.storage.durable import describe_write_failure

    try:
        return train_stage(trainer, resume)
    except TrainingInterrupted as stopped:  # a stage of several resumes with the whole run: name the run's folder
        raise stopped.resuming(trainer.output, output) from None
    except StorageError as error:
        raise StorageError(f"{error}; {_after_write_failure(trainer.checkpoints, output)}") from None
    except Exception as error:
        reason = describe_write_failure(error)
        if reason is None:
            raise
        where = getattr(error, "filename", None) or trainer.output
        raise StorageError(f"{where}: cannot write ({reason}); "
                           f"{_after_write_failure(trainer.checkpoints, output)}") from None


def _after_write_failure(checkpoints: Path, output: Path) -> str:
    from sentadapt.storage.run_folder import list_checkpoints

    found = list_checkpoints(checkpoints)
    if not found:
        return (f"the run did not finish and wrote no checkpoint; free space in {output} (or fix its permissions), "
                "then run the same command again")
    return (f"the run did not finish; its checkpoints up to {found[0].name} are intact; free space in {output} "
            f"(or fix its permissions), then resume with: sentadapt adapt --resume --output {output}")


# -------------------------------------------------------------------------------------------- the lock


# A lock is created and its pid written with stop signals held (`_create_lock`), so a lock without a pid is a run
# still starting (microseconds), or one killed outright (SIGKILL) at that instant: an empty lock older than this is
# the latter
EMPTY_LOCK_STALE_S = 10.0


def acquire_lock(output: Path, note: Note = quiet) -> Path:
    """Create `output/.lock` holding our pid in one atomic step (O_EXCL); take over a lock whose process is gone."""
    lock = RunDir(output).lock_file
    for _attempt in range(3):
        try:
            _create_lock(lock)
        except FileExistsError:
            pid = _lock_pid(lock)
            if pid == os.getpid():
                return lock
            if pid == 0:
                continue  # released in the meantime: try again
            if pid is None and _age(lock) > EMPTY_LOCK_STALE_S:
                note(f"--output {output}: taking over a lock that never got its pid (its run was stopped while "
                     "taking it)")
                lock.unlink(missing_ok=True)
                continue
            if pid is None or _process_alive(pid):
                raise _held(output, pid) from None
            note(f"--output {output}: taking over a stale lock (pid {pid} is not running; that run was killed)")
            lock.unlink(missing_ok=True)
            continue
        return lock
    raise ConfigError(f"--output {output}: could not take {lock}; another run keeps replacing it")


def _create_lock(lock: Path) -> None:
    """The lock file, made only if absent (O_EXCL), holding our pid. Ctrl-C between the file's creation and the
    pid's write used to leave a lock that names no one, which refused the same command typed again at once ("the
    lock has no pid yet"); with stop signals held meanwhile, the interrupt comes once the pid is written, and the
    next run takes over a lock whose process is gone."""
    with stop_signals_held():
        descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(descriptor, str(os.getpid()).encode())
        except OSError:
            lock.unlink(missing_ok=True)  # a full disk: leave no lock that names no one
            raise
        finally:
            os.close(descriptor)


def refuse_if_held(output: Path) -> None:
    """Raise what claiming the folder would when a live process other than this one holds its lock: said before
    `--resume` reads the folder, which that run is still writing (its missing checkpoint is no news)."""
    if held_by_another(output):
        raise _held(output, _lock_pid(RunDir(output).lock_file))


def _held(output: Path, pid: int | None) -> ConfigError:
    holder = f"pid {pid}" if pid is not None else "starting, the lock has no pid yet"
    return ConfigError(f"--output {output}: another sentadapt run ({holder}) is writing here; wait for it or remove "
                       f"{RunDir(output).lock_file} if that process is not sentadapt")


def held_by_another(output: Path) -> bool:
    """Whether a live process other than this one holds `output`'s lock (claiming it will be refused)."""
    pid = _lock_pid(RunDir(output).lock_file)
    return pid is None or (pid not in (0, os.getpid()) and _process_alive(pid))


def _lock_pid(lock: Path) -> int | None:
    """The pid in a lock file; 0 when it was just released; None while its writer has not written the pid yet."""
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        return 0
    return int(text) if text.isdigit() else None


def _age(lock: Path) -> float:
    """Seconds since the lock file was last written (0 when it is gone)."""
    import time

    try:
        return time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return False  # os.kill(0, ...) would address our own process group
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by another user
    return True


# --------------------------------------------------------- --overwrite: the run it replaces, set aside


def has_replacement(output: Path) -> bool:
    """The new run in `output` holds something worth keeping: a checkpoint (of the run, a stage or a --recipe auto
    candidate) or a finished run."""
    run_dir = RunDir(output)
    if run_dir.is_finished() or run_dir.has_progress():
        return True
    if run_dir.candidates.is_dir():
        return any(RunDir(folder).is_finished() or RunDir(folder).has_progress()
                   for folder in run_dir.candidates.iterdir() if folder.is_dir())
    return False


def worth_setting_aside(output: Path) -> bool:
    """Anything in `output` but the lock and what a run writes before its first checkpoint."""
    if not output.is_dir():
        return False
    if RunDir(output).never_started():
        return False
    return any(path.name != LOCK_FILE for path in output.iterdir())


def both_kept(output: Path, aside: Path) -> str:
    """The line for a new run stopped after a checkpoint, with the run it replaces still set aside."""
    return (f"--output {output}: the new run is not finished, so the run it replaces is kept in {aside}; continue "
            f"the new one with: sentadapt adapt --resume --output {output} (the old one is deleted when it "
            f"finishes), or get the old one back with: rm -r {output} && mv {aside} {output}")


def recover(output: Path, note: Note = quiet) -> None:
    """A run set aside by an `--overwrite` run that was killed before it could settle, settled now as the run would
    have settled it."""
    aside = aside_path(output)
    if aside.is_dir():
        settle_aside(output, aside, note, f"--output {output}: put back the run that an interrupted --overwrite run "
                                          f"had set aside in {aside}")


def settle_aside(output: Path, aside: Path, note: Note, put_back: str) -> None:
    """The run in `aside` once the new run in `output` has stopped, whatever stopped it: deleted when the new run
    finished; kept, and the user told where, when it reached a checkpoint; else put back, saying `put_back`."""
    if RunDir(output).is_finished():
        shutil.rmtree(aside, ignore_errors=True)
    elif has_replacement(output):
        note(both_kept(output, aside))
    else:
        if output.is_dir():
            shutil.rmtree(output)
        os.rename(aside, output)
        note(put_back)


@dataclass
class Replacement:
    """The earlier run of an `--overwrite`, set aside until the new run finishes (None: nothing was set aside)."""

    output: Path
    aside: Path | None = None
    note: Note = quiet

    @classmethod
    def set_aside(cls, output: Path, note: Note = quiet) -> Replacement:
        """Move the earlier run in `output` aside (the caller holds its lock, which stays behind and is re-taken).
        When an earlier run already waits aside (a replacement that was stopped), `output` holds that unfinished
        replacement: it is what this new run replaces, and the run waiting aside goes on waiting."""
        aside = aside_path(output)
        if aside.is_dir():
            if output.is_dir():
                shutil.rmtree(output)
            note(f"--output {output}: replacing the unfinished run that was there; the run it was to replace "
                 f"still waits in {aside} until this one finishes")
            return cls(output, aside, note)
        if not worth_setting_aside(output):
            if output.is_dir():
                shutil.rmtree(output)  # nothing worth keeping: what a run wrote before its first checkpoint
            return cls(output, None, note)
        (output / LOCK_FILE).unlink(missing_ok=True)  # ours: the earlier run goes aside as it was
        os.rename(output, aside)
        return cls(output, aside, note)

    @classmethod
    def waiting(cls, output: Path, note: Note = quiet) -> Replacement:
        """A resumed run: a run it replaces may wait aside, to be deleted when this one finishes."""
        aside = aside_path(output)
        return cls(output, aside if aside.is_dir() else None, note)

    def settle(self) -> None:
        """At the end of the new run, whatever happened: finished, the earlier run is deleted; stopped after a
        checkpoint, both are kept and the user told where; stopped before one, the earlier run is put back."""
        if self.aside is None:
            return
        put_back = (f"--output {self.output}: the new run stopped before its first checkpoint; the run it was to "
                    "replace is back as it was")
        settle_aside(self.output, self.aside, self.note, put_back)
        self.aside = None
