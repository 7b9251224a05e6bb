"""`adapt`, whole: what `sentadapt adapt` and `sentadapt.adapt()` both call. It reads the request (a new run, a
resumed one, `--resume auto`, `--recipe auto`), checks everything before loading weights, trains, decides, and
returns what happened; the caller renders it (the CLI: rich tables; the API: a result object)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.errors import ConfigError, NoImprovement
from sentadapt.train.lifecycle import (
    FINISHED,
    RESTART,
    RESUME_LAST,
    Events,
    Settings,
    check_run,
    ignored_on_resume,
    is_main_process,
    new_config,
    recipe_of,
    resume_auto_mode,
    resumed_config,
    train_run,
)

AUTO = "auto"


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

    @property
    def decision(self) -> Any:
        """The run's Decision (evaluation/decision.py), or None when nothing was trained on this process."""
        from sentadapt.evaluation.decision import Decision

        if self.result is not None:
            return self.result.decision
        if self.auto is not None:
            choice = self.auto.choice
            return Decision(choice.decision, choice.reason, choice.rule, choice.risk)
        return None


def adapt(request: AdaptRequest, events: Events | None = None) -> AdaptOutcome:
    """Run `adapt` as the request says; raises the project's typed errors (NoImprovement for a kept base with
    require_improvement)."""
    events = events or Events()
    settings = request.settings
    output = Path(settings.output)
    mode = resume_auto_mode(output, events.for_process().note) if request.resume == AUTO else request.resume
    if mode == FINISHED:
        return AdaptOutcome(output, FINISHED)
    if mode not in (None, RESUME_LAST, RESTART):
        raise ConfigError(f"--resume: unknown mode '{mode}'; use --resume (the last checkpoint) or --resume auto")
    resume, overwrite = mode == RESUME_LAST, request.overwrite or mode == RESTART
    if request.candidates and (settings.recipe or recipe_of(settings.config_file)) != AUTO:
        raise ConfigError("--candidates: only with --recipe auto (or a --config file with recipe: auto)")
    if _is_auto(output, resume, settings):
        return _adapt_auto(request, events, resume, overwrite)
    if resume:
        config = resumed_config(output, settings.run_fields.get("num_proc"))
        _note_ignored(request, events, "config.yaml")
    else:
        config = new_config(settings)
    check_run(config, resume, overwrite, request.dry_run, request.require_improvement)
    if request.dry_run:
        return AdaptOutcome(output, "dry-run", [config])
    result = train_run(config, resume, overwrite, request.trust_remote_code, request.allow_pickle, events)
    if request.require_improvement and result is not None and result.decision.keep_base:
        raise NoImprovement(f"--require-improvement: keep the base model: {result.decision.reason}; "
                            f"{result.output} holds what the run trained")
    return AdaptOutcome(output, "trained", [config], result=result)


def _is_auto(output: Path, resume: bool, settings: Settings) -> bool:
    from sentadapt.train.candidates import PLAN_FILE

    if resume:
        return (output / PLAN_FILE).is_file()
    return (settings.recipe or recipe_of(settings.config_file)) == AUTO


def _note_ignored(request: AdaptRequest, events: Events, saved: str, extra: tuple[str, ...] = ()) -> None:
    ignored = ignored_on_resume(request.settings, extra)
    if (ignored or request.settings.corpus) and request.resume != AUTO:  # --resume auto said it already
        events.for_process().note(f"--resume uses the run's saved {saved}; ignoring {', '.join(ignored) or 'CORPUS'}")


def _adapt_auto(request: AdaptRequest, events: Events, resume: bool, overwrite: bool) -> AdaptOutcome:
    from sentadapt.train.auto import read_plan
    from sentadapt.train.auto_run import check_auto, plan_auto, run_auto

    output = Path(request.settings.output)
    if resume:
        if (output / "metrics.json").is_file():
            raise ConfigError(f"--resume: {output} is a finished run (metrics.json is written); nothing to resume — "
                              "start a new run with another --output")
        runs = read_plan(output)
        _note_ignored(request, events, "plan and configs", ("--candidates",) if request.candidates else ())
    else:
        runs = plan_auto(request.settings, request.candidates)
    check_auto(runs, output, resume, overwrite, request.dry_run, request.require_improvement)
    configs = [run.config for run in runs]
    specs = [run.candidate.spec for run in runs]
    if request.dry_run:
        return AdaptOutcome(output, "dry-run", configs, candidates=specs)
    outcome = run_auto(runs, output, not resume, overwrite, request.trust_remote_code, request.allow_pickle, events)
    if request.require_improvement and outcome is not None and outcome.choice.chosen is None:
        raise NoImprovement(f"--require-improvement: keep the base model: {outcome.choice.reason}; "
                            f"{output / 'candidates'} holds what each candidate trained")
    return AdaptOutcome(output, "trained", configs, auto=outcome, candidates=specs)


__all__ = ["AdaptOutcome", "AdaptRequest", "Events", "Settings", "adapt", "is_main_process"]
