"""Best-model selection on the dev set: the base model's score, then each evaluation's; the best one is kept in the
run's best/ folder, and `patience` evaluations without a better score stop the run early. Scores on the main
process (the trainer shares the verdict with the others); without a dev set the selection is blind."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.train.state import TrainState
from sentadapt.train.tracking import Reporter, RunRecords


class DevSelection:
    def __init__(self, evaluator: Evaluator | None, dev_name: str | None,
                 base_dev: tuple[float, dict[str, Any]] | None, encoder: Any, batch_size: int, patience: int,
                 reporter: Reporter, records: RunRecords, keep_best: Callable[[], None]) -> None:
        self.evaluator, self.dev_name, self.base_dev = evaluator, dev_name, base_dev
        self.encoder, self.batch_size, self.patience = encoder, batch_size, patience
        self.reporter, self.records, self.keep_best = reporter, records, keep_best

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

    def missed(self, state: TrainState, every: int) -> bool:
        """The step a run resumes from is an evaluation step it did not evaluate: a stop lands at a step boundary
        before that step's evaluation (the stop is checked first). Made on resuming, on the same weights, it gives
        the resumed run the uninterrupted one's evaluations, so the decision's max-T weighs as many. The same on
        every process (the history is the checkpoint's)."""
        step = state.step
        return (not self.blind and bool(every) and step > 0 and step % every == 0
                and all(entry.get("step") != step for entry in state.history))

    def evaluate(self, state: TrainState) -> bool:
        """Score the model at `state.step`, keep it when it is the best so far; True: stop early (patience)."""
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
            self.keep_best()
        else:
            state.evals_without_improvement += 1
        if state.best_score is not None:
            self.records.trackers.log({"dev/best": state.best_score}, state.step)
        self.reporter.evaluation(state.step, score, state.best_score or score, improved)
        return bool(self.patience) and state.evals_without_improvement >= self.patience
