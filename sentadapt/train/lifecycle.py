"""A single-recipe `adapt` run from start to end, the same code path for the Python API and the CLI: its config
(new, resumed, or what `--resume auto` finds in the folder), the checks before anything loads, the lock on the
output folder, the recipe's stages, and the decision `--require-improvement` reads. It prints nothing: what
happens goes to the `Events` callbacks (the CLI renders them with rich; the API's default is silent).
`--recipe auto` builds on it: train/auto_run.py.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.config import RunConfig
from sentadapt.errors import ConfigError, StorageError
from sentadapt.events import Note, Progress, quiet
from sentadapt.resolve import ResolvedModel
from sentadapt.rundir import RunDir
from sentadapt.train.lock import acquire_lock
from sentadapt.train.replacement import Replacement
from sentadapt.train.resolved import DevSet, ResolvedRun
from sentadapt.train.signals import StopAtOnce, stopped_early

RESUME_LAST = "last"  # continue from the last checkpoint (a bare `--resume`)
RESTART = "restart"  # `--resume auto` on a run that stopped before its first checkpoint: start it again
FINISHED = "finished"  # `--resume auto` on a finished run: nothing to do


@dataclass
class Events:
    """Where a run reports what happens. Every callback is optional; the defaults are silent."""

    note: Note = quiet  # one line: what was read, skipped, resumed, decided
    progress: Progress | None = None  # a progress bar for long preparations (corpus tokenizing, encoding)
    reporter: Callable[[], Any] | None = None  # a train.tracking.Reporter for the training line, made per stage
    stage_done: Callable[[Any, RunConfig], None] | None = None  # (TrainResult, the stage's RunConfig) per stage
    checkpoint_written: Callable[[Path], None] | None = None  # each checkpoint's folder, once it is complete

    def for_process(self) -> Events:
        """The events of this process: other ranks than 0 stay silent."""
        return self if is_main_process() else Events()


@dataclass
class Settings:
    """What a new single-recipe run is asked for (the CLI's flags, the API's keywords). None: the config decides."""

    corpus: Sequence[str] = ()
    output: Path = Path("runs/x")
    recipe: str | None = None
    base: str | None = None
    config_file: Path | None = None
    set_options: Sequence[str] = ()
    preset: str | None = None
    # the options that set config fields, routed by the run spec (run_spec.route): never a second list of names
    flags: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields: max_steps, lr, batch_size, …
    run_fields: dict[str, Any] = field(default_factory=dict)  # RunConfig fields: dev, dev_metric, decision, …
    # any TrainConfig or recipe field as a typed value (the API's keywords beyond its options): --set's precedence
    set_values: dict[str, Any] = field(default_factory=dict)


def is_main_process() -> bool:
    # accelerate launch / torchrun set RANK; only rank 0 writes the run directory and talks to the user
    return int(os.environ.get("RANK", "0")) == 0


def release_processes() -> None:
    """Destroy the process group that torchrun / accelerate launch set up, when the process is about to end: a
    gloo or NCCL group left to the interpreter's exit can abort the process there ("terminate called without an
    active exception"), after the work is done. Not inside a run: --recipe auto and later stages reuse the group.
    Imports nothing: a command that failed before torch was imported (a bad option) does not import it here, and
    one stopped by Ctrl-C while torch was being imported does not import it again from a half-made module."""
    dist = sys.modules.get("torch.distributed")
    is_available = getattr(dist, "is_available", None)
    is_initialized = getattr(dist, "is_initialized", None)
    if is_available is None or is_initialized is None:  # not imported, or its import was cut short
        return
    if is_available() and is_initialized():
        dist.destroy_process_group()  # type: ignore[union-attr]


def device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


def resume_auto_mode(output: Path, note: Note = quiet) -> str | None:
    """`--resume auto`: finished (metrics.json) | last (a checkpoint or finished stage to continue from) |
    restart (a run that stopped before its first checkpoint: start it again) | None (a new run)."""
    run_dir = RunDir(output)
    if run_dir.is_finished():
        note(f"--resume auto: {output} is a finished run (metrics.json is written); nothing to do")
        return FINISHED
    if run_dir.is_auto():  # --recipe auto: each candidate is finished, resumed or started
        note(f"--resume auto: continuing the --recipe auto run in {output} (with its saved plan and configs)")
        return RESUME_LAST
    if run_dir.has_progress():
        note(f"--resume auto: resuming the run in {output} from its last checkpoint (with its saved config.yaml)")
        return RESUME_LAST
    if run_dir.has_config():
        note(f"--resume auto: {output} holds no checkpoint yet; starting the run again from the beginning")
        return RESTART
    return None


def recipe_of(config_file: Path | None) -> str | None:
    if config_file is None:
        return None
    from sentadapt.config import load_yaml

    return load_yaml(config_file).get("recipe")


def new_config(settings: Settings) -> RunConfig:
    """The config of a new run: defaults < the recipe's paper settings < the preset for the base < the --config
    file < flags < --set."""
    return new_config_and_base(settings)[0]


def new_config_and_base(settings: Settings) -> tuple[RunConfig, ResolvedModel | None]:
    """`new_config`, and the base model when preset detection resolved it (None when it did not need it): given to
    `check_run` so that the base is resolved once."""
    from sentadapt.config import build_config
    from sentadapt.presets import choose_preset
    from sentadapt.recipes import RECIPES
    from sentadapt.resolve import DEFAULT_BASE_MODEL, resolve_model

    if not settings.corpus:
        raise ConfigError("CORPUS: give at least one corpus file (or --resume to continue a run)")
    recipe_name = settings.recipe or recipe_of(settings.config_file) or "consert"
    recipe_class = RECIPES.get(recipe_name)
    base_name = settings.base or DEFAULT_BASE_MODEL
    resolved: list[ResolvedModel] = []

    def resolve_base() -> ResolvedModel:
        resolved.append(resolve_model(base_name))
        return resolved[0]

    preset = choose_preset(settings.preset, resolve_base, recipe_class, bool(settings.run_fields.get("teacher")))
    config = build_config(recipe_name, recipe_class.Config, recipe_class.train_defaults, settings.config_file,
                          settings.flags, list(settings.set_options), set_values=settings.set_values,
                          preset_values=preset.values,
                          preset=preset.to_dict(), base=base_name, corpus=list(settings.corpus),
                          output=str(settings.output), **settings.run_fields)
    return config, resolved[0] if resolved else None


def resumed_config(output: Path, num_proc: int | None = None) -> RunConfig:
    """The saved config.yaml of a run to resume (authoritative); only the machine setting num_proc may change."""
    from sentadapt.config import load_run_config
    from sentadapt.recipes import RECIPES

    config = load_run_config(RunDir(output).config_file, {name: RECIPES.get(name).Config for name in RECIPES})
    # the directory may have been moved since it was written; num_proc is the machine's, not the run's
    config = dataclasses.replace(config, output=os.path.abspath(output), num_proc=num_proc or config.num_proc)
    return config


def ignored_on_resume(settings: Settings, extra: Sequence[str] = ()) -> list[str]:
    """The options a resumed run does not apply (its saved config is authoritative; only --num-proc, a setting of
    the machine, applies), as the command line spells them."""
    from sentadapt.run_spec import OPTIONS_BY_NAME

    ignored: list[str] = []
    for key, value in settings.flags.items():
        if value is not None:
            ignored.append("--lora" if key.startswith("lora_") else OPTIONS_BY_NAME[key].flag)
    for key, value in settings.run_fields.items():
        if value is not None and value != OPTIONS_BY_NAME[key].default and key != "num_proc":
            ignored.append(OPTIONS_BY_NAME[key].flag)
    ignored += ["--base"] if settings.base is not None else []
    ignored += ["--recipe"] if settings.recipe is not None else []
    ignored += ["--config"] if settings.config_file is not None else []
    ignored += ["--set"] if settings.set_options or settings.set_values else []
    ignored += ["--preset"] if settings.preset else []
    return list(dict.fromkeys(ignored + list(extra)))


def check_run(config: RunConfig, resume: bool, overwrite: bool, dry_run: bool, require_improvement: bool,
              base: ResolvedModel | None = None, dev: DevSet | None = None) -> ResolvedRun:
    """Fail fast, before any weights load: model, corpus files, dev set, decision rule, output directory. Returns
    the run resolved, for `train_run`: what was resolved and read here is not resolved or read again. `base`,
    `dev`: already resolved (preset detection; --recipe auto's candidates share them)."""
    from sentadapt.config import check_choice
    from sentadapt.data.corpus import ENCODING_ERRORS, check_has_sentences, check_sources
    from sentadapt.evaluation.decision import decision_rule
    from sentadapt.lora import check_run as check_lora
    from sentadapt.prompts import PAIR, read_prompts
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.base import TEXT
    from sentadapt.resolve import check_has_weights, resolve_model
    from sentadapt.train.teacher import check_teacher
    from sentadapt.train.tracking import resolve_trackers

    check_choice("--encoding-errors", config.encoding_errors, ENCODING_ERRORS)
    decision_rule(config)  # --decision / --risk
    resolve_trackers(config.train.report_to)  # a tracker that is not installed: say which extra, before loading
    if base is None or base.name != config.base:  # not resolved yet (or for another name than the config's)
        base = resolve_model(config.base)
    check_has_weights(base)
    # --prompt: a name of the base's prompts (or none); the default resolved to a name, so config.yaml says it
    config = dataclasses.replace(config, prompt=read_prompts(base).name_for(PAIR, config.prompt, base.name))
    teacher = None
    if config.teacher is not None:  # loads, and is not the base itself
        teacher = check_teacher(config.teacher, base.location)
    elif config.train.recipe_weight == 0 and config.train.distill == 0:
        raise ConfigError("recipe_weight: 0 leaves nothing to train; give --teacher MODEL or --set distill=W, "
                          "or a recipe_weight above 0")
    recipe_class = RECIPES.get(config.recipe)
    check_lora(config.train, recipe_class)  # peft installed; a recipe that trains the encoder
    _check_mask_neighbours(config, recipe_class)
    check_sources(config.corpus)  # a missing file, a directory, a fake .gz, an unreachable Hub dataset
    config = with_absolute_paths(config)  # config.yaml names them so: --resume works from any directory
    config = _with_corpus_fingerprints(config, resume)
    recipe_class.check_corpus(config.corpus, config.recipe_args)  # e.g. CLSR: pairs, not sentences
    if recipe_class.trains_on == TEXT:  # an empty corpus is found now, not after the model loaded
        check_has_sentences(config.corpus, config.text_column, config.encoding_errors)
    dev = dev if dev is not None else DevSet.of(config)
    if not dry_run:
        _ = dev.evaluator  # reads and checks the whole dev set (no torch) before anything is written; kept
    if require_improvement and dev.name is None:
        raise ConfigError("--require-improvement: needs a labelled dev set to compare with the base model; "
                          "pass --dev FILE (e.g. 100 labelled pairs from your domain) or --dev stsb --data-dir DIR")
    run = ResolvedRun(config, base, recipe_class, dev, teacher)
    if not dry_run and is_main_process():  # other ranks would see the directory rank 0 just made
        _check_output(config, base, resume, overwrite)
    return run


def with_absolute_paths(config: RunConfig) -> RunConfig:
    """Every local path of the run absolute (Hub ids and names such as `stsb` as given)."""
    from sentadapt.data.fingerprint import absolute

    return dataclasses.replace(
        config, base=absolute(config.base) or config.base, corpus=[absolute(c) or c for c in config.corpus],
        output=os.path.abspath(Path(config.output).expanduser()), dev=absolute(config.dev),
        teacher=absolute(config.teacher), data_dir=absolute(config.data_dir))


def _with_corpus_fingerprints(config: RunConfig, resume: bool) -> RunConfig:
    """A new run records each corpus file's sha256; a resumed one must find the same bytes (a run that saved none,
    from before this check, is not checked)."""
    from sentadapt.data.fingerprint import fingerprints

    now = fingerprints(config.corpus)
    if not resume or config.corpus_sha256 is None:
        return dataclasses.replace(config, corpus_sha256=now)
    for source, saved, current in zip(config.corpus, config.corpus_sha256, now, strict=False):
        if saved is not None and current != saved:
            raise ConfigError(f"--resume: {source} changed since the run started (its sha256 is not the one in "
                              f"{RunDir(config.output).config_file}); put the original file back, or start a new "
                              "run (--overwrite) on the new one")
    return config


def _check_mask_neighbours(config: RunConfig, recipe_class: Any) -> None:
    """mask_neighbours acts on neighbour batches, which a teacher composes, and on a recipe whose loss honours it."""
    if not config.train.mask_neighbours:
        return
    if config.teacher is None or config.train.distill_batches != "neighbours":
        raise ConfigError("mask_neighbours: masks the neighbours a teacher puts in each batch; give --teacher MODEL "
                          "(with distill_batches=neighbours, its default), or drop --set mask_neighbours=on")
    if not recipe_class.masks_related_negatives:
        raise ConfigError(f"mask_neighbours: the {recipe_class.name} recipe's loss has no in-batch negatives it "
                          "leaves out; drop --set mask_neighbours=on, or use --recipe consert")


def _check_output(config: RunConfig, base: ResolvedModel, resume: bool, overwrite: bool) -> None:
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output}: exists and is not a directory")
    if not resume and output.is_dir() and any(output.iterdir()) and not overwrite:
        raise ConfigError(f"--output {output}: exists and is not empty; pass --resume to continue that run "
                          "or --overwrite to replace it")
    check_writable(output)
    _check_free_space(config, base, output)


def check_writable(output: Path) -> None:
    """The nearest existing folder on the way to --output must be a writable directory."""
    from sentadapt.options import check_writable_place

    check_writable_place(f"--output {output}", output)


def _check_free_space(config: RunConfig, resolved: ResolvedModel, output: Path) -> None:
    """Refuse before training when checkpoints and the model would not fit (known for local base models only)."""
    from sentadapt.train.storage import check_free_space, weights_bytes

    weights = weights_bytes(Path(resolved.location)) if resolved.is_local else None
    if weights is not None:
        check_free_space(output, weights, config.train.keep_checkpoints)


def claim_output(output: Path, replace: bool, note: Callable[[str], None]) -> tuple[Path, Replacement]:
    """Lock the output folder (made if missing) for this process; with `replace`, the run it holds is set aside until
    the new one has a checkpoint (train/replacement.py). Returns the lock and the replacement to settle at the end.
    The lock is taken before anything moves, so --overwrite never touches what a live run is writing."""
    if output.is_dir():
        acquire_lock(output, note)
    replacement = Replacement.set_aside(output, note) if replace else Replacement(output)
    output.mkdir(parents=True, exist_ok=True)
    return acquire_lock(output, note), replacement


def train_run(run: ResolvedRun, resume: bool, overwrite: bool, trust_remote_code: bool, allow_pickle: bool,
              events: Events | None = None, base_dev: tuple[float, dict[str, Any]] | None = None) -> Any:
    """Train every stage of the recipe under the output folder's lock; returns the last stage's TrainResult (None
    on ranks other than 0). `run`: what check_run resolved. `base_dev`: the base model's dev score and outputs
    when already known (auto)."""
    from sentadapt.train.inputs import build_inputs, stage_outputs
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
            inputs = build_inputs(run.for_stage(stage_config), events.note, device=device(),
                                  trust_remote_code=trust_remote_code, allow_pickle=allow_pickle, stage=stage,
                                  progress=events.progress, base_dev=base_dev if number == 1 else None)
            reporter = events.reporter() if events.reporter is not None else NoteReporter(events.note)
            trainer = Trainer(inputs, reporter, on_checkpoint=_checkpoint_hook(replacement, events))
            result = _train_stage(trainer, stage_resume, output)
            if main and events.stage_done is not None:
                events.stage_done(result, stage_config)
    except KeyboardInterrupt:  # outside a training step: while loading, or a second signal while checkpointing
        raise stopped_early(stop.signum, output, RunDir(output).has_progress()) from None
    finally:
        stop.__exit__()
        if replacement is not None:
            replacement.settle()  # the run it replaces comes back unless this one got a checkpoint
        if lock is not None:
            lock.unlink(missing_ok=True)
    return result if main else None


def _checkpoint_hook(replacement: Replacement | None, events: Events) -> Callable[[Path], None]:
    """What a written checkpoint triggers: the run set aside by --overwrite goes, and the caller hears of it."""
    def written(folder: Path) -> None:
        if replacement is not None:
            replacement.commit()
        if events.checkpoint_written is not None:
            events.checkpoint_written(folder)

    return written


def write_config(config: RunConfig) -> None:
    """config.yaml in the run folder `config.output`: the one writer of that file. Written before training, so
    `--resume` (and `--recipe auto`'s plan) read back exactly the settings the run trains with."""
    from sentadapt.config import save_run_config

    run_dir = RunDir(Path(config.output))
    run_dir.path.mkdir(parents=True, exist_ok=True)
    save_run_config(config, run_dir.config_file)


def _train_stage(trainer: Any, resume: bool, output: Path) -> Any:
    """Train, then publish and decide (train/finish.py); a write that fails (disk full, file too large, no
    permission) becomes one line that says what is intact and how to continue."""
    from sentadapt.durable import describe_write_failure
    from sentadapt.train.finish import train_stage

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
    from sentadapt.rundir import list_checkpoints

    found = list_checkpoints(checkpoints)
    if not found:
        return (f"the run did not finish and wrote no checkpoint; free space in {output} (or fix its permissions), "
                "then run the same command again")
    return (f"the run did not finish; its checkpoints up to {found[0].name} are intact; free space in {output} "
            f"(or fix its permissions), then resume with: sentadapt adapt --resume --output {output}")
