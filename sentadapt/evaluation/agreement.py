"""The teacher's evidence for a student: how well a model's cosines agree with the teacher's on held-out pairs of the
user's own corpus, which need no labels.

A dev set of 200 labelled pairs cannot see a 2-point gain (its 95 % CI is about ±3), but when the teacher is weighed
as clearly ahead of the base on those very pairs, a student that agrees with the teacher more than the base does, on
thousands of in-domain pairs it never trained on, has most likely taken over part of that lead. The agreement of a
model is the Spearman correlation × 100 of its cosines with the teacher's over the pairs; the evidence is the
student's agreement minus the base's, with a paired bootstrap CI (the same resamples for both: bootstrap.py).

Pure numpy over stored cosines: the decision study recomputes it from dev_outputs.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sentadapt.evaluation import bootstrap
from sentadapt.evaluation.sts import spearman100

SEED = 7  # the agreement pairs' own resampling seed (bootstrap.task_seed would key it by a task name)


@dataclass(frozen=True)
class Agreement:
    """The student's agreement with the teacher against the base's, on `pairs` held-out corpus pairs."""

    base: float  # Spearman × 100 of the base's cosines with the teacher's
    student: float
    interval: tuple[float, float] | None  # paired 95 % CI of student − base (None: bootstrap off)
    pairs: int

    @property
    def change(self) -> float:
        return self.student - self.base

    @property
    def better(self) -> bool:
        """The student agrees with the teacher significantly better than the base (the CI above 0)."""
        return self.interval is not None and self.interval[0] > 0

    def to_dict(self) -> dict[str, Any]:
        return {"base": round(self.base, 4), "student": round(self.student, 4), "change": round(self.change, 4),
                "ci": None if self.interval is None else [round(v, 4) for v in self.interval], "pairs": self.pairs}

    def describe(self) -> str:
        ci = "" if self.interval is None else f" [{self.interval[0]:+.2f}, {self.interval[1]:+.2f}]"
        return (f"agreement with the teacher on {self.pairs:,} held-out corpus pairs {self.base:.2f} → "
                f"{self.student:.2f} (Δ {self.change:+.2f}{ci})")


def agreement(teacher: Sequence[float] | np.ndarray, base: Sequence[float] | np.ndarray,
              student: Sequence[float] | np.ndarray, resamples: int = bootstrap.DEFAULT_RESAMPLES,
              seed: int = SEED) -> Agreement:
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
    return Agreement(base_value, student_value, interval, len(gold))
