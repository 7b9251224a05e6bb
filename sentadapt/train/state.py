"""What a run knows while it trains (TrainState, saved in every checkpoint), what the trainer hands back
(Training) and what a finished stage reports (TrainResult, made by run/finish.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.decision.rule import Decision
from sentadapt.teacher.table import TeacherTable


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

    @property
    def passes(self) -> float | None:
        """Passes over the training examples the steps made (None when unknown)."""
        batch = self.environment.get("global_batch", 0) * self.environment.get("grad_accum", 1)
        return self.state.step * batch / self.examples if self.examples and batch else None
