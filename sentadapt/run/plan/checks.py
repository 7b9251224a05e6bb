"""The checks before anything loads (`check_run`): model, corpus files, dev set, decision rule, teacher, output
directory; what they resolve is kept for the run (train/resolved ... run/plan/resolved.py), not resolved again."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from sentadapt.config.schema import RunConfig
from sentadapt.errors import ConfigError
from sentadapt.model.resolve import ResolvedModel
from sentadapt.run.plan.resolved import DevSet, ResolvedRun
from sentadapt.storage.run_folder import RunDir, check_replaceable, foreign_in_run, holds_anything, is_run_folder
from sentadapt.train.ranks import is_main_process


def check_run(config: RunConfig, resume: bool, overwrite: bool, dry_run: bool, require_improvement: bool,
              base: ResolvedModel | None = None, dev: DevSet | None = None) -> ResolvedRun:
    """Fail fast, before any weights load: model, corpus files, dev set, decision rule, output directory. Returns
    the run resolved, for `train_run`: what was resolved and read here is not resolved or read again. `base`,
    `dev`: already resolved (preset detection; --recipe auto's candidates share them)."""
    from sentadapt.config.validation import check_choice
    from sentadapt.data.corpus import ENCODING_ERRORS, check_has_sentences, check_sources
    from sentadapt.decision.rule import decision_rule
    from sentadapt.model.lora import check_lora_request
    from sentadapt.model.prompts import PAIR, read_prompts
    from sentadapt.model.resolve import check_has_weights, resolve_model
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.base import TEXT
    from sentadapt.teacher import check_teacher
    from sentadapt.train.tracking import resolve_trackers

    check_choice("--encoding-errors", config.encoding_errors, ENCODING_ERRORS)
    decision_rule(config)  # --decision / --risk
    resolve_trackers(config.train.records.report_to)  # a tracker that is not installed: say which extra, before loading
    if base is None or base.name != config.base:  # not resolved yet (or for another name than the config's)
        base = resolve_model(config.base)
    check_has_weights(base)
    # --prompt: a name of the base's prompts (or none); the default resolved to a name, so config.yaml says it
    config = dataclasses.replace(config, prompt=read_prompts(base).name_for(PAIR, config.prompt, base.name))
    teacher_source = None
    if config.teacher is not None:  # loads, and is not the base itself
        teacher_source = check_teacher(config.teacher, base.location)
    elif config.train.distillation.recipe_weight == 0 and config.train.distillation.distill == 0:
        raise ConfigError("recipe_weight: 0 leaves nothing to train; give --teacher MODEL or --set distill=W, "
                          "or a recipe_weight above 0")
    recipe_class = RECIPES.get(config.recipe)
    check_lora_request(config.train, recipe_class)  # peft installed; a recipe that trains the encoder
    _check_teacher_settings(config)
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
    if config.train.dims.sizes and dev.name is None:
        raise ConfigError("--sizes: weighs each size on the dev set against the base's whole vectors; pass --dev "
                          "FILE (e.g. 100 labelled pairs from your domain) or --dev stsb --data-dir DIR")
    run = ResolvedRun(config, base, recipe_class, dev, teacher_source)
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


# Settings that act only on a teacher's distillation (its target, batches, checks and file): without --teacher they
# would change nothing, and a run that lists them in its summary would say otherwise.
TEACHER_SETTINGS = ("teacher_weight", "distill_batches", "distill_neighbours", "teacher_check", "teacher_blend",
                    "teacher_text_field", "teacher_vector_field")


def _check_teacher_settings(config: RunConfig) -> None:
    """A teacher's setting changed without a teacher is an error, not a silent no-op."""
    if config.teacher is not None:
        return
    from sentadapt.config.schema import TrainConfig, flat_values

    values, defaults = flat_values(config.train), flat_values(TrainConfig())
    for name in TEACHER_SETTINGS:
        value = values[name]
        if value != defaults[name]:
            raise ConfigError(f"{name}: acts on a teacher's distillation, and this run has no teacher; give "
                              f"--teacher MODEL (or a vectors file), or drop --set {name}={value}")


def _check_output(config: RunConfig, base: ResolvedModel, resume: bool, overwrite: bool) -> None:
    output = Path(config.output)
    replacing = check_run_output(output, resume, overwrite, config, base)
    _check_free_space(config, base, output, output_is_room=not replacing)


def check_run_output(output: Path, resume: bool, overwrite: bool, config: RunConfig, base: ResolvedModel) -> bool:
    """--output can take this run: a folder (or none yet), writable; one that holds something only with --resume,
    or with --overwrite when sentadapt wrote it and the run reads nothing from inside it. Returns whether the new
    run replaces what is there."""
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output}: exists and is not a directory")
    replacing = not resume and output.is_dir() and holds_anything(output)
    if replacing and not overwrite:
        raise ConfigError(_occupied(output))
    if replacing:
        _check_inputs_outside(config, base, output)  # first: the more telling line when an input is a foreign file
        check_replaceable(f"--output {output}", output, "a run folder of `sentadapt adapt`", is_run_folder,
                          foreign_in_run)
    check_writable(output)
    return replacing


def _check_inputs_outside(config: RunConfig, base: ResolvedModel, output: Path) -> None:
    """What the run reads cannot live in the folder --overwrite sets aside: it would vanish under the run."""
    inputs: list[tuple[str, str | None]] = [("corpus", source) for source in config.corpus]
    inputs += [("--base", base.location if base.is_local else None), ("--dev", config.dev),
               ("--teacher", config.teacher), ("--data-dir", config.data_dir)]
    folder = output.resolve()
    for option, value in inputs:
        if value is None or not Path(value).expanduser().exists():
            continue  # a Hub id or a name such as stsb
        path = Path(value).expanduser().resolve()
        if path == folder or folder in path.parents:
            raise ConfigError(f"--output {output}: {option} {value} is inside this folder, which the new run "
                              "replaces; write the new run to another --output, or move it out first")


def _occupied(output: Path) -> str:
    """Why a new run cannot start in `output` without --overwrite, and what to pass: --resume only where there is
    something to resume."""
    run_dir = RunDir(output)
    if run_dir.is_finished():
        return (f"--output {output}: holds a finished run; pass --overwrite to replace it, or choose another "
                "--output")
    if is_run_folder(output):
        return (f"--output {output}: holds an unfinished run; pass --resume to continue it or --overwrite to "
                "replace it")
    return f"--output {output}: exists and is not empty; choose a new or empty folder"


def check_writable(output: Path) -> None:
    """The nearest existing folder on the way to --output must be a writable directory."""
    from sentadapt.options import check_writable_place

    check_writable_place(f"--output {output}", output)


def _check_free_space(config: RunConfig, resolved: ResolvedModel, output: Path, output_is_room: bool) -> None:
    """Refuse before training when checkpoints and the model would not fit (known for local base models only)."""
    from sentadapt.storage.space import check_free_space, weights_bytes

    weights = weights_bytes(Path(resolved.location)) if resolved.is_local else None
    if weights is not None:
        check_free_space(output, weights, config.train.records.keep_checkpoints, output_is_room)
