"""Choosing among several adapted candidates on one dev set, with the cost of the choice paid.

`adapt --recipe auto` trains K candidates (recipes, or one recipe with other settings) and may hand one
back. Picking the best of K dev Δs is a multiple comparison: even if no candidate helps, the largest of K
noisy Δs is positive, and its plain interval excludes 0 far more often than its level says. Each rule of
`decision.py` pays for it in its own way:

- **risk** (default): a fixed sequence (gatekeeping: Maurer, Hothorn & Lehmacher 1995): the candidates are
  tested in the order they are listed, each at the full `--risk` with its own risk — the max-T rule over its own
  checkpoints, as a single run (evaluation/evidence.py) — and the walk stops at the first candidate that does not
  pass; the one with the largest dev Δ among those that passed is used. The chance of using a candidate that is
  no better stays within the limit over the whole walk, without dividing it among the candidates, so the first
  candidate is decided exactly as `adapt --recipe NAME` would decide it: list the one you expect most from first
  (the default order puts ConSERT first). The price: a candidate after one that fails is not considered.
- **strict**: Bonferroni's adjustment of the paired bootstrap interval: each candidate's Δ gets a paired
  percentile interval at confidence 1 − 0.05 / K (K = 3: the 0.83rd and 99.17th percentiles of the 1,000 paired
  resamples); the candidates whose Δ > 0 and whose adjusted interval excludes 0 are eligible and the one with
  the largest Δ is chosen. With K = 1 this is the strict single-run rule (the 95 % interval). Holm's step-down
  would give the same first choice.
- **positive**: the largest dev Δ, used when > 0 (nothing paid).

All candidates are compared with the SAME base outputs and the SAME resamples (a paired bootstrap seeded by
task, `bootstrap.task_seed`), so the intervals are comparable row by row.

Pure numpy over stored per-unit outputs (no torch): the evaluator recomputes the metrics from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sentadapt.decision.rule import KEEP_BASE, POSITIVE, STRICT, USE_ADAPTED, DecisionRule, describe_risk
from sentadapt.decision.sequential import look_of
from sentadapt.evaluation import bootstrap
from sentadapt.evaluation.evaluator import dev_evidence
from sentadapt.evaluation.evidence import Evidence

FAMILY_ERROR = round(1 - bootstrap.CONFIDENCE, 12)  # 0.05: the chance, over the whole choice, of shipping a noise win
METHOD = "bonferroni"
FIXED_SEQUENCE = "fixed sequence, max-T within each candidate"

Outputs = dict[str, dict[str, list[float]]]  # task → per-unit output name → values (Evaluator.outputs_of)


@dataclass(frozen=True)
class CandidateScore:
    """One candidate's dev outcome against the shared base outputs."""

    name: str
    score: float  # dev score of its selected checkpoint
    change: float  # score − the base model's
    interval: tuple[float, float] | None  # paired 95 % interval of the Δ (None: bootstrap off)
    adjusted: tuple[float, float] | None  # the same at confidence 1 − 0.05 / K

    @property
    def eligible(self) -> bool:
        if self.change <= 0:
            return False
        return self.adjusted is None or self.adjusted[0] > 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dev_score": self.score, "dev_change": self.change,
                "dev_change_ci": list(self.interval) if self.interval else None,
                "dev_change_adjusted_ci": list(self.adjusted) if self.adjusted else None,
                "eligible": self.eligible}


@dataclass(frozen=True)
class Choice:
    """The outcome of the choice: which candidate to use (None: keep the base model) and why, in one line."""

    chosen: str | None
    decision: str  # use-adapted | keep-base
    reason: str
    confidence: float | None  # strict: of the adjusted intervals; risk: 1 − the risk (None: bootstrap off)
    scores: tuple[CandidateScore, ...]
    rule: str = STRICT
    risk: float | None = None  # the risk rule's estimate for the best candidate
    # the risk rule: each candidate's risk (max-T over its own checkpoints), None where it was not tested
    risks: tuple[float | None, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        adjustment = ({"method": METHOD, "candidates": len(self.scores), "family_error": FAMILY_ERROR,
                       "confidence": self.confidence} if self.rule == STRICT else
                      {"method": FIXED_SEQUENCE if self.rule != POSITIVE else "none",
                       "candidates": len(self.scores), "confidence": self.confidence})
        risks = self.risks or (None,) * len(self.scores)
        return {"chosen": self.chosen, "decision": self.decision, "decision_reason": self.reason,
                "decision_rule": self.rule, "decision_risk": self.risk, "adjustment": adjustment,
                "candidates": [{**score.to_dict(), "risk": risk} for score, risk in zip(self.scores, risks,
                                                                                      strict=True)]}


def adjusted_confidence(candidates: int) -> float:
    """Bonferroni: 1 − 0.05 / K (K = 1: 0.95, K = 3: 0.9833…)."""
    return 1 - FAMILY_ERROR / max(candidates, 1)


def score_candidates(evaluator: Any, base: Outputs, candidates: Sequence[tuple[str, Outputs]],
                     ) -> list[CandidateScore]:
    """Each candidate's Δ against `base` with its plain and adjusted paired intervals (same resamples)."""
    confidence = adjusted_confidence(len(candidates))
    scores = []
    for name, outputs in candidates:
        score, change, intervals = evaluator.change_interval(base, outputs, (bootstrap.CONFIDENCE, confidence))
        interval, adjusted = intervals if intervals is not None else (None, None)
        scores.append(CandidateScore(name, score, change, interval, adjusted))
    return scores


def weigh_candidates(evaluator: Any, base: Outputs, candidates: Sequence[tuple[str, Outputs, Sequence[Outputs]]],
                     ) -> tuple[list[CandidateScore], list[Evidence | None]]:
    """Each candidate's score (its selected checkpoint's outputs) and its evidence, paid for the choice among its
    own evaluations. `candidates`: (name, selected outputs, every evaluation's outputs), in the order they are
    tested."""
    scores = score_candidates(evaluator, base, [(name, selected) for name, selected, _ in candidates])
    evidence = []
    for _name, selected, evaluations in candidates:
        options = list(evaluations) or [selected]
        chosen = next((index for index, outputs in enumerate(options) if outputs == selected), None)
        if chosen is None:  # the selected outputs are not among the evaluations kept (an older run): weigh it alone
            options, chosen = [selected], 0
        evidence.append(dev_evidence(evaluator, base, options, chosen))
    return scores, evidence


def choose(scores: Sequence[CandidateScore], dev_name: str | None = None, rule: DecisionRule | None = None,
           evidence: Sequence[Evidence | None] | None = None) -> Choice:
    """The rule's choice (module docstring): strict — the largest Δ among candidates whose adjusted interval
    excludes 0; risk — the candidates in order, each within the limit, until one is not, then the largest Δ of
    those that passed; positive — the largest Δ."""
    if not scores:
        raise ValueError("no candidates to choose from")
    rule = rule or DecisionRule(STRICT)
    if rule.name != STRICT:
        return _choose_by_evidence(scores, dev_name, rule, evidence or [None] * len(scores))
    k = len(scores)
    bootstrap_off = scores[0].adjusted is None
    confidence = None if bootstrap_off else adjusted_confidence(k)
    on = f" on {dev_name}" if dev_name else ""
    eligible = [score for score in scores if score.eligible]
    best = max(scores, key=lambda score: score.change)  # max keeps the first listed of equal Δs
    if eligible:
        chosen = max(eligible, key=lambda score: score.change)
        if bootstrap_off:
            reason = (f"{chosen.name} has the largest dev Δ{on} ({_shown(chosen, None)}); no confidence interval "
                      f"was computed (bootstrap off), so the choice among {k} candidates is not protected "
                      "against a noise win")
        else:
            reason = (f"{chosen.name} beats the base model{on} ({_shown(chosen, confidence)}): its "
                      f"{_percent(confidence)} paired CI (95 % over {k} candidate{'s' if k > 1 else ''}, "
                      "Bonferroni) excludes 0")
        return Choice(chosen.name, USE_ADAPTED, reason, confidence, tuple(scores))
    if best.change <= 0:
        reason = f"no candidate beat the base model{on} (best: {best.name}, {_shown(best, confidence)})"
    else:
        reason = (f"within noise{on}: the best candidate, {best.name} ({_shown(best, confidence)}), has a "
                  f"{_percent(confidence)} paired CI (95 % over {k} candidates, Bonferroni) that includes 0")
    return Choice(None, KEEP_BASE, reason, confidence, tuple(scores))


def _choose_by_evidence(scores: Sequence[CandidateScore], dev_name: str | None, rule: DecisionRule,
                        evidence: Sequence[Evidence | None]) -> Choice:
    k = len(scores)
    on = f" on {dev_name}" if dev_name else ""
    best = max(scores, key=lambda score: score.change)  # max keeps the first listed of equal Δs

    risks: list[float | None] = [None] * k  # filled for the candidates the walk tests

    def made(chosen: CandidateScore | None, reason: str, weighed: Evidence | None) -> Choice:
        return Choice(chosen.name if chosen else None, USE_ADAPTED if chosen else KEEP_BASE, reason,
                      weighed.confidence if weighed else None, tuple(scores), rule.name,
                      weighed.risk if weighed else None, tuple(risks) if rule.name != POSITIVE else ())

    if best.change <= 0:
        return made(None, f"no candidate beat the base model{on} (best: {_plain(best)})", None)
    if rule.name == POSITIVE:
        return made(best, f"{best.name} has the largest dev Δ{on} ({_plain(best)}; rule: any dev Δ > 0)", None)
    if all(weighed is None for weighed in evidence):
        return made(best, f"{best.name} has the largest dev Δ{on} ({_plain(best)}); no risk was computed (bootstrap "
                          f"off), so the choice among {k} candidates is not protected against a noise win", None)
    passed: list[tuple[CandidateScore, Evidence]] = []
    stopped: tuple[CandidateScore, Evidence | None] | None = None
    # the run's dev set is the first look of the label-more loop (decision/sequential.py): each candidate is held to
    # that look's limit, as `adapt --recipe NAME` holds it
    first = look_of([next(weighed.units for weighed in evidence if weighed is not None)], rule.risk)
    for index, (score, weighed) in enumerate(zip(scores, evidence)):  # each tested only if all before it passed
        risks[index] = weighed.risk if weighed is not None else None  # a Δ ≤ 0 has its risk too (≥ 0.5)
        if score.change <= 0 or weighed is None or weighed.risk > first.limit:
            stopped = (score, weighed)
            break
        passed.append((score, weighed))
    order = f"candidates tested in order, {k} in all" if k > 1 else "one candidate"
    if passed:
        chosen, weighed = max(passed, key=lambda pair: pair[0].change)
        return made(chosen, f"{chosen.name} beats the base model{on} ({_plain(chosen)}; "
                            f"{describe_risk(weighed, rule, first)}; {order})", weighed)
    assert stopped is not None
    score, weighed = stopped
    why = "did not beat the base model" if score.change <= 0 else "has not enough evidence"
    risk = f"; {describe_risk(weighed, rule, first)}" if weighed is not None and score.change > 0 else ""
    later = "; the candidates after it are not tested" if k > 1 else ""
    return made(None, f"the first candidate, {score.name}, {why}{on} ({_plain(score)}{risk}){later}", weighed)


def _plain(score: CandidateScore) -> str:
    interval = f" [{score.interval[0]:+.2f}, {score.interval[1]:+.2f}]" if score.interval else ""
    return f"Δ {score.change:+.2f}{interval}"


def _shown(score: CandidateScore, confidence: float | None) -> str:
    interval = score.adjusted if confidence is not None else None
    return f"Δ {score.change:+.2f}" + (f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "")


def _percent(confidence: float | None) -> str:
    return "–" if confidence is None else f"{100 * confidence:.2f} %".replace(".00 %", " %")
