"""A checked run trained, stage after stage, under its output folder's lock: config.yaml written first, an
`--overwrite`n run set aside until the new one finishes, every stage built (run/execute/inputs.py) and trained
(train/loop.py), then published and decided (run/finish.py); a failed write becomes one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.config.schema import RunConfig
from sentadapt.errors import ConfigError, StorageError
from sentadapt.run.execute.lock import acquire_lock
from sentadapt.run.execute.replacement import Replacement
from sentadapt.run.plan.resolved import ResolvedRun
from sentadapt.run.plan.settings import Events
from sentadapt.stopping.training import StopAtOnce, stopped_early
from sentadapt.storage.run_folder import RunDir
from sentadapt.train.ranks import is_main_process, training_device

if TYPE_CHECKING:
    from sentadapt.train.loop import Trainer
    from sentadapt.train.state import TrainResult


def claim_output(output: Path, replace: bool, note: Callable[[str], None]) -> tuple[Path, Replacement]:
    """Lock the output folder (made if missing) for this process; with `replace`, the run it holds is set aside until
    the new one finishes (run/execute/replacement.py); without, a run an earlier --overwrite set aside still waits for
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
    from sentadapt.run.execute.inputs import build_inputs, stage_outputs
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
        stages = stage_outputs(config, run.recipe_class.stages_for(config.recipe_args))
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
                write_config(stage_config)  # an earlier stage's folder: what `--resume` of that stage reads back
            # later stages start from the previous stage's model, not the base: scored anew
            inputs = build_inputs(run.for_stage(stage_config), events.note, device=training_device(),
                                  trust_remote_code=trust_remote_code, allow_pickle=allow_pickle, stage=stage,
                                  progress=events.progress, base_dev=base_dev if number == 1 else None)
            reporter = events.reporter() if events.reporter is not None else NoteReporter(events.note)
            trainer = Trainer(inputs, reporter, on_checkpoint=events.checkpoint_written)
            stop.stop_if_requested()  # a signal while loading whose interrupt something swallowed
            result = _train_stage(trainer, stage_resume, output)
            if main and events.stage_done is not None:
                events.stage_done(result, stage_config)
    except KeyboardInterrupt:  # outside a training step: while loading, or a second signal while checkpointing
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


def _train_stage(trainer: Trainer, resume: bool, output: Path) -> TrainResult:
    """`train_stage`, where a write that fails (disk full, file too large, no permission) becomes one line that says
    what is intact and how to continue."""
    from sentadapt.storage.durable import describe_write_failure

    try:
        return train_stage(trainer, resume)
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
