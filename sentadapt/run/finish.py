"""After the trainer: publish the chosen model, weigh the dev evidence, decide, and write metrics.json (last: its
presence marks a finished run). A stage of `adapt` (run/execute.py's `train_stage`) is the Trainer, then this."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sentadapt.decision.rule import (
    Decision,
    decide,
    decision_rule,
    evidence_record,
    small_dev_note,
    teacher_lead_note,
)
from sentadapt.decision.sizes import SizeTable
from sentadapt.errors import CheckpointError
from sentadapt.evaluation.evaluator import dev_change_record, dev_evidence
from sentadapt.evaluation.evidence import Evidence
from sentadapt.pairs.design import labels_record, weighted_note
from sentadapt.run.folder_card import write_card
from sentadapt.storage.durable import publish_model, verify_folder
from sentadapt.storage.run_folder import RunDir
from sentadapt.train.loop import TrainingInputs
from sentadapt.train.state import Training, TrainResult, TrainState
from sentadapt.train.tracking import TrainLog, final_values


def finish(training: Training, inputs: TrainingInputs, is_main: bool,
           log_to_trackers: Callable[[dict[str, Any], int], None], wait_for_everyone: Callable[[], None],
           ) -> TrainResult:
    state = training.state
    # decided on the main process when metrics.json is written; the other processes report no decision
    decision, note, published = Decision(None, "decided on the main process"), None, state.best_step or state.step
    sizes = None
    if is_main:
        published, model_files = publish(RunDir(training.output), state, blind=inputs.evaluator is None)
        metrics, decision, note = decide_and_record(training, inputs, published, model_files)
        sizes = metrics["sizes"]
        log_to_trackers(final_values(metrics), state.step)
    wait_for_everyone()
    return TrainResult(training.output, state, training.stopped, time.perf_counter() - training.started,
                       inputs.dev_name, published, training.environment, decision, note, inputs.teacher_table,
                       len(inputs.examples), sizes, inputs.base_model)


def publish(run_dir: RunDir, state: TrainState, blind: bool) -> tuple[int, dict[str, str]]:
    """Move the chosen model from best/ to the top of the run directory; returns the step it is from and the files
    it wrote (relative paths)."""
    best = run_dir.best
    if not best.is_dir():
        raise CheckpointError(f"{best}: missing; the best model (step {state.best_step}) was lost, "
                              "so nothing is published rather than a worse model")
    step = state.step if blind else int(verify_folder(best).get("step", state.best_step or 0))
    model_files = publish_model(best, run_dir.path)
    shutil.rmtree(best)
    return step, model_files


def evidence_of(inputs: TrainingInputs, state: TrainState) -> Evidence | None:
    """The dev set's evidence for the best checkpoint, paying for its choice among every evaluation (a run
    resumed from a checkpoint written before evaluations were kept has only the best one to weigh)."""
    outputs = state.dev_outputs
    evaluations = state.dev_evaluations
    best = str(state.best_step)
    if best not in evaluations:
        evaluations = {best: outputs["best"]} if "best" in outputs else {}
    steps = list(evaluations)
    chosen = steps.index(best) if best in steps else 0
    return dev_evidence(inputs.evaluator, outputs.get("base"), [evaluations[s] for s in steps], chosen)


def dev_labels(dev: str | None, evaluator: Any) -> dict[str, Any] | None:
    """The labels the decision read (pairs/design.labels_record): a dev file's hash, size and design."""
    if evaluator is None:
        return None
    weighted = any(task.weights is not None for task in evaluator.tasks)
    return labels_record(dev, evaluator.units(), weighted, evaluator.labels_digest(), evaluator.row_keys())


def decide_and_record(training: Training, inputs: TrainingInputs, published_step: int, model_files: dict[str, str],
                      ) -> tuple[dict[str, Any], Decision, str | None]:
    """The decision on the dev evidence, and metrics.json (with dev_outputs.json, what it weighed)."""
    state, config, run_dir = training.state, inputs.config, RunDir(training.output)
    change = dev_change_record(inputs.evaluator, state.dev_outputs)  # the Δ's paired CI
    state.dev_change_ci = change["dev_change_ci"]
    evidence = evidence_of(inputs, state)
    teacher = inputs.teacher_table
    rule = decision_rule(config)
    decision = decide(state.dev_change, state.dev_change_ci, inputs.dev_name, evidence, rule)
    labels = dev_labels(config.dev, inputs.evaluator)
    small = small_dev_note(evidence, rule, decision.look) if decision.label_more is None else None
    note = "; ".join(part for part in (weighted_note(labels), small, label_more_note(decision, config.dev,
                                                                                     training.output)) if part) or None
    if teacher is not None:  # a base kept under a clearly better teacher: say what the user can do
        hint = teacher_lead_note(decision, state.dev_change_ci, teacher.lead)
        note = "; ".join(part for part in (note, hint) if part) or None
    log = TrainLog(run_dir.train_log)
    ends = log.ends("distill")  # over the first and last 10 % of steps, not one batch each
    if ends is not None:
        state.distill_first, state.distill_last = ends
        state.distill_logged = log.count("distill")
    # the sizes are weighed on the first look's labels, at its limit (decision/sequential.py)
    sizes = weigh_sizes(run_dir, inputs, state.dev_outputs, decision.look.limit if decision.look else rule.risk)
    metrics = {
        "recipe": config.recipe, "base_model": inputs.base_model or config.base, "dev": inputs.dev_name,
        "dev_labels": labels,
        "base_score": state.base_score, "best_score": state.best_score,
        "best_step": state.best_step, "dev_change": state.dev_change, "improved": state.improved,
        **change, **decision.to_dict(), "decision_settings": rule.to_dict(),
        "dev_evidence": evidence_record(evidence, rule, decision.look), "dev_note": note,
        "preset": config.preset,
        "published_step": published_step, "steps": state.step,
        "total_steps": state.total_steps, "history": state.history,
        "pooling": inputs.encoder.pooling_name, "environment": training.environment,
        "teacher": teacher.record() if teacher is not None else None,
        "teacher_score": teacher.score if teacher is not None else None,
        "teacher_gap_closed": None if teacher is None else teacher.gap_closed(state.base_score, state.best_score),
        "examples": len(inputs.examples),
        "distill_loss": None if state.distill_first is None else {
            "first": state.distill_first, "last": state.distill_last},
        "sizes": None if sizes is None else sizes[0].to_dict(),
        "model_files": model_files,  # what --overwrite may replace besides the run's records (storage/ownership.py)
    }
    if inputs.evaluator is not None and "base" in state.dev_outputs:
        # the per-unit dev outputs of the base and of every evaluated step: what the decision weighed, so it
        # can be recomputed (or weighed with --recipe auto's other candidates) without the models
        run_dir.write_dev_outputs({"dev": inputs.dev_name, "base": state.dev_outputs["base"],
                                   "evaluations": state.dev_evaluations,
                                   "teacher": None if teacher is None else teacher.dev_outputs,
                                   "sizes": None if sizes is None else sizes[1]})
    run_dir.write_metrics(write_card(run_dir, metrics))  # last: its presence marks a finished run
    return metrics, decision, note


def label_more_note(decision: Decision, dev: str | None, output: Any) -> str | None:
    """An inconclusive first look (decision/sequential.py): how to label more, and that the next decision counts
    this one (its risk stays valid over both)."""
    more, look = decision.label_more, decision.look
    if more is None or look is None or dev is None:
        return None
    command = f"sentadapt decide {output} --dev {dev}"
    from sentadapt.pairs.rounds import can_continue

    if can_continue(Path(dev)):
        return (f"inconclusive at {look.sizes[-1]} labels: {command} writes the next round ({more - look.sizes[-1]} "
                "more pairs, chosen by the same design) to label, and decides again on them all")
    return (f"inconclusive at {look.sizes[-1]} labels: label {more - look.sizes[-1]} more pairs of your domain, add "
            f"them to {dev}, then {command} (the looks are counted: the risk stays valid)")


def weigh_sizes(run_dir: RunDir, inputs: TrainingInputs, dev_outputs: dict[str, Any], risk: float,
                ) -> tuple[SizeTable, dict[str, Any]] | None:
    """--matryoshka or --sizes: the published model scored on the dev set at each size and precision, weighed
    against the base's whole vectors (decision/sizes.py), with the per-unit outputs behind each row; None when no
    size was asked or there is no dev set."""
    from sentadapt.decision.sizes import decision_forms, size_table
    from sentadapt.model.encoder import Encoder

    train = inputs.config.train
    sizes = train.dims.sizes or train.dims.matryoshka
    if not sizes or inputs.evaluator is None or "base" not in dev_outputs:
        return None
    encoder = Encoder.load(run_dir.path, device=inputs.encoder.device)
    forms = decision_forms(sizes, encoder.embedding_dim)
    reports = inputs.evaluator.score_forms(encoder, forms, batch_size=train.evaluation.eval_batch_size)
    outputs = [inputs.evaluator.outputs_of(report) for report in reports]
    table = size_table(inputs.evaluator, dev_outputs["base"], outputs, forms, encoder.embedding_dim, risk)
    return table, {form.label(encoder.embedding_dim): output for form, output in zip(forms, outputs)}
