"""`adapt`, whole: what `sentadapt adapt` and `sentadapt.adapt()` both call. It reads the request (a new run, a
resumed one, `--resume auto`, `--recipe auto`), checks everything before loading weights, trains, decides, and
returns what happened; the caller renders it (the CLI: rich tables; the API: a result object)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from sentadapt.config.schema import RunConfig, flat_values
from sentadapt.diagnostics.plots import require_matplotlib
from sentadapt.errors import ConfigError, NoImprovement
from sentadapt.events import Note, Progress
from sentadapt.model.lora import lora_flags
from sentadapt.options import check_at_least, checked
from sentadapt.run.adapt_options import ADAPT_OPTIONS, OPTIONS_BY_NAME, route
from sentadapt.run.curve import write_curve_plot
from sentadapt.run.execute import held_by_another, recover, refuse_if_held, train_run
from sentadapt.run.plan import (
    FINISHED,
    RESTART,
    RESUME_LAST,
    ConfigValue,
    Events,
    ResolvedRun,
    Settings,
    arithmetic_line,
    check_run,
    ignored_on_resume,
    new_config_and_base,
    planned_steps,
    recipe_of,
    resume_auto_mode,
    resumed_config,
    train_flag,
)
from sentadapt.storage.run_folder import CONFIG_FILE, RunDir, aside_path
from sentadapt.text_tables import TextTable
from sentadapt.train.compute import is_main_process
from sentadapt.train.steps import StepPlan

AUTO = "auto"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class AdaptRequest:
    settings: Settings
    candidates: list[str] = field(default_factory=list)  # --recipe auto's --candidates
    resume: str | None = None  # None | "last" (continue from the last checkpoint) | "auto" (resume if there is one)
    overwrite: bool = False
    dry_run: bool = False
    trust_remote_code: bool = False
    allow_pickle: bool = False
    require_improvement: bool = False
    plot: bool = False  # RUN/curve.png at the end (run/curve.py)


@dataclass
class AdaptOutcome:
    """What `adapt` did. `status`: trained | dry-run (nothing loaded: `configs` say what would run) | finished
    (`--resume auto` on a finished run: nothing to do)."""

    output: Path
    status: str
    configs: list[Any] = field(default_factory=list)  # the run's RunConfig (one per candidate with auto)
    result: Any = None  # the single run's TrainResult (main process)
    auto: Any = None  # --recipe auto's AutoOutcome (main process)
    candidates: list[str] = field(default_factory=list)  # --recipe auto: each candidate's spec, in config order
    resolved: list[ResolvedRun] = field(default_factory=list)  # each config's run as check_run resolved it
    plans: list[list[StepPlan]] = field(default_factory=list)  # dry run: each config's stages' steps (planned_steps)
    arithmetic: list[str] = field(default_factory=list)  # dry run: each config's planned_arithmetic line

    @property
    def decision(self) -> Any:
        """The run's Decision (decision/rule.py), or None when nothing was trained on this process."""
        from sentadapt.decision.rule import Decision

        if self.result is not None:
            return self.result.decision
        if self.auto is not None:
            choice = self.auto.choice
            return Decision(choice.decision, choice.reason, choice.rule, choice.risk)
        return None


def run(request: AdaptRequest, events: Events | None = None) -> AdaptOutcome:
    """Run `adapt` as the request says (what the CLI calls); raises the project's typed errors (NoImprovement for
    a kept base with require_improvement)."""
    events = events or Events()
    settings = request.settings
    check_at_least("--num-proc", settings.num_proc, 1)
    output = Path(settings.output)
    if not request.dry_run and is_main_process() and aside_path(output).is_dir() and not held_by_another(output):
        recover(output, events.note)  # a run an earlier, killed --overwrite set aside: back before anything reads
    if request.resume and not request.dry_run and is_main_process():
        refuse_if_held(output)  # a live run's folder: name it, not the checkpoint it has not written yet
    mode = resume_auto_mode(output, events.for_process().note) if request.resume == AUTO else request.resume
    if mode == FINISHED:
        return AdaptOutcome(output, FINISHED)
    if mode not in (None, RESUME_LAST, RESTART):
        raise ConfigError(f"--resume: unknown mode '{mode}'; use --resume (the last checkpoint) or --resume auto")
    resume, overwrite = mode == RESUME_LAST, request.overwrite or mode == RESTART
    if resume and RunDir(output).is_finished():
        raise ConfigError(f"--resume: {output} is a finished run (its metrics.json is written); nothing to resume: "
                          "evaluate or export it, or pass --overwrite instead of --resume to train a new run there")
    if not resume and settings.corpus:  # a folder or a pattern → its files, recorded in config.yaml as such
        from sentadapt.data.corpus import corpus_files

        settings = dataclasses.replace(settings, corpus=tuple(corpus_files(settings.corpus)))
        request = dataclasses.replace(request, settings=settings)
    if request.candidates and (settings.recipe or recipe_of(settings.config_file)) != AUTO:
        raise ConfigError("--candidates: only with --recipe auto (or a --config file with recipe: auto)")
    if _is_auto(output, resume, settings):
        return _adapt_auto(request, events, resume, overwrite)
    restart = mode != RESTART and RunDir(output).never_started()  # stopped before its first checkpoint
    base = None  # the base model, when making the config resolved it (preset detection)
    if resume:
        config = resumed_config(output, settings.num_proc)
        _note_ignored(request, events, CONFIG_FILE)
        _note_changed_on_auto_resume(request, events, config)
    else:
        config, base = new_config_and_base(settings)
    if restart and not request.dry_run and not held_by_another(output):  # a live run: the lock refuses it below
        saved = " with its saved config.yaml" if resume else ""
        events.for_process().note(f"--output {output}: holds a run stopped before its first checkpoint; starting it "
                                  f"again from the beginning{saved}")
    if restart:
        resume, overwrite = False, True
    resolved = check_run(config, resume, overwrite, request.dry_run, request.require_improvement, base)
    config = resolved.config  # as checked: the prompt resolved to a name
    if request.dry_run:
        plans = planned_steps(resolved, events.for_process().progress)
        return AdaptOutcome(output, "dry-run", [config], resolved=[resolved], plans=[plans],
                            arithmetic=[arithmetic_line(resolved)])
    if request.plot:
        require_matplotlib()  # said before training, not after it
    result = train_run(resolved, resume, overwrite, request.trust_remote_code, request.allow_pickle, events)
    if request.plot and result is not None:
        events.note(f"curve: {write_curve_plot(output, resolved.dev.evaluator)}")
    if request.require_improvement and result is not None and result.decision.keep_base:
        raise NoImprovement(f"--require-improvement: keep the base model: {result.decision.reason}; "
                            f"{result.output} holds what the run trained")
    return AdaptOutcome(output, "trained", [config], result=result, resolved=[resolved])


def _is_auto(output: Path, resume: bool, settings: Settings) -> bool:
    if resume:
        return RunDir(output).is_auto()
    return (settings.recipe or recipe_of(settings.config_file)) == AUTO


def _note_ignored(request: AdaptRequest, events: Events, saved: str, extra: tuple[str, ...] = ()) -> None:
    ignored = ignored_on_resume(request.settings, extra)
    if (ignored or request.settings.corpus) and request.resume != AUTO:  # --resume auto said it already
        events.for_process().note(f"--resume uses the run's saved {saved}; ignoring {', '.join(ignored) or 'CORPUS'}")


def _note_changed_on_auto_resume(request: AdaptRequest, events: Events, config: RunConfig) -> None:
    """`--resume auto` takes the command typed again: its flags are no news where they equal the saved run's; one
    that differs (`--max-steps 10` on a run saved with 4) is said to be ignored, with the way to change it."""
    if request.resume != AUTO:
        return
    saved = flat_values(config.train)
    changed = [f"{train_flag(key)} {value} (saved: {saved[key]})"
               for key, value in request.settings.train_flags().items() if key in saved and saved[key] != value]
    if changed:
        events.for_process().note(f"--resume auto: the run goes on with its saved config.yaml; ignoring "
                                  f"{', '.join(changed)}: start a new run (--overwrite or another --output) to change "
                                  "them")


def _adapt_auto(request: AdaptRequest, events: Events, resume: bool, overwrite: bool) -> AdaptOutcome:
    from sentadapt.run.auto.choice import read_plan
    from sentadapt.run.auto.launch import check_auto, plan_auto, run_auto

    output = Path(request.settings.output)
    base = None  # the base model, when planning resolved it (preset detection)
    if resume:
        if RunDir(output).is_finished():
            raise ConfigError(f"--resume: {output} is a finished run (metrics.json is written); nothing to resume — "
                              "start a new run with another --output")
        runs = read_plan(output)
        _note_ignored(request, events, "plan and configs", ("--candidates",) if request.candidates else ())
    else:
        runs, base = plan_auto(request.settings, request.candidates)
    resolved = check_auto(runs, output, resume, overwrite, request.dry_run, request.require_improvement, base)
    # each candidate's config as checked (its prompt resolved to a name): what its config.yaml says
    runs = [dataclasses.replace(run, config=checked.config) for run, checked in zip(runs, resolved, strict=True)]
    configs = [run.config for run in runs]
    specs = [run.candidate.spec for run in runs]
    if request.dry_run:
        return AdaptOutcome(output, "dry-run", configs, candidates=specs, resolved=resolved,
                            plans=[planned_steps(run, events.for_process().progress) for run in resolved],
                            arithmetic=[arithmetic_line(run) for run in resolved])
    if request.plot:
        require_matplotlib()
    outcome = run_auto(runs, resolved, output, not resume, overwrite, request.trust_remote_code,
                       request.allow_pickle, events)
    if request.plot and outcome is not None:  # each candidate's curve in its own folder
        for candidate in resolved:
            if RunDir(candidate.config.output).is_finished():
                events.note(f"curve: {write_curve_plot(Path(candidate.config.output), candidate.dev.evaluator)}")
    if request.require_improvement and outcome is not None and outcome.choice.chosen is None:
        raise NoImprovement(f"--require-improvement: keep the base model: {outcome.choice.reason}; "
                            f"{RunDir(output).candidates} holds what each candidate trained")
    return AdaptOutcome(output, "trained", configs, auto=outcome, candidates=specs, resolved=resolved)


@dataclass(frozen=True)
class AdaptResult:
    """What `sentadapt.adapt()` returns: where the model is, the decision and why, and the run's record."""

    output: Path
    status: str  # trained | dry-run | finished (--resume auto on a finished run)
    decision: str | None  # use-adapted | keep-base | None (no dev set, or nothing trained)
    reason: str
    rule: str | None  # the decision rule: risk | strict | positive
    risk: float | None  # the risk rule's estimate that the adapted model is no better than the base
    metrics: dict[str, Any]  # OUTPUT/metrics.json ({} when nothing finished)
    configs: tuple[Any, ...]  # the resolved RunConfig (one per candidate with recipe="auto")
    # the summary table `sentadapt adapt` prints (sentadapt.text_tables; print() gives text): a single run that trained
    summary: TextTable | None = None

    @property
    def use_adapted(self) -> bool:
        return self.decision == "use-adapted"

    def __repr__(self) -> str:
        """What a notebook shows: the outcome with its numbers rounded as the summary prints them (the full record
        is `metrics`, the settings `configs`, the table `summary`)."""
        fields = [f"output={str(self.output)!r}", f"status={self.status!r}", f"decision={self.decision!r}"]
        if self.rule is not None:
            fields.append(f"rule={self.rule!r}")
        if self.risk is not None:
            fields.append(f"risk={self.risk:.3f}")
        dev = _dev_line(self.metrics)
        if dev:
            fields.append(f"dev={dev!r}")
        fields.append(f"reason={self.reason!r}")
        return f"AdaptResult({', '.join(fields)})"


def _dev_line(metrics: dict[str, Any]) -> str:
    """"base 76.04, best 76.53 at step 20, Δ +0.49 [+0.01, +1.97]" from metrics.json ("" without a dev set)."""
    if metrics.get("base_score") is None or metrics.get("best_score") is None:
        return ""
    line = f"base {metrics['base_score']:.2f}, best {metrics['best_score']:.2f} at step {metrics.get('best_step')}"
    if metrics.get("dev_change") is not None:
        line += f", Δ {metrics['dev_change']:+.2f}"
        interval = metrics.get("dev_change_ci")
        if interval:
            line += f" [{interval[0]:+.2f}, {interval[1]:+.2f}]"
    return line


def _from_the_option_table(function: F) -> F:
    """adapt()'s signature and type hints generated from the option table, as the command's are, then `checked`
    as every public call is: a wrong type is a ConfigError naming the flag, a lone string where a list is expected
    a list of one."""
    signature = _api_signature()
    function.__signature__ = signature  # type: ignore[attr-defined]
    # each keyword's description, as `sentadapt adapt --help` gives its flag's: written once, in the table or the field
    function.__doc__ = f"{function.__doc__}\n\n    Keywords:\n" + "\n".join(
        f"    {option.name} ({option.api_name}): {option.help}" for option in ADAPT_OPTIONS)
    # the options and the callbacks; not **config_keys (each a setting of its own type: build_config checks them)
    function.__annotations__ = {name: parameter.annotation for name, parameter in signature.parameters.items()
                                if parameter.kind is not inspect.Parameter.VAR_KEYWORD}
    return checked({**{option.name: option.api_name for option in ADAPT_OPTIONS},
                    "note": "note", "progress": "progress"})(function)


def _api_signature() -> inspect.Signature:
    """adapt()'s signature from the option table: the corpus first (positional too), every other option a typed
    keyword with its default, the callbacks, then any training or recipe setting (**config_keys)."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    corpus, *others = ADAPT_OPTIONS
    parameters = [inspect.Parameter("corpus", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=corpus.default,
                                    annotation=corpus.api_type)]
    parameters += [inspect.Parameter(option.name, keyword, annotation=option.api_type,
                                     default=inspect.Parameter.empty if option.default is ... else option.default)
                   for option in others]
    parameters += [inspect.Parameter("note", keyword, default=None, annotation=Note | None),
                   inspect.Parameter("progress", keyword, default=None, annotation=Progress | None),
                   inspect.Parameter("config_keys", inspect.Parameter.VAR_KEYWORD, annotation=ConfigValue)]
    return inspect.Signature(parameters, return_annotation=AdaptResult)


@_from_the_option_table
def adapt(corpus: Any = (), **options: Any) -> AdaptResult:
    """Adapt `base` to the corpus with a recipe (`sentadapt adapt`, same options and defaults; `set_options` are
    `--set key=value` strings, `resume` is True/"last" or "auto", `teacher` is `--teacher`; `prompt`: the base's
    prompt name for the training sentences, or "none"; default its default_prompt_name; `lora` is `--lora`'s spec,
    e.g. "r=16,alpha=32"; `matryoshka` is `--matryoshka`'s sizes, e.g. (384, 192, 96)).
    Every other training or recipe setting is a keyword too, typed, with `--set`'s precedence:
    `adapt("corpus.txt", output="runs/x", distill_kind="mse", temperature=0.05)`. Raises the project's
    typed errors with the CLI's one-line messages (`NoImprovement` for a kept base with `require_improvement`).
    Prints nothing: `note` gets one line per event, `progress(description, total)` may return a progress bar
    context. (The keywords are adapt_options.ADAPT_OPTIONS', as the command's options are: the signature is
    generated from that table by `_from_the_option_table`.)"""
    note, progress = options.pop("note", None), options.pop("progress", None)
    config_keys = {name: options.pop(name) for name in list(options) if name not in OPTIONS_BY_NAME}
    options["corpus"] = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    _check_config_keys(config_keys)
    request = request_from(options, config_keys)
    outcome = run(request, Events(note=note or (lambda _text: None), progress=progress))
    return _result(outcome)


def request_from(options: dict[str, Any], config_keys: dict[str, Any] | None = None) -> AdaptRequest:
    """The request `adapt` runs, from its options by name (adapt_options.ADAPT_OPTIONS; the CLI and the API both call
    this): config options routed to the config's fields, the others to the request."""
    flags, own = route(options)
    flags.update(lora_flags(own.get("lora")))
    config_file = own.get("config")
    resume = own.get("resume")
    settings = Settings([str(path) for path in own.get("corpus") or ()], Path(own["output"]), own.get("recipe"),
                        own.get("base"), None if config_file is None else Path(config_file),
                        list(own.get("set_options") or ()), own.get("preset"), flags, dict(config_keys or {}))
    return AdaptRequest(settings, list(own.get("candidates") or ()), RESUME_LAST if resume is True else resume or None,
                        bool(own.get("overwrite")), bool(own.get("dry_run")), bool(own.get("trust_remote_code")),
                        bool(own.get("allow_pickle")), bool(own.get("require_improvement")), bool(own.get("plot")))


def _check_config_keys(config_keys: dict[str, Any]) -> None:
    """A keyword beyond adapt's options must be a training or recipe setting (what `--set` takes)."""
    from sentadapt.recipes import RECIPES
    from sentadapt.registry import unknown_name_message
    from sentadapt.run.adapt_options import config_keys as train_keys

    known = set(train_keys()) | {f.name for name in RECIPES for f in fields(RECIPES.get(name).spec.settings)}
    for key in config_keys:
        if key not in known:
            raise ConfigError("adapt(): " + unknown_name_message("keyword", key, sorted(known | set(OPTIONS_BY_NAME))))


def _result(outcome: AdaptOutcome) -> AdaptResult:
    metrics = RunDir(outcome.output).read_metrics() or {}
    decided = outcome.decision
    if decided is None and metrics:  # --resume auto on a finished run: its recorded decision
        from sentadapt.decision.rule import decision_of

        decided = decision_of(metrics)
    summary = None
    if outcome.result is not None:
        from sentadapt.run.summary import adapt_summary_table

        summary = adapt_summary_table(outcome.result, outcome.configs[-1])
    return AdaptResult(outcome.output, outcome.status, decided.decision if decided else None,
                       decided.reason if decided else "", decided.rule if decided else None,
                       decided.risk if decided else None, metrics, tuple(outcome.configs), summary)


__all__ = ["AdaptOutcome", "AdaptRequest", "AdaptResult", "Events", "Settings", "adapt", "is_main_process", "run"]
