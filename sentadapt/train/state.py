"""What a run knows while it trains (TrainState, saved in every checkpoint), what the trainer hands back
(Training), what a finished stage reports (TrainResult, made by run/finish.py), and which dev point it keeps.

Best-model selection on the dev set (DevSelection): the base model's score, then each evaluation's; the best one is
kept in the run's best/ folder, and `patience` evaluations without a better score stop the run early. Scores on the
main process (the trainer shares the verdict with the others); without a dev set the selection is blind."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.decision.rule import Decision
from sentadapt.evaluation.bootstrap import few_labels_note
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.teacher.table import TeacherTable
from sentadapt.train.tracking import Reporter, RunRecords

# ------------------------------------------------------------------------------------ what a run knows


@dataclass
class TrainState:
    """What a checkpoint stores besides weights and optimizer state (trainer_state.json)."""

    step: int = 0
    total_steps: int = 0
    base_score: float | None = None
    best_score: float | None = None
    best_step: int | None = None
    evals_without_improvement: int = 0
    nan_skips: int = 0
    history: list[dict[str, float]] = field(default_factory=list)  # dev scores by step
    # per-unit dev outputs (cosines, per-query values) of the base model and the best checkpoint: what the
    # paired bootstrap of the final Δ needs, kept here so a resumed run still has the base model's
    dev_outputs: dict[str, Any] = field(default_factory=dict)
    # per-unit dev outputs of EVERY evaluation, by step: the best of them is chosen on the same dev set, so the
    # decision pays for that choice (evaluation/evidence.py) and needs them all; ~8 bytes per unit and evaluation
    dev_evaluations: dict[str, Any] = field(default_factory=dict)
    dev_change_ci: list[float] | None = None  # 95 % paired-bootstrap interval of dev_change
    # the distillation term (W · D) at the first and the last step read back; at the end of the run, its mean over
    # the first and the last 10 % of the logged steps (TrainLog.ends): what metrics.json and the summary report
    distill_first: float | None = None
    distill_last: float | None = None
    distill_logged: int = 0  # how many train.log lines the two means read (1: a run shorter than log_every)

    @property
    def dev_change(self) -> float | None:
        """Best dev score minus the base model's; None when there was no dev set (blind selection)."""
        if self.base_score is None or self.best_score is None:
            return None
        return self.best_score - self.base_score

    @property
    def steps_left(self) -> int:
        return self.total_steps - self.step

    @property
    def improved(self) -> bool | None:
        # a tie is not an improvement: an unchanged model must not be handed back as a better one
        change = self.dev_change
        return None if change is None else change > 0


@dataclass
class Training:
    """What `Trainer.run` returns: the steps it trained and how they ended. The chosen model (best on dev, or the
    last step without a dev set) waits in the run's best/ folder for the lifecycle to publish."""

    output: Path
    state: TrainState
    stopped: str  # completed | early-stopped
    started: float  # time.perf_counter() when the run began
    environment: dict[str, Any]  # processes, device, batch, versions (describe_run)


@dataclass
class TrainResult:
    output: Path
    state: TrainState
    stopped: str  # completed | early-stopped
    seconds: float
    dev_name: str | None
    published_step: int
    environment: dict[str, Any] = field(default_factory=dict)  # processes, device, batch, versions (describe_run)

    @property
    def improved(self) -> bool | None:
        return self.state.improved

    decision: Decision = field(default_factory=lambda: Decision(None, "not decided"))  # as metrics.json records
    decision_note: str | None = None  # a weighted dev set (design.weighted_note); too small for the gains at stake
    teacher_table: TeacherTable | None = None  # --teacher: its dev score and speed, beside the student's
    examples: int = 0  # training examples: steps × global batch / examples = passes over the data
    sizes: dict[str, Any] | None = None  # --matryoshka/--sizes: metrics.json's "sizes" (decision/sizes.py)
    base_model: str | None = None  # what the decision weighed against, where training started from another model

    @property
    def passes(self) -> float | None:
        """Passes over the training examples the steps made (None when unknown)."""
        batch = self.environment.get("global_batch", 0) * self.environment.get("grad_accum", 1)
        return self.state.step * batch / self.examples if self.examples and batch else None


# ------------------------------------------------------------------------------ the dev point it keeps


class DevSelection:
    def __init__(self, evaluator: Evaluator | None, dev_name: str | None,
                 base_dev: tuple[float, dict[str, Any]] | None, encoder: Any, batch_size: int, patience: int,
                 reporter: Reporter, records: RunRecords) -> None:
        self.evaluator, self.dev_name, self.base_dev = evaluator, dev_name, base_dev
        self.encoder, self.batch_size, self.patience = encoder, batch_size, patience
        self.reporter, self.records = reporter, records

    @property
    def blind(self) -> bool:
        return self.evaluator is None

    def score(self) -> tuple[float, Any]:
        """The dev score (no intervals) and the model's per-unit outputs (for the final Δ's paired CI)."""
        assert self.evaluator is not None
        report = self.evaluator(self.encoder, batch_size=self.batch_size, intervals=False)
        return report.average, self.evaluator.outputs_of(report)

    def score_base(self, state: TrainState, is_main: bool) -> None:
        """The base model as the user has it (its own pooling): step 0 of the history, what the best must beat."""
        if self.blind:
            self.reporter.message("no labelled dev data: checkpoint selection is blind, the last step is kept. "
                                  "A file of ~100 labelled pairs from your domain (--dev FILE) fixes this.")
            return
        if not is_main:
            return
        state.base_score, state.dev_outputs["base"] = self.base_dev if self.base_dev is not None else self.score()
        state.history.append({"step": 0, "dev": state.base_score})
        self.records.log({"step": 0, "dev": state.base_score})
        if self.base_dev is None:  # a score handed in was said where it was made (auto's shared one, a teacher's)
            self.reporter.message(f"base model on {self.dev_name}: {state.base_score:.2f}")
            few = self.evaluator and few_labels_note(f"--dev {self.dev_name}", self.evaluator.units(),
                                                     self.evaluator.unit_name())
            if few:
                self.reporter.message(few)

    def missed(self, state: TrainState, every: int) -> bool:
        """The step a run resumes from is an evaluation step it did not evaluate: a stop lands at a step boundary
        before that step's evaluation (the stop is checked first). Made on resuming, on the same weights, it gives
        the resumed run the uninterrupted one's evaluations, so the decision's max-T weighs as many. The same on
        every process (the history is the checkpoint's)."""
        step = state.step
        return (not self.blind and bool(every) and step > 0 and step % every == 0
                and all(entry.get("step") != step for entry in state.history))

    def evaluate(self, state: TrainState) -> tuple[bool, bool]:
        """Score the model at `state.step`: (whether it is the best so far, which the caller keeps; whether to stop
        early, by the patience)."""
        score, outputs = self.score()
        state.dev_evaluations[str(state.step)] = outputs
        state.history.append({"step": state.step, "dev": score})
        self.records.log({"step": state.step, "dev": score})
        reference = state.best_score if state.best_score is not None else -math.inf
        improved = score > reference
        if improved:
            state.best_score, state.best_step = score, state.step
            state.dev_outputs["best"] = outputs
            state.evals_without_improvement = 0
        else:
            state.evals_without_improvement += 1
        if state.best_score is not None:
            self.records.trackers.log({"dev/best": state.best_score}, state.step)
        self.reporter.evaluation(state.step, score, state.best_score or score, improved)
        return improved, bool(self.patience) and state.evals_without_improvement >= self.patience
