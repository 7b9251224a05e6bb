"""The teacher's evidence for a student: how well a model's cosines agree with the teacher's on pairs whose labels it
does not read — the dev set's own pairs (the default), or held-out pairs of the user's corpus.

A dev set of 200 labelled pairs cannot see a 2-point gain (its 95 % CI is about ±3), but when the teacher is weighed
as clearly ahead of the base on those very pairs, a student that agrees with the teacher more than the base does, on
thousands of in-domain pairs it never trained on, has most likely taken over part of that lead. The agreement of a
model is the Spearman correlation × 100 of its cosines with the teacher's over the pairs; the evidence is the
student's agreement minus the base's, with a paired bootstrap CI (the same resamples for both: bootstrap.py).

On the dev pairs (`--set teacher_evidence=dev`), the teacher's cosines are a full ranking of every dev pair by a
model the run has just weighed as ahead of the base on those pairs; the labels are not read again.

Pure numpy over stored cosines: the decision study recomputes it from dev_outputs.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sentadapt.evaluation import bootstrap
from sentadapt.evaluation.sts import spearman100

SEED = 7  # the agreement pairs' own resampling seed (bootstrap.task_seed would key it by a task name)
HELD_OUT, DEV_PAIRS = "held-out corpus pairs", "dev pairs"


@dataclass(frozen=True)
class Agreement:
    """The student's agreement with the teacher against the base's, on `pairs` held-out corpus pairs."""

    base: float  # Spearman × 100 of the base's cosines with the teacher's
    student: float
    interval: tuple[float, float] | None  # paired 95 % CI of student − base (None: bootstrap off)
    pairs: int
    source: str = HELD_OUT  # which pairs: HELD_OUT or DEV_PAIRS

    @property
    def change(self) -> float:
        return self.student - self.base

    @property
    def better(self) -> bool:
        """The student agrees with the teacher significantly better than the base (the CI above 0)."""
        return self.interval is not None and self.interval[0] > 0

    def to_dict(self) -> dict[str, Any]:
        return {"base": round(self.base, 4), "student": round(self.student, 4), "change": round(self.change, 4),
                "ci": None if self.interval is None else [round(v, 4) for v in self.interval], "pairs": self.pairs,
                "source": self.source}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Agreement:
        """metrics.json's teacher_evidence back (records written before `source` existed: held-out pairs)."""
        interval = None if record["ci"] is None else (float(record["ci"][0]), float(record["ci"][1]))
        return cls(record["base"], record["student"], interval, record["pairs"], record.get("source", HELD_OUT))

    def describe(self) -> str:
        ci = "" if self.interval is None else f" [{self.interval[0]:+.2f}, {self.interval[1]:+.2f}]"
        return (f"agreement with the teacher on {self.pairs:,} {self.source} {self.base:.2f} → "
                f"{self.student:.2f} (Δ {self.change:+.2f}{ci})")


def agreement(teacher: Sequence[float] | np.ndarray, base: Sequence[float] | np.ndarray,
              student: Sequence[float] | np.ndarray, resamples: int = bootstrap.DEFAULT_RESAMPLES,
              seed: int = SEED, source: str = HELD_OUT) -> Agreement:
    """Student and base agreement with the teacher's cosines, and the paired CI of their difference."""
    gold, first, other = (np.asarray(values, dtype=np.float64) for values in (teacher, base, student))
    base_value, student_value = spearman100(first, gold), spearman100(other, gold)
    interval = None
    if resamples > 0:
        groups = bootstrap.TieGroups(gold), bootstrap.TieGroups(first), bootstrap.TieGroups(other)
        change = bootstrap.replicate(len(gold), resamples, seed, {
            "change": lambda counts: 100 * (bootstrap.weighted_spearman(counts, groups[2], groups[0])
                                            - bootstrap.weighted_spearman(counts, groups[1], groups[0]))})["change"]
        interval = bootstrap.interval(change)
    return Agreement(base_value, student_value, interval, len(gold), source)


def dev_pair_cosines(outputs: Mapping[str, Mapping[str, Sequence[float]]], tasks: Sequence[str]) -> np.ndarray | None:
    """The cosine of every dev pair in one array, task after task in `tasks`' order, from a model's per-unit dev
    outputs; None when a task has no pair cosines (reranking, retrieval), whose units are queries, not pairs."""
    if not tasks or any(set(outputs.get(task, ())) != {"cosine"} for task in tasks):
        return None
    return np.concatenate([np.asarray(outputs[task]["cosine"], dtype=np.float64) for task in tasks])


def dev_agreement(teacher: Mapping[str, Any], base: Mapping[str, Any], student: Mapping[str, Any],
                  resamples: int = bootstrap.DEFAULT_RESAMPLES) -> Agreement | None:
    """The student's agreement with the teacher on the dev pairs against the base's (three models' per-unit dev
    outputs): the pairs of every pair task (STS scores, pair labels); a dev set's reranking or retrieval tasks, whose
    units are queries, add none. None when no task has pairs."""
    tasks = sorted(task for task, outputs in base.items() if set(outputs) == {"cosine"})
    cosines = [dev_pair_cosines(outputs, tasks) for outputs in (teacher, base, student)]
    if any(values is None for values in cosines):
        return None
    return agreement(*cosines, resamples=resamples, source=DEV_PAIRS)  # type: ignore[misc]
