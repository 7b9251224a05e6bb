"""The teacher's evidence and the teacher-led decision: what the product measured and did not adopt (issue 59
removed `--set teacher_evidence`, `teacher_risk` and `agreement_holdout` from sentadapt; research/findings.md has the
rules and verdicts). Kept here, as the product had them, so the studies that weighed them (dev_agreement,
distill_suite, lead_risk, teacher_evidence, wise_probe) still regenerate from their stored per-pair outputs.

The agreement of a model is the Spearman correlation × 100 of its cosines with the teacher's over pairs whose labels
it does not read (the dev pairs, or held-out corpus pairs); the evidence is the student's agreement minus the
base's, with a paired bootstrap CI (the same resamples for both). Pure numpy over stored cosines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sentadapt.decision.rule import KEEP_BASE, RISK, USE_ADAPTED, Decision, DecisionRule
from sentadapt.evaluation import bootstrap, weighted_stats
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
        groups = weighted_stats.TieGroups(gold), weighted_stats.TieGroups(first), weighted_stats.TieGroups(other)
        change = bootstrap.replicate(len(gold), resamples, seed, {
            "change": lambda counts: 100 * (weighted_stats.weighted_spearman(counts, groups[2], groups[0])
                                            - weighted_stats.weighted_spearman(counts, groups[1], groups[0]))})["change"]
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

# The risk rule's limit in a teacher run whose teacher leads the base on dev: chosen by lead_risk.py's rule
# (research/findings.md, "A decision that trusts a leading teacher more"), never the default, removed from the
# product with the rest of the teacher's evidence (issue 59).
TEACHER_LED_RISK = 0.4


def teacher_led_rule(rule: DecisionRule, lead: Any, limit: float | None) -> DecisionRule:
    """The risk rule with `limit` (e.g. TEACHER_LED_RISK) in place of --risk when the
    teacher leads the base on dev, its paired CI above 0; the rule as it is otherwise (strict and positive always,
    and every rule when `limit` is None, the default: a teacher run decides as any other)."""
    if limit is None or rule.name != RISK or lead is None or lead.interval is None or lead.interval[0] <= 0:
        return rule
    return DecisionRule(RISK, limit)


def with_teacher_evidence(decision: Decision, interval: Sequence[float] | None, lead: Any, agreement: Any,
                          rule: DecisionRule) -> Decision:
    """The teacher's evidence (research/findings.md, "The teacher's evidence and blend targets"): a keep-base
    decision becomes use-adapted when the teacher leads the base on dev (its paired CI above 0), the student agrees
    with the teacher significantly better than the base on held-out corpus pairs (sentadapt/evaluation/agreement.py
    until 4a62251), and the student's dev Δ is not significantly below 0 (its CI's upper end above 0). Any other
    decision stands."""
    if decision.decision != KEEP_BASE or lead is None or lead.interval is None or lead.interval[0] <= 0:
        return decision
    if agreement is None or not agreement.better or (interval is not None and interval[1] <= 0):
        return decision
    return Decision(USE_ADAPTED, f"{decision.reason}, but the teacher leads the base on dev ({lead.value:+.2f} "
                                 f"[{lead.interval[0]:+.2f}, {lead.interval[1]:+.2f}]) and the student's "
                                 f"{agreement.describe()}: it carries part of that lead", rule.name, decision.risk)


def with_teacher_lead(decision: Decision, interval: Sequence[float] | None, lead: Any, rule: DecisionRule) -> Decision:
    """`--set teacher_evidence=lead` (docs/decision.md): a keep-base decision becomes use-adapted when the teacher
    leads the base on dev (its paired CI above 0) and the student's dev Δ is not significantly below 0 (its CI's
    upper end above 0): a student trained toward a teacher established as better on these pairs is used unless the
    dev set shows it worse. Any other decision stands."""
    if decision.decision != KEEP_BASE or lead is None or lead.interval is None or lead.interval[0] <= 0:
        return decision
    if interval is None or interval[1] <= 0:
        return decision
    return Decision(USE_ADAPTED, f"{decision.reason}, but the teacher leads the base on dev ({lead.value:+.2f} "
                                 f"[{lead.interval[0]:+.2f}, {lead.interval[1]:+.2f}]) and the student is not "
                                 "significantly worse there: it was trained toward that lead", rule.name,
                    decision.risk)
