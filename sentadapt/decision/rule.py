"""The run's decision: use the adapted model, or keep the base model.

One rule decides for the summary, metrics.json, the trackers, the model card and `--require-improvement`.
Three are offered (`adapt --decision`):

- **risk** (default): use the adapted model when its dev Δ is positive and the risk that it is no better than
  the base, with the choice of the best of the run's dev evaluations paid for (evaluation/evidence.py), is at
  most `--risk` (`DEFAULT_RISK`, spent over the looks of the label-more loop: decision/sequential.py). It weighs
  the evidence a dev set can give instead of asking for a significance it cannot provide: 100 pairs cannot confirm
  a gain under ~1.5 at 95 %, and the gains adaptation makes on sentence-tuned bases are 0.2-1.2 (docs/evaluation.md
  has the power table, research/findings.md the measurements behind the default).
- **strict**: the rule of earlier versions: Δ > 0 and its paired 95 % bootstrap CI excludes 0 (with `--recipe auto`,
  the Bonferroni-adjusted CI). Ships almost no loss and almost no gain on small dev sets.
- **positive**: use whenever the dev Δ > 0 (the best dev score wins; no protection against noise).

Without a bootstrap (resamples 0) no risk can be computed: a positive Δ decides and the reason says so.
Without a dev set nothing was measured: no decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sentadapt.config.schema import DEFAULT_DECISION, DEFAULT_RISK, LABEL_CAP
from sentadapt.decision.sequential import FUTILITY_RISK, MORE, USE, Look, look_of
from sentadapt.errors import ConfigError
from sentadapt.evaluation.evidence import Evidence

USE_ADAPTED = "use-adapted"
KEEP_BASE = "keep-base"
RISK, STRICT, POSITIVE = "risk", "strict", "positive"
RULES = (RISK, STRICT, POSITIVE)
DEFAULT_RULE = DEFAULT_DECISION
# At a true gain of 0 the adapted model is used in at most DEFAULT_RISK of the runs over every look (the max-T risk is
# calibrated there); real losses less often.
# A dev set that cannot call a gain of this size (points × 100 of the main metric) gets a note: the gains
# adaptation makes on sentence-tuned bases are ~0.2-1.2 (research/results.md).
GAIN_AT_STAKE = 0.5


@dataclass(frozen=True)
class DecisionRule:
    name: str = DEFAULT_RULE
    risk: float = DEFAULT_RISK

    def __post_init__(self) -> None:
        if self.name not in RULES:
            raise ConfigError(f"--decision: '{self.name}' is not a rule; choose one of {', '.join(RULES)}")
        if not 0 < self.risk < 1:
            raise ConfigError(f"--risk: {self.risk:g} is not a probability strictly between 0 and 1 "
                              f"(the default is {DEFAULT_RISK:g})")

    @property
    def confirming_risk(self) -> float:
        """The one-sided risk at which the rule calls a gain: its limit, or 0.025 for strict (the lower bound of a
        two-sided 95 % CI); what the smallest confirmable gain is computed at."""
        return self.risk if self.name == RISK else 0.025

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.name, "max_risk": self.risk if self.name == RISK else None}


@dataclass(frozen=True)
class Decision:
    decision: str | None  # use-adapted | keep-base | None (no dev set)
    reason: str  # one line: the Δ, the evidence and why
    rule: str | None = None
    risk: float | None = None  # estimated risk that the chosen model is no better (None: not computed)
    look: Look | None = None  # where the decision stands in the label-more loop (the risk rule)
    verdict: str | None = None  # the look's verdict: use | keep | more (inconclusive: label more, the base for now)

    @property
    def keep_base(self) -> bool:
        return self.decision == KEEP_BASE

    @property
    def label_more(self) -> int | None:
        """The next look's labels when this one is inconclusive, else None."""
        return self.look.next_size if self.look is not None and self.verdict == MORE else None

    def to_dict(self) -> dict[str, Any]:
        look = None if self.look is None else {**self.look.to_dict(), "verdict": self.verdict,
                                                 "next_labels": self.label_more}
        return {"decision": self.decision, "decision_reason": self.reason, "decision_rule": self.rule,
                "decision_risk": self.risk, "decision_look": look}


NO_CHECKPOINT_GAINED = "no checkpoint beat the base model"  # a run's decision: it chose among its checkpoints


def decide(dev_change: float | None, interval: Sequence[float] | None, dev_name: str | None,
           evidence: Evidence | None = None, rule: DecisionRule | None = None,
           no_gain: str = NO_CHECKPOINT_GAINED, earlier: Sequence[int] = ()) -> Decision:
    """The decision from the dev Δ (best − base), its paired 95 % CI and the selection-aware evidence; `no_gain`
    says what a Δ ≤ 0 means (`decide` weighs the published model alone: no checkpoint was chosen). Under the risk
    rule the decision is a look of the label-more loop (decision/sequential.py): `earlier` the labels of the looks
    recorded before this one, whose risk limit this look's shares."""
    rule = rule or DecisionRule()
    if dev_change is None:
        return Decision(None, "unknown: no dev set, so nothing measured whether the adapted model beats the base "
                              "model", rule.name)
    risk = evidence.risk if evidence is not None else None
    shown = f"Δ {dev_change:+.2f}" + (f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "")
    on = f" on {dev_name}" if dev_name else ""
    if rule.name == RISK and evidence is not None and risk is not None:
        return _by_look(evidence, rule, look_of([*earlier, evidence.units], rule.risk), on, shown, no_gain, dev_change)
    if dev_change <= 0:
        return Decision(KEEP_BASE, f"{no_gain}{on} ({shown})", rule.name, risk)
    if rule.name == POSITIVE:
        return Decision(USE_ADAPTED, f"the adapted model beats the base model{on} ({shown}; rule: any dev Δ > 0)",
                        rule.name, risk)
    if interval is None and evidence is None:
        return Decision(USE_ADAPTED, f"the adapted model beats the base model{on} ({shown}); no confidence "
                                     "interval was computed (bootstrap off)", rule.name, risk)
    if interval is not None and interval[0] <= 0:
        return Decision(KEEP_BASE, f"within noise{on} ({shown}): the paired 95 % CI includes 0", rule.name, risk)
    return Decision(USE_ADAPTED, f"the adapted model beats the base model{on} ({shown}): the paired 95 % CI "
                                 "excludes 0", rule.name, risk)


def describe_risk(evidence: Evidence, rule: DecisionRule, look: Look | None = None) -> str:
    """'risk 0.12 that it is no better (best of 4 evaluations), limit 0.10': what a reason quotes of the evidence;
    with a look of the label-more loop, its own limit and where it stands ('limit 0.083 at look 2 of the label-more
    loop, 200 of 400 labels; 0.20 over every look')."""
    chosen = f"best of {evidence.options} evaluations" if evidence.options > 1 else "one evaluation"
    if look is None or math.isclose(look.limit, rule.risk, rel_tol=1e-9):  # one look at the cap: the limit itself
        return f"risk {evidence.risk:.2f} that it is no better ({chosen}), limit {rule.risk:.2f}"
    return (f"risk {evidence.risk:.2f} that it is no better ({chosen}), limit {look.limit:.3f} at look "
            f"{look.number} of the label-more loop ({look.sizes[-1]} of {LABEL_CAP} labels; {rule.risk:.2f} over "
            "every look)")


def _by_look(evidence: Evidence, rule: DecisionRule, look: Look, on: str, shown: str, no_gain: str,
             dev_change: float) -> Decision:
    """The look's verdict (decision/sequential.Look): use, keep, or inconclusive — the base for now, more labels
    asked for."""
    risk = evidence.risk
    measured = describe_risk(evidence, rule, look)
    verdict = look.verdict(risk, dev_change)
    if verdict == USE:
        return Decision(USE_ADAPTED, f"the adapted model beats the base model{on} ({shown}; {measured})",
                        rule.name, risk, look, verdict)
    if verdict == MORE:
        return Decision(KEEP_BASE, f"inconclusive{on} ({shown}; {measured}): keep the base model for now and "
                                   f"label {look.next_size - look.sizes[-1] if look.next_size else 0} more pairs "
                                   f"(the next look: {look.next_size} labels)", rule.name, risk, look, verdict)
    if dev_change <= 0 or risk > FUTILITY_RISK:
        why = no_gain if dev_change <= 0 else "a gain is implausible"
        return Decision(KEEP_BASE, f"{why}{on} ({shown}; {measured})", rule.name, risk, look, verdict)
    return Decision(KEEP_BASE, f"not enough evidence{on} ({shown}; {measured})", rule.name, risk, look, verdict)


def small_dev_note(evidence: Evidence | None, rule: DecisionRule, look: Look | None = None) -> str | None:
    """One line when the dev set cannot call gains of the size at stake (GAIN_AT_STAKE) under the rule (at the
    limit of the look it decided, when the risk rule's decision was a look of the label-more loop)."""
    if evidence is None or rule.name == POSITIVE:
        return None
    risk = look.limit if look is not None and rule.name == RISK else rule.confirming_risk
    gain = evidence.detectable_gain(risk)
    if not gain > GAIN_AT_STAKE:  # also False for nan
        return None
    needed = evidence.units * (gain / GAIN_AT_STAKE) ** 2  # the detectable gain shrinks as 1/√n
    # one decimal, unless it would read as the gain at stake itself ("below ~0.5 … ~250 for ~0.5": issue 82)
    shown = f"{gain:.1f}" if round(gain, 1) > GAIN_AT_STAKE else f"{gain:.2f}"
    return (f"{evidence.units} dev {evidence.unit_name}: gains below ~{shown} cannot be confirmed at risk "
            f"{risk:.2f} (~{_round_up(needed)} for ~{GAIN_AT_STAKE}; `sentadapt pairs` proposes pairs to label; "
            "docs/evaluation.md)")


def teacher_lead_note(decision: Decision, interval: Sequence[float] | None, lead: Any) -> str | None:
    """One line when a run keeps the base although its teacher leads the base on dev (CI above 0) and the student is
    not significantly worse there: the student's share of that lead may be real yet below what the dev set can
    show, and more labelled pairs would show it. None otherwise. (It does not let the lead decide: at 400 dev pairs
    the one student that rule added lost; research/findings.md.)"""
    if decision.decision != KEEP_BASE or lead is None or lead.interval is None:
        return None
    if lead.interval[0] <= 0 or interval is None or interval[1] <= 0:
        return None
    return (f"the teacher leads the base on dev ({lead.value:+.2f} [{lead.interval[0]:+.2f}, {lead.interval[1]:+.2f}])"
            " and the student is within noise of the base there: its share of that lead may be real but too small "
            "for this dev set to show; label more pairs to see it (`sentadapt pairs` proposes them; docs/decision.md)")


def _round_up(value: float) -> int:
    step = 50 if value < 1000 else 500
    return int(-(-value // step) * step)


def decision_rule(config: Any) -> DecisionRule:
    """The rule a run's config asks for (runs saved before rules existed: the default)."""
    risk = getattr(config, "risk", None)
    return DecisionRule(getattr(config, "decision", None) or DEFAULT_RULE, DEFAULT_RISK if risk is None else risk)


def evidence_record(evidence: Evidence | None, rule: DecisionRule, look: Look | None = None,
                    ) -> dict[str, Any] | None:
    """metrics.json's `dev_evidence`: what the risk rule weighed (the detectable gain at the look's own limit)."""
    if evidence is None:
        return None
    risk = look.limit if look is not None and rule.name == RISK else rule.confirming_risk
    return {"change": evidence.change, "standard_error": evidence.spread, "confidence": evidence.confidence,
            "risk": evidence.risk, "options": evidence.options, "units": evidence.units,
            "detectable_gain": evidence.detectable_gain(risk), "detectable_at_risk": risk,
            "method": "studentised max-T over every dev evaluation (Westfall & Young): the calibrated SE "
                      "(evaluation/variance.py), the paired bootstrap's joint noise"}


def decision_of(metrics: Mapping[str, Any]) -> Decision:
    """A run record's decision: as recorded, or decided from its Δ for runs recorded before decisions were."""
    if "decision" in metrics:
        return Decision(metrics["decision"], str(metrics.get("decision_reason") or ""),
                        metrics.get("decision_rule") or STRICT, metrics.get("decision_risk"))
    return decide(metrics.get("dev_change"), metrics.get("dev_change_ci"), metrics.get("dev"),
                  rule=DecisionRule(STRICT))
