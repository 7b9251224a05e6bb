"""`sentadapt adapt --recipe auto`: train every candidate, choose one only when the dev set can prove it.

Candidates and their configs: sentadapt/train/candidates.py; the run directory: sentadapt/train/auto.py;
the rule: sentadapt/evaluation/selection.py. This module runs them in order and talks to the terminal.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from sentadapt.cli._common import console, note

Say = Callable[[str], None]


@dataclass(frozen=True)
class SingleRun:
    """What a candidate reuses of a single-recipe `adapt` run, handed over by cli/adapt.py (which owns these), so
    the two modules import one way: adapt → adapt_auto."""

    train: Callable[..., Any]  # _run(config, resume, overwrite, trust_remote_code, allow_pickle, base_dev=, summary=)
    check_paths: Callable[..., None]
    check_writable: Callable[[Path], None]
    print_dry_run: Callable[[Any], None]
    acquire_lock: Callable[[Path], Path]
    device: Callable[[], str]
    is_main: Callable[[], bool]


def plan_auto(corpus: list[str], *, output: Path, config_file: Path | None, candidates_option: list[str],
              flags: dict[str, Any], set_options: list[str], preset_option: str | None, base_name: str,
              run_fields: dict[str, Any]) -> tuple[list[Any], Any]:
    """The candidate runs of a new auto run (configs built and checked as `adapt --recipe NAME` would), and the
    base model as resolved once for all of them."""
    from sentadapt.presets import choose_preset
    from sentadapt.resolve import resolve_model
    from sentadapt.train.auto import CandidateRun
    from sentadapt.train.candidates import (
        auto_yaml_settings,
        candidate_config,
        check_budget,
        parse_candidates,
        plan_candidates,
        split_inputs,
    )

    yaml_train, yaml_candidates = auto_yaml_settings(config_file)
    requested = parse_candidates(candidates_option) or parse_candidates(
        yaml_candidates, where=f"{config_file}: candidates")
    inputs = split_inputs(corpus)
    candidates = plan_candidates(requested, inputs)
    resolved = resolve_model(base_name)
    runs = [CandidateRun(candidate, candidate_config(
        candidate, inputs, output, yaml_train=yaml_train, flags=flags, set_options=set_options,
        preset_for=lambda recipe_class: choose_preset(preset_option, lambda: resolved, recipe_class),
        base=base_name, **run_fields)) for candidate in candidates]
    for run in runs:
        run.config.resolved_model = resolved
    check_budget([run.config for run in runs])
    return runs, resolved


def check_auto(single: SingleRun, runs: list[Any], output: Path, resume: bool, overwrite: bool, dry_run: bool,
               require_improvement: bool) -> None:
    """What a single run checks, for every candidate; and a dev set, without which nothing can be chosen."""
    from sentadapt.errors import ConfigError

    first = runs[0].config
    if first.dev in (None, "none") and not _has_default_dev(first):
        raise ConfigError("--recipe auto: needs a labelled dev set to choose among the candidates; pass --dev FILE "
                          "(e.g. 100 labelled pairs from your domain) or --dev stsb --data-dir DIR")
    for run in runs:
        single.check_paths(run.config, resume, True, dry_run, require_improvement)
    if dry_run:
        return
    if not resume and output.is_dir() and any(output.iterdir()) and not overwrite:
        raise ConfigError(f"--output {output}: exists and is not empty; pass --resume to continue that run "
                          "or --overwrite to replace it")
    single.check_writable(output)


def _has_default_dev(config: Any) -> bool:
    from sentadapt.evaluation.task_types import resolve_dev_set

    return resolve_dev_set(config.dev, config.data_dir, config.dev_metric)[0] is not None


def print_auto_dry_run(single: SingleRun, runs: list[Any]) -> None:
    """Each candidate's resolved config, as one YAML document each (stdout), with its preset notes (stderr)."""
    import sys

    for index, run in enumerate(runs):
        if index:
            sys.stdout.write("---\n")  # plain, as single.print_dry_run writes each document
        note(f"candidate {index + 1}/{len(runs)}: {run.candidate.spec} → {run.config.output}")
        single.print_dry_run(run.config)


def run_auto(single: SingleRun, runs: list[Any], output: Path, fresh: bool, overwrite: bool,
             trust_remote_code: bool, allow_pickle: bool) -> Any:
    """Train the candidates in order (finished ones skipped, an interrupted one resumed), then choose and publish.
    Returns the Choice on the main process, None on the others."""
    from sentadapt.train import auto
    from sentadapt.train.signals import TrainingInterrupted

    main = single.is_main()
    say: Say = note if main else (lambda _text: None)
    lock = None
    if main:
        if output.is_dir():
            lock = single.acquire_lock(output)  # before --overwrite deletes anything a live run is writing
        if fresh and overwrite and output.is_dir():
            shutil.rmtree(output)
        output.mkdir(parents=True, exist_ok=True)
        lock = single.acquire_lock(output)
        if fresh:
            first = runs[0].config
            auto.write_plan(output, runs, {"base": first.base, "dev": first.dev, "max_steps": first.train.max_steps,
                                           "seed": first.train.seed})
    try:
        evaluator, dev_name = _dev_evaluator(runs[0].config)
        base = _base_dev(output, runs[0].config, evaluator, single.device(), trust_remote_code, allow_pickle, say) \
            if main else None
        for index, run in enumerate(runs, start=1):
            try:
                _train_candidate(single, run, index, len(runs), base, trust_remote_code, allow_pickle, say)
            except TrainingInterrupted as error:  # resuming continues the whole auto run, not this candidate alone
                message = str(error).replace(f"--resume --output {run.folder}", f"--resume --output {output}")
                raise TrainingInterrupted(f"candidate {run.candidate.spec}: {message}", error.signum) from None
        if not main:
            return None
        choice = auto.decide_among(runs, evaluator, base[1], dev_name)  # type: ignore[index]
        published = auto.publish_choice(output, choice, runs, _encoder_loader(trust_remote_code, allow_pickle))
        record = auto.write_auto_metrics(output, runs, choice, base[0], evaluator, dev_name,  # type: ignore[index]
                                         published)
        print_auto_summary(output, record)
        return choice
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)


def _dev_evaluator(config: Any) -> tuple[Any, str | None]:
    from sentadapt.evaluation.task_types import resolve_dev_set

    dev_name, make_evaluator = resolve_dev_set(config.dev, config.data_dir, config.dev_metric)
    return make_evaluator(), dev_name


def _base_dev(output: Path, config: Any, evaluator: Any, device: str, trust_remote_code: bool, allow_pickle: bool,
              say: Say) -> tuple[float, dict[str, Any]]:
    """The base model's dev score and outputs: scored once (as the user has it: its own pooling) and shared by
    every candidate, so all Δs are against the same numbers; kept in OUTPUT/base_dev.json for --resume."""
    from sentadapt.encoder import Encoder
    from sentadapt.train import auto

    saved = auto.load_base_dev(output)
    if saved is not None:
        return saved
    encoder = Encoder.load(config.base, device=device, trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
    report = evaluator(encoder, batch_size=config.train.eval_batch_size, intervals=False)
    base = (report.average, evaluator.outputs_of(report))
    auto.save_base_dev(output, *base)
    say(f"base model on {report.title if len(evaluator.tasks) > 1 else evaluator.tasks[0].name}: {base[0]:.2f} "
        "(shared by every candidate)")
    return base


def _train_candidate(single: SingleRun, run: Any, index: int, total: int, base: Any, trust_remote_code: bool,
                     allow_pickle: bool, say: Say) -> None:
    from sentadapt.train import auto
    from sentadapt.train.loop import TrainingDiverged

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
        _rescore(run, single.device(), trust_remote_code, allow_pickle)
        return
    say(f"{where} → {run.folder}" + (" (resuming from its last checkpoint)" if status == auto.RESUME else ""))
    started = time.perf_counter()
    try:
        result = single.train(run.config, status == auto.RESUME, status == auto.NEW, trust_remote_code,
                              allow_pickle, base_dev=base, summary=False)
    except TrainingDiverged as error:  # every rank agrees on a non-finite step, so every rank lands here
        if single.is_main():
            auto.save_outcome(run, None, time.perf_counter() - started, failed=str(error))
        say(f"{where}: left out of the choice: {error}")
        return
    if result is None:
        return  # not the main process
    auto.save_outcome(run, result.state.dev_outputs.get("best"), time.perf_counter() - started)
    state = result.state
    say(f"{where}: best dev {state.best_score:.2f} at step {state.best_step} (base {state.base_score:.2f}, "
        f"Δ {state.dev_change:+.2f}); {_duration(time.perf_counter() - started)}")


def _rescore(run: Any, device: str, trust_remote_code: bool, allow_pickle: bool) -> None:
    from sentadapt.encoder import Encoder
    from sentadapt.train import auto

    evaluator, _ = _dev_evaluator(run.config)
    encoder = Encoder.load(str(run.folder), device=device, trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
    report = evaluator(encoder, batch_size=run.config.train.eval_batch_size, intervals=False)
    auto.save_outcome(run, evaluator.outputs_of(report), None)


def _encoder_loader(trust_remote_code: bool, allow_pickle: bool) -> Callable[[str], Any]:
    def load(folder: str) -> Any:
        from sentadapt.encoder import Encoder

        return Encoder.load(folder, device="cpu", trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)

    return load


def _duration(seconds: float | None) -> str:
    return "–" if seconds is None else time.strftime("%H:%M:%S", time.gmtime(seconds))


def _interval(values: list[float] | None) -> str:
    return "–" if not values else f"[{values[0]:+.2f}, {values[1]:+.2f}]"


def print_auto_summary(output: Path, record: dict[str, Any]) -> None:
    """One row per candidate (dev score, Δ, plain and adjusted CI, steps, time), then the choice and why."""
    adjustment = record["adjustment"]
    confidence = adjustment["confidence"]
    adjusted = "adjusted CI" if confidence is None else f"{100 * confidence:.2f} % CI".replace(".00 %", " %")
    steps = {row["steps"] for row in record["candidates"] if row["steps"] is not None} or {0}
    table = Table(title=f"sentadapt adapt --recipe auto — {len(record['candidates'])} candidates, "
                        f"{'/'.join(map(str, sorted(steps)))} steps each, on {record['dev']} (base model "
                        f"{record['base_score']:.2f}); {adjusted}: Bonferroni over the candidates; decision rule: "
                        f"{record.get('decision_rule') or 'strict'}")
    table.add_column("candidate", no_wrap=True)  # the name is the folder under candidates/: never cut
    for header in ("dev", "Δ", "95 % CI", adjusted, "best step", "time"):
        interval = header in ("95 % CI", adjusted)  # the cells that may wrap on a narrow terminal, never cut
        table.add_column(header, justify="right", no_wrap=not interval, overflow="fold" if interval else "ellipsis")
    for row in record["candidates"]:
        if row.get("failed"):
            table.add_row(escape(row["name"]), "failed", "–", "–", "–", "–", _duration(row["seconds"]))
            continue
        chosen = row["name"] == record["chosen"]
        table.add_row(("→ " if chosen else "") + escape(row["name"]), f"{row['dev_score']:.2f}",
                      f"{row['dev_change']:+.2f}", _interval(row["dev_change_ci"]),
                      _interval(row["dev_change_adjusted_ci"]), str(row["best_step"]), _duration(row["seconds"]))
    console.print(table)
    reason = escape(record["decision_reason"])
    if record["chosen"] is None:
        console.print(f"[red]keep the base model[/]: {reason}. Nothing is published at {escape(str(output))}; "
                      f"each candidate's run stays in {escape(str(output / 'candidates'))}", soft_wrap=True)
    else:
        console.print(f"[green]use {escape(record['chosen'])}[/] (published at {escape(str(output))}): {reason}",
                      soft_wrap=True)
