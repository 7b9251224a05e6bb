"""Choosing among several adapted candidates on one dev set, with the cost of the choice paid.

`adapt --recipe auto` trains K candidates (recipes, or one recipe with other settings) and may hand one
back. Picking the best of K dev Δs is a multiple comparison: even if no candidate helps, the largest of K
noisy Δs is positive, and its plain interval excludes 0 far more often than its level says. Each rule of
`decision.py` pays for it in its own way:

- **risk** (default): the candidate with the largest dev Δ is used when the risk that it is no better than the
  base is at most `--risk`, the risk computed by the max-T rule over EVERY model evaluated on the dev set — each
  candidate's every checkpoint (evaluation/evidence.py). Correlated checkpoints of one candidate cost little,
  unrelated candidates cost like Šidák's correction, and a single run is the case K = 1 of the same computation.
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

from sentadapt.evaluation import bootstrap
from sentadapt.evaluation.decision import KEEP_BASE, POSITIVE, STRICT, USE_ADAPTED, DecisionRule
from sentadapt.evaluation.evaluator import dev_evidence
from sentadapt.evaluation.evidence import Evidence

FAMILY_ERROR = round(1 - bootstrap.CONFIDENCE, 12)  # 0.05: the chance, over the whole choice, of shipping a noise win
METHOD = "bonferroni"

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

    def to_dict(self) -> dict[str, Any]:
        adjustment = ({"method": METHOD, "candidates": len(self.scores), "family_error": FAMILY_ERROR,
                       "confidence": self.confidence} if self.rule == STRICT else
                      {"method": "max-T over every evaluation" if self.rule != POSITIVE else "none",
                       "candidates": len(self.scores), "confidence": self.confidence})
        return {"chosen": self.chosen, "decision": self.decision, "decision_reason": self.reason,
                "decision_rule": self.rule, "decision_risk": self.risk, "adjustment": adjustment,
                "candidates": [score.to_dict() for score in self.scores]}


def adjusted_confidence(candidates: int) -> float:
    """Bonferroni: 1 − 0.05 / K (K = 1: 0.95, K = 3: 0.9833…)."""
    return 1 - FAMILY_ERROR / max(candidates, 1)


def score_candidates(evaluator: Any, base: Outputs, candidates: Sequence[tuple[str, Outputs]],
                     ) -> list[CandidateScore]:
    """Each candidate's Δ against `base` with its plain and adjusted paired intervals (same resamples)."""
    confidence = adjusted_confidence(len(candidates))
    scores = []
    for name, outputs in candidates:
        score, change, replicates = evaluator.change_replicates(base, outputs)
        interval = adjusted = None
        if replicates is not None:
            interval, adjusted = bootstrap.interval(replicates), bootstrap.interval(replicates, confidence)
        scores.append(CandidateScore(name, score, change, interval, adjusted))
    return scores


def weigh_candidates(evaluator: Any, base: Outputs, candidates: Sequence[tuple[str, Outputs, Sequence[Outputs]]],
                     ) -> tuple[list[CandidateScore], Evidence | None]:
    """Each candidate's score (its selected checkpoint's outputs) and the evidence for the best one, paid for every
    evaluation of every candidate. `candidates`: (name, selected outputs, every evaluation's outputs)."""
    scores = score_candidates(evaluator, base, [(name, selected) for name, selected, _ in candidates])
    if not scores:
        return scores, None
    best = max(range(len(scores)), key=lambda index: scores[index].change)
    options: list[Outputs] = []
    chosen = 0
    for index, (_name, selected, evaluations) in enumerate(candidates):
        evaluations = list(evaluations) or [selected]
        if index == best:
            chosen = len(options) + next((i for i, outputs in enumerate(evaluations) if outputs == selected), 0)
        options.extend(evaluations)
    return scores, dev_evidence(evaluator, base, options, chosen)


def choose(scores: Sequence[CandidateScore], dev_name: str | None = None, rule: DecisionRule | None = None,
           evidence: Evidence | None = None) -> Choice:
    """The rule's choice (module docstring): strict — the largest Δ among candidates whose adjusted interval
    excludes 0; risk — the largest Δ when its selection-aware risk is within the limit; positive — the largest Δ."""
    if not scores:
        raise ValueError("no candidates to choose from")
    rule = rule or DecisionRule(STRICT)
    if rule.name != STRICT:
        return _choose_by_evidence(scores, dev_name, rule, evidence)
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
                        evidence: Evidence | None) -> Choice:
    k = len(scores)
    on = f" on {dev_name}" if dev_name else ""
    best = max(scores, key=lambda score: score.change)
    risk = evidence.risk if evidence is not None else None
    confidence = evidence.confidence if evidence is not None else None
    interval = f" [{best.interval[0]:+.2f}, {best.interval[1]:+.2f}]" if best.interval else ""
    shown = f"{best.name}, Δ {best.change:+.2f}{interval}"

    def made(chosen: str | None, reason: str) -> Choice:
        return Choice(chosen, USE_ADAPTED if chosen else KEEP_BASE, reason, confidence, tuple(scores), rule.name,
                      risk)

    if best.change <= 0:
        return made(None, f"no candidate beat the base model{on} (best: {shown})")
    if rule.name == POSITIVE:
        return made(best.name, f"{best.name} has the largest dev Δ{on} ({shown}; rule: any dev Δ > 0)")
    if evidence is None:
        return made(best.name, f"{best.name} has the largest dev Δ{on} ({shown}); no risk was computed (bootstrap "
                               f"off), so the choice among {k} candidates is not protected against a noise win")
    measured = (f"risk {evidence.risk:.2f} that it is no better (best of {evidence.options} evaluations of {k} "
                f"candidate{'s' if k > 1 else ''}), limit {rule.risk:.2f}")
    if evidence.risk <= rule.risk:
        return made(best.name, f"{best.name} beats the base model{on} ({shown}; {measured})")
    return made(None, f"not enough evidence{on}: the best candidate, {shown}; {measured}")


def choose_unadjusted(scores: Sequence[CandidateScore]) -> str | None:
    """The reference rule the domain suite reports beside `choose`: the largest dev Δ, used when its plain 95 %
    interval excludes 0 (or Δ > 0 with the bootstrap off) — the multiple comparison NOT paid for."""
    best = max(scores, key=lambda score: score.change)
    if best.change <= 0:
        return None
    return best.name if best.interval is None or best.interval[0] > 0 else None


def _shown(score: CandidateScore, confidence: float | None) -> str:
    interval = score.adjusted if confidence is not None else None
    return f"Δ {score.change:+.2f}" + (f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "")


def _percent(confidence: float | None) -> str:
    return "–" if confidence is None else f"{100 * confidence:.2f} %".replace(".00 %", " %")
