"""Planning a run before any weight loads, in the order a run meets it: what it is asked for (`Settings`, and the
`Events` it reports to), its config assembled in one place (`assemble`: every run, plain, staged or a `--recipe auto`
candidate, layers the dataclass defaults < the recipe's paper settings < the preset for the base (the tuned-base
defaults, and the teacher-run defaults with --teacher) < the `--config` file < flags < `--set` and the API's config
keywords < a candidate's own settings (`consert:lr=1e-5`)), resume decided (`resume_auto_mode`, `resumed_config`),
and the checks (`check_run`: model, corpus files, dev set, decision rule, teacher, output directory), which hand on a
`ResolvedRun`: what they resolved and read is not resolved or read again.

A run's local input files are named by their absolute paths (so `--resume` works from anywhere) and identified by
the sha256 of their bytes (`fingerprints`: a resumed run refuses a corpus that changed, where a size and mtime would
differ after a mere copy to another node)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.config.schema import FLAT_KEYS, RunConfig
from sentadapt.errors import ConfigError, ModelError
from sentadapt.events import Note, Progress, no_progress, quiet
from sentadapt.model.resolve import DEFAULT_BASE_MODEL, LazyModel, ResolvedModel, check_has_weights, resolve_model
from sentadapt.recipes import DEFAULT_RECIPE
from sentadapt.storage.durable import file_sha256
from sentadapt.storage.ownership import check_replaceable, foreign_in_run
from sentadapt.storage.run_folder import RunDir, holds_anything, is_run_folder
from sentadapt.train.compute import is_main_process
from sentadapt.train.steps import StepPlan

if TYPE_CHECKING:
    from sentadapt.evaluation.evaluator import Evaluator


# ----------------------------------------------------------------------------- what a run is asked for


# a config value given by name: what a TrainConfig or recipe field holds
ConfigValue = bool | int | float | str | tuple[int, ...] | tuple[float, ...] | tuple[str, ...] | None


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
    # the options given that set config fields, by config key (run/adapt_options.py: their types are the fields'):
    # a TrainConfig flat key (lr, batch_size, lora_r, …) or a RunConfig field (dev, teacher, decision, …)
    flags: dict[str, ConfigValue] = field(default_factory=dict)
    # any TrainConfig or recipe field as a typed value (the API's keywords beyond its options): --set's precedence
    set_values: dict[str, ConfigValue] = field(default_factory=dict)

    def train_flags(self) -> dict[str, ConfigValue]:
        """The flags that set TrainConfig fields, by flat key."""
        return {key: value for key, value in self.flags.items() if key in FLAT_KEYS}

    def run_flags(self) -> dict[str, ConfigValue]:
        """The flags that set RunConfig fields."""
        return {key: value for key, value in self.flags.items() if key not in FLAT_KEYS}

    @property
    def num_proc(self) -> int | None:
        """--num-proc: the one setting of the machine, not the run (a resumed run applies it)."""
        value = self.flags.get("num_proc")
        return value if isinstance(value, int) else None


# ------------------------------------------------------------------ its config, assembled in one place


def recipe_of(config_file: Path | None) -> str | None:
    if config_file is None:
        return None
    from sentadapt.config.merging import load_yaml

    return load_yaml(config_file).get("recipe")


def new_config(settings: Settings) -> RunConfig:
    """The config of a new run (`assemble`'s layers)."""
    return new_config_and_base(settings)[0]


def new_config_and_base(settings: Settings) -> tuple[RunConfig, ResolvedModel | None]:
    """`new_config`, and the base model when preset detection resolved it (None when it did not need it): given to
    `check_run` so that the base is resolved once."""
    if not settings.corpus:
        raise ConfigError("CORPUS: give at least one corpus file (or --resume to continue a run)")
    recipe_name = settings.recipe or recipe_of(settings.config_file) or DEFAULT_RECIPE
    base = LazyModel(settings.base or DEFAULT_BASE_MODEL)
    config = assemble(recipe_name, settings, base, corpus=list(settings.corpus), output=str(settings.output))
    return config, base.resolved


def assemble(recipe_name: str, settings: Settings, resolve_base: Callable[[], ResolvedModel], *, corpus: list[str],
             output: str, yaml_train: dict[str, Any] | None = None,
             candidate_values: dict[str, Any] | None = None) -> RunConfig:
    """Every run's RunConfig, in the layers of the module docstring, lowest first. `resolve_base()` gives the base
    model when the preset needs to look at it (called at most once). A single run reads its `--config` file (its
    train and recipe_args); `--recipe auto` gives the file's `train:` values (`yaml_train`, read once for every
    candidate) and each candidate's own settings (`candidate_values`, above everything)."""
    from sentadapt.config.merging import build_config
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.presets import choose_preset

    recipe_class = RECIPES.get(recipe_name)
    # the preset: the tuned-base defaults when the base is sentence-tuned, and the teacher-run defaults on top
    preset = choose_preset(settings.preset, resolve_base, recipe_class, settings.flags.get("teacher") is not None)
    spec = recipe_class.spec
    config = build_config(recipe_name, spec.settings, spec.train_defaults, settings.config_file,
                          settings.train_flags(), list(settings.set_options), set_values=settings.set_values,
                          yaml_train=yaml_train, candidate_values=candidate_values,
                          preset_values=preset.values, preset=preset.to_dict(),
                          base=settings.base or DEFAULT_BASE_MODEL, corpus=corpus, output=output,
                          **settings.run_flags())
    return dataclasses.replace(config, sources={**config.sources,
                                                **_run_sources(settings, candidate_values, config.sources)})


def _run_sources(settings: Settings, candidate_values: dict[str, Any] | None, built: dict[str, str]) -> dict[str, str]:
    """Where the run's own options came from (a flag, or their default; an auto candidate's recipe is the
    candidate's), as `--dry-run` shows them beside the training values' (`built`: build_config's)."""
    from sentadapt.config.merging import CANDIDATE, DEFAULT, FLAG
    from sentadapt.run.adapt_options import ADAPT_OPTIONS, RUN

    # a value equal to the option's default is the default: the command line passes --decision, --risk,
    # --encoding-errors and --streaming with their defaults whether typed or not
    given = {"base": settings.base, "recipe": settings.recipe, **settings.run_flags()}
    sources = {option.name: FLAG if given.get(option.name) not in (None, option.default) else DEFAULT
               for option in ADAPT_OPTIONS if option.target == RUN or option.name in ("recipe", "base")}
    for option in ADAPT_OPTIONS:  # a value an environment variable gave is that variable's, not a flag's (issue 82)
        value = given.get(option.name)
        if option.envvar and value is not None and str(value) == os.environ.get(option.envvar):
            sources[option.name] = f"${option.envvar}"
    if candidate_values is not None:
        sources["recipe"] = CANDIDATE
    elif settings.recipe is None:  # the --config file's, when it names one (build_config read it)
        sources["recipe"] = built.get("recipe", DEFAULT)
    return sources


# ------------------------------------------------------------------------------------ the run resolved


@dataclass(frozen=True)
class DevSet:
    """The run's dev set: its display name (None: no dev set) and its evaluator, read from disk on first use and
    kept (a `--dry-run` never asks for it, so it never reads the whole file)."""

    name: str | None
    read: Callable[[], Evaluator] | None  # resolve_dev_set's factory: reads and checks the whole dev set

    @classmethod
    def of(cls, config: RunConfig) -> DevSet:
        """The dev set `config` names (its type and metric checked now; nothing read yet)."""
        from sentadapt.evaluation.task_types import resolve_dev_set

        return cls(*resolve_dev_set(config.dev, config.data_dir, config.dev_metric))

    @cached_property
    def evaluator(self) -> Evaluator | None:
        # cached_property writes the instance's __dict__ directly, so it works on a frozen dataclass
        return None if self.read is None else self.read()


def same_dev(config: RunConfig, other: RunConfig) -> bool:
    """Whether two configs name the same dev set (then one DevSet, read once, serves both)."""
    return (config.dev, config.data_dir, config.dev_metric) == (other.dev, other.data_dir, other.dev_metric)


@dataclass(frozen=True)
class ResolvedRun:
    """A RunConfig with what it names resolved: made by `run.plan.check_run` (every check passed) or, for a
    config built by hand (tests, bench), by `resolve_run` (no checks)."""

    config: RunConfig
    base: ResolvedModel  # config.base resolved
    recipe_class: Any  # the recipe's class (a sentadapt.recipes.base.Recipe subclass)
    dev: DevSet
    # --teacher resolved: a model, or a vectors file; None: no teacher (config.teacher is the argument as given)
    teacher_source: ResolvedModel | Path | None = None

    def for_stage(self, stage_config: RunConfig) -> ResolvedRun:
        """The run of one stage: a later stage starts from the previous stage's model, a folder that exists only
        once that stage finished, so it is resolved here, once; the first stage keeps the checked base."""
        base = self.base if stage_config.base == self.config.base else resolve_model(stage_config.base)
        return dataclasses.replace(self, config=stage_config, base=base)


def resolve_run(config: RunConfig) -> ResolvedRun:
    """Resolve a config that `check_run` did not (a RunConfig built in code): no checks, each name resolved once."""
    from sentadapt.recipes import RECIPES
    from sentadapt.teacher import resolve_source

    source = None if config.teacher is None else resolve_source(config.teacher)
    return ResolvedRun(config, resolve_model(config.base), RECIPES.get(config.recipe), DevSet.of(config), source)


# ---------------------------------------------------------------------- the steps it plans (--dry-run)


def planned_steps(run: ResolvedRun, progress: Progress | None = None) -> list[StepPlan]:
    """The steps each stage of a run will train, from its examples counted as the run will read them (`adapt
    --dry-run`); where the recipe cannot count a stage's before training (`Stage.count`: a Hub dataset), a plan
    that says so (`StepPlan.uncounted`). `progress`: a bar while they are read."""
    stages = run.recipe_class.stages(run.config.recipe_args)
    plans = []
    for stage in stages:
        examples = stage.count(run.config, progress or no_progress)
        name = stage.name if len(stages) > 1 else ""
        plans.append(StepPlan.of(examples, run.config, stage.noun, name) if examples is not None
                     else StepPlan.uncounted(run.config, stage.noun, name))
    return plans


def arithmetic_line(run: ResolvedRun) -> str:
    """What `adapt --dry-run` says of the run's precision and length chunks on this CPU (train/pass_costs.py), the
    base's architecture read from its config.json (a Hub id not yet downloaded has none: the run times it); nothing
    for a recipe that keeps the encoder frozen (CLSR: no pass of it is trained, so none is timed)."""
    from sentadapt.model.st_modules import transformer_config
    from sentadapt.train.pass_costs import planned_arithmetic

    if not run.recipe_class.spec.trains_encoder:
        return ""
    architecture = None
    if run.base.is_local:  # a file the dry run cannot read only means no timing is found for it
        with contextlib.suppress(OSError, ValueError, ModelError):
            architecture = json.loads(transformer_config(Path(run.base.location)).read_text(encoding="utf-8"))
    return planned_arithmetic(run.config.train.mixed_precision, architecture if isinstance(architecture, dict)
                              else None)


# ---------------------------------------------------------------------------------------------- resume


RESUME_LAST = "last"  # continue from the last checkpoint (a bare `--resume`)
RESTART = "restart"  # `--resume auto` on a run that stopped before its first checkpoint: start it again
FINISHED = "finished"  # `--resume auto` on a finished run: nothing to do


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


def resumed_config(output: Path, num_proc: int | None = None) -> RunConfig:
    """The saved config.yaml of a run to resume (authoritative); only the machine setting num_proc may change."""
    from sentadapt.config.merging import load_run_config
    from sentadapt.recipes import RECIPES

    staged = RunDir(output).staged_run()
    if staged is not None:  # resumed alone, a stage would train on as a run of its own, inside itself
        raise ConfigError(f"--output {output}: is an earlier stage of the run in {staged.path}; resume the whole run: "
                          f"sentadapt adapt --resume --output {staged.path}")
    config = load_run_config(RunDir(output).config_file, {name: RECIPES.get(name).spec.settings for name in RECIPES})
    # the directory may have been moved since it was written; num_proc is the machine's, not the run's
    config = dataclasses.replace(config, output=os.path.abspath(output), num_proc=num_proc or config.num_proc)
    return config


def train_flag(key: str) -> str:
    """How the command line spells the flag that set a training key (the LoRA keys all come from --lora)."""
    from sentadapt.run.adapt_options import OPTIONS_BY_NAME

    return "--lora" if key.startswith("lora_") else OPTIONS_BY_NAME[key].flag


def ignored_on_resume(settings: Settings, extra: Sequence[str] = ()) -> list[str]:
    """The options a resumed run does not apply (its saved config is authoritative; only --num-proc, a setting of
    the machine, applies), as the command line spells them."""
    from sentadapt.run.adapt_options import OPTIONS_BY_NAME

    ignored = [train_flag(key) for key in settings.train_flags()]
    for key, value in settings.run_flags().items():
        envvar = OPTIONS_BY_NAME[key].envvar
        from_environment = envvar is not None and str(value) == os.environ.get(envvar)
        if value != OPTIONS_BY_NAME[key].default and key != "num_proc" and not from_environment:
            ignored.append(OPTIONS_BY_NAME[key].flag)  # a value $SENTADAPT_DATA_DIR gave is not the user's to hear of
    ignored += ["--base"] if settings.base is not None else []
    ignored += ["--recipe"] if settings.recipe is not None else []
    ignored += ["--config"] if settings.config_file is not None else []
    ignored += ["--set"] if settings.set_options or settings.set_values else []
    ignored += ["--preset"] if settings.preset else []
    return list(dict.fromkeys(ignored + list(extra)))


# -------------------------------------------------------------------- the checks before anything loads


def check_run(config: RunConfig, resume: bool, overwrite: bool, dry_run: bool, require_improvement: bool,
              base: ResolvedModel | None = None, dev: DevSet | None = None) -> ResolvedRun:
    """Fail fast, before any weights load: model, corpus files, dev set, decision rule, output directory. Returns
    the run resolved, for `train_run`: what was resolved and read here is not resolved or read again. `base`,
    `dev`: already resolved (preset detection; --recipe auto's candidates share them)."""
    from sentadapt.config.schema import check_choice
    from sentadapt.data.corpus import ENCODING_ERRORS, check_has_sentences, check_sources
    from sentadapt.decision.rule import decision_rule
    from sentadapt.model.lora import check_lora_request
    from sentadapt.model.prompts import PAIR, read_prompts
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
    for stage in recipe_class.stages(config.recipe_args):  # e.g. CLSR: pairs, not sentences
        stage.check(config.corpus, config.recipe_args)
    if recipe_class.spec.trains_on == TEXT:  # an empty corpus is found now, not after the model loaded
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
    """Every local path of the run absolute (Hub ids and names such as `stsb` as given), the recipe's files too
    (its settings' fields with PATHS metadata: ConSERT's `nli`)."""
    args = config.recipe_args
    files = {} if not dataclasses.is_dataclass(args) else {
        item.name: tuple(absolute(path) or path for path in getattr(args, item.name))
        for item in dataclasses.fields(args) if item.metadata.get("paths")}
    return dataclasses.replace(
        config, base=absolute(config.base) or config.base, corpus=[absolute(c) or c for c in config.corpus],
        output=os.path.abspath(Path(config.output).expanduser()), dev=absolute(config.dev),
        teacher=absolute(config.teacher), data_dir=absolute(config.data_dir),
        recipe_args=dataclasses.replace(args, **files) if files else args)


def _with_corpus_fingerprints(config: RunConfig, resume: bool) -> RunConfig:
    """A new run records each corpus file's sha256; a resumed one must find the same bytes (a run that saved none,
    from before this check, is not checked)."""
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


# --------------------------------------------------------------------- what identifies its input files


def absolute(value: str | None) -> str | None:
    """A path that exists, made absolute (`~` expanded, `..` folded); anything else (a Hub id, `stsb`, `none`) as
    given."""
    if value is None:
        return None
    path = Path(value).expanduser()
    return os.path.abspath(path) if path.exists() else value


def fingerprints(sources: Sequence[str]) -> list[str | None]:
    """Each local file's sha256 (None for a Hub dataset or a folder, which are not hashed)."""
    return [file_sha256(Path(source)) if Path(source).is_file() else None for source in sources]
