"""`adapt --recipe auto` from start to end, for the API and the CLI alike: plan the candidates (run/auto/candidates.py),
check them as single runs are checked, train each in order through the single-run lifecycle (finished ones
skipped, an interrupted one resumed), then choose (decision/selection.py) and publish (run/auto/choice.py). Prints
nothing: notes go to the `Events`; the caller renders the record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentadapt.errors import ConfigError
from sentadapt.events import Note
from sentadapt.model.resolve import ResolvedModel
from sentadapt.run.auto import choice as auto
from sentadapt.run.execute import claim_output, train_run
from sentadapt.run.plan import DevSet, Events, ResolvedRun, Settings, check_run, check_run_output, same_dev
from sentadapt.train.compute import is_main_process, training_device


@dataclass
class AutoOutcome:
    choice: Any  # evaluation.selection.Choice
    record: dict[str, Any]  # OUTPUT/metrics.json


def plan_auto(settings: Settings, candidates_option: list[str]) -> tuple[list[auto.CandidateRun], ResolvedModel]:
    """The candidate runs of a new auto run (configs built and checked as `adapt --recipe NAME` would), and the
    base model, resolved once for all of them."""
    from sentadapt.model.resolve import DEFAULT_BASE_MODEL, LazyModel, resolve_model
    from sentadapt.run.auto.candidates import (
        auto_yaml_settings,
        candidate_config,
        check_budget,
        parse_candidates,
        plan_candidates,
        split_inputs,
    )

    if not settings.corpus:
        raise ConfigError("CORPUS: give at least one corpus file (or --resume to continue a run)")
    yaml_train, yaml_candidates = auto_yaml_settings(settings.config_file)
    requested = parse_candidates(candidates_option) or parse_candidates(
        yaml_candidates, where=f"{settings.config_file}: candidates")
    inputs = split_inputs(list(settings.corpus))
    candidates = plan_candidates(requested, inputs)
    resolved = resolve_model(settings.base or DEFAULT_BASE_MODEL)
    runs = [auto.CandidateRun(candidate, candidate_config(candidate, inputs, settings.output, settings,
                                                          LazyModel(resolved.name, resolved), yaml_train))
            for candidate in candidates]
    check_budget({run.candidate.spec: run.config for run in runs})
    return runs, resolved


def check_auto(runs: list[auto.CandidateRun], output: Path, resume: bool, overwrite: bool, dry_run: bool,
               require_improvement: bool, base: ResolvedModel | None = None) -> list[ResolvedRun]:
    """What a single run checks, for every candidate; and a dev set, without which nothing can be chosen. Returns
    each candidate's run resolved; the candidates share one resolved base and one dev set (read once) where their
    configs name the same. `base`: already resolved (plan_auto)."""
    first = runs[0].config
    first_dev = DevSet.of(first)  # the first candidate's, and every candidate's that names the same
    if first.dev in (None, "none") and first_dev.name is None:
        raise ConfigError("--recipe auto: needs a labelled dev set to choose among the candidates; pass --dev FILE "
                          "(e.g. 100 labelled pairs from your domain) or --dev stsb --data-dir DIR")
    resolved: list[ResolvedRun] = []
    for run in runs:
        shared = resolved[0] if resolved else None
        known_base = base if shared is None else shared.base if run.config.base == shared.config.base else None
        known_dev = first_dev if shared is None else shared.dev if same_dev(run.config, shared.config) else None
        resolved.append(check_run(run.config, resume, True, dry_run, require_improvement, known_base, known_dev))
    if dry_run:
        return resolved
    check_run_output(output, resume, overwrite, resolved[0].config, resolved[0].base)
    return resolved


def run_auto(runs: list[auto.CandidateRun], resolved: list[ResolvedRun], output: Path, fresh: bool, overwrite: bool,
             trust_remote_code: bool, allow_pickle: bool, events: Events | None = None) -> AutoOutcome | None:
    """Train the candidates in order (finished ones skipped, an interrupted one resumed), then choose and publish.
    `resolved`: each candidate's run as check_auto resolved it. Returns the outcome on the main process, None on the
    others."""
    from sentadapt.stopping.training import TrainingInterrupted

    events = (events or Events()).for_process()
    main = is_main_process()
    lock, replacement = None, None
    if main:
        lock, replacement = claim_output(output, fresh and overwrite, events.note)
        if fresh:
            first = runs[0].config
            auto.write_plan(output, runs, {"base": first.base, "dev": first.dev, "max_steps": first.train.max_steps,
                                           "seed": first.train.seed})
    try:
        dev = resolved[0].dev  # check_auto made sure there is one
        evaluator, dev_name = dev.evaluator, dev.name
        base = _base_dev(output, resolved[0], trust_remote_code, allow_pickle, events.note) if main else None
        # each candidate trains through the single-run path; its own summary is left to the auto record
        quiet = Events(events.note, events.progress, events.reporter)
        for index, (run, candidate_run) in enumerate(zip(runs, resolved, strict=True), start=1):
            try:
                _train_candidate(run, candidate_run, index, len(runs), base, trust_remote_code, allow_pickle, quiet)
            except TrainingInterrupted as error:  # resuming continues the whole auto run, not this candidate alone
                raise error.resuming(run.folder, output, f"candidate {run.candidate.spec}: ") from None
        if not main:
            return None
        assert base is not None
        choice = auto.decide_among(runs, evaluator, base[1], dev_name)
        published, model_files = auto.publish_choice(output, choice, runs,
                                                     _encoder_loader(trust_remote_code, allow_pickle))
        record = auto.write_auto_metrics(output, runs, choice, base[0], evaluator, dev_name, published, model_files)
        return AutoOutcome(choice, record)
    finally:
        if replacement is not None:
            replacement.settle()  # the run it replaces goes once the auto run finished, else kept or back
        if lock is not None:
            lock.unlink(missing_ok=True)


def _base_dev(output: Path, run: ResolvedRun, trust_remote_code: bool, allow_pickle: bool,
              say: Note) -> tuple[float, dict[str, Any]]:
    """The base model's dev score and outputs: scored once (as the user has it: its own pooling) and shared by
    every candidate, so all Δs are against the same numbers; kept in OUTPUT/base_dev.json for --resume."""
    from sentadapt.model.encoder import Encoder
    from sentadapt.run.inputs import base_dev_outputs

    saved = auto.load_base_dev(output)
    if saved is not None:
        return saved
    evaluator = run.dev.evaluator
    assert evaluator is not None  # check_auto made sure there is a dev set
    encoder = Encoder.load(run.base, device=training_device(), trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
    base = base_dev_outputs(evaluator, encoder, run.config)  # as the loop scores the base
    auto.save_base_dev(output, *base)
    say(f"base model on {evaluator.title if len(evaluator.tasks) > 1 else evaluator.tasks[0].name}: {base[0]:.2f} "
        "(shared by every candidate)")
    return base


def _train_candidate(run: auto.CandidateRun, resolved: ResolvedRun, index: int, total: int, base: Any,
                     trust_remote_code: bool, allow_pickle: bool, events: Events) -> None:
    from sentadapt.train.loop import TrainingDiverged

    say = events.note
    status = run.status
    where = f"candidate {index}/{total} ({run.candidate.spec})"
    if auto.failure_of(run):
        say(f"{where}: failed earlier, left out of the choice: {auto.failure_of(run)}")
        return
    if status == auto.FINISHED and auto.load_outcome(run) is not None:
        say(f"{where}: finished earlier in {run.folder}")
        return
    if status == auto.FINISHED:  # stopped between its metrics.json and its outcome: score its published model
        say(f"{where}: finished earlier in {run.folder}; scoring its model on the dev set again")
        _rescore(run, resolved.dev.evaluator, trust_remote_code, allow_pickle)
        return
    say(f"{where} → {run.folder}" + (" (resuming from its last checkpoint)" if status == auto.RESUME else ""))
    started = time.perf_counter()
    try:
        result = train_run(resolved, status == auto.RESUME, status == auto.NEW, trust_remote_code, allow_pickle,
                           events, base_dev=base)
    except TrainingDiverged as error:  # every rank agrees on a non-finite step, so every rank lands here
        if is_main_process():
            auto.save_outcome(run, None, time.perf_counter() - started, failed=str(error))
        say(f"{where}: left out of the choice: {error}")
        return
    except ConfigError as error:  # found once the model loaded (a view it cannot take): say which candidate
        raise ConfigError(f"candidate {run.candidate.spec}: {error}") from None
    if result is None:
        return  # not the main process
    auto.save_outcome(run, result.state.dev_outputs.get("best"), time.perf_counter() - started)
    state = result.state
    say(f"{where}: best dev {state.best_score:.2f} at step {state.best_step} (base {state.base_score:.2f}, "
        f"Δ {state.dev_change:+.2f}); {duration(time.perf_counter() - started)}")


def _rescore(run: auto.CandidateRun, evaluator: Any, trust_remote_code: bool, allow_pickle: bool) -> None:
    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(str(run.folder), device=training_device(), trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
    report = evaluator(encoder, batch_size=run.config.train.evaluation.eval_batch_size, intervals=False)
    auto.save_outcome(run, evaluator.outputs_of(report), None)


def _encoder_loader(trust_remote_code: bool, allow_pickle: bool) -> Callable[[str], Any]:
    def load(folder: str) -> Any:
        from sentadapt.model.encoder import Encoder

        return Encoder.load(folder, device="cpu", trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)

    return load


def duration(seconds: float | None) -> str:
    return "–" if seconds is None else time.strftime("%H:%M:%S", time.gmtime(seconds))
