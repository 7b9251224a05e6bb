"""A teacher that leads on dev raising the risk rule's limit (the rule chose 0.40 before the code used it:
research/findings.md, "A decision that trusts a leading teacher more"; the 400-pair stress test turned it off, and
issue 59 removed `teacher_risk` from the product: research/experiments/teacher_led.py keeps it for the studies)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from sentadapt.config.schema import DEFAULT_RISK, TrainConfig
from sentadapt.decision.rule import KEEP_BASE, USE_ADAPTED, DecisionRule, decide
from sentadapt.evaluation.evaluator import Delta
from sentadapt.evaluation.evidence import Evidence

from research.experiments.teacher_led import TEACHER_LED_RISK, teacher_led_rule

RESULTS = Path(__file__).parent.parent / "results" / "distill"
LEADS, TRAILS, UNSURE = Delta(3.9, (1.2, 6.6)), Delta(-2.0, (-4.0, -0.5)), Delta(1.0, (-0.4, 2.4))


def _evidence(risk: float) -> Evidence:
    # 400 dev pairs: one look at the label-more loop's cap is decided at the rule's limit itself, as every decision
    # was before issue 83 (the study judged the teacher-led limit as such a single look)
    return Evidence(change=1.8, spread=1.5, confidence=1.0 - risk, options=4, units=400)


@pytest.mark.parametrize(("lead", "rule", "limit"), [
    (LEADS, DecisionRule(), 0.4),  # the teacher leads: the teacher-led limit
    (UNSURE, DecisionRule(), DEFAULT_RISK),  # its CI includes 0: --risk
    (TRAILS, DecisionRule(), DEFAULT_RISK),
    (None, DecisionRule(), DEFAULT_RISK),  # no teacher, or not weighed
    (LEADS, DecisionRule("strict"), DEFAULT_RISK),  # strict and positive ask for what they ask for
    (LEADS, DecisionRule("risk", 0.1), 0.4),  # the teacher-led limit replaces --risk
])
def test_the_limit_is_the_teacher_led_one_only_when_the_teacher_leads_under_the_risk_rule(lead, rule, limit) -> None:
    led = teacher_led_rule(rule, lead, TEACHER_LED_RISK)
    assert led.risk == limit and led.name == rule.name


def test_a_risk_between_the_limits_uses_the_student_of_a_leading_teacher_and_says_why() -> None:
    evidence = _evidence(0.27)  # the one cell the study changed: l6-mpnet news, 100 dev pairs, seed 2 (risk 0.272)
    plain = decide(1.8, (-0.6, 4.2), "dev.tsv", evidence, DecisionRule())
    led = decide(1.8, (-0.6, 4.2), "dev.tsv", evidence, teacher_led_rule(DecisionRule(), LEADS, TEACHER_LED_RISK))
    assert plain.decision == KEEP_BASE and led.decision == USE_ADAPTED
    assert led.reason == ("the adapted model beats the base model on dev.tsv (Δ +1.80 [-0.60, +4.20]; risk 0.27 "
                          "that it is no better (best of 4 evaluations), limit 0.40)")
    assert decide(-0.1, (-2.0, 1.8), "dev.tsv", _evidence(0.3),  # never a student below the base on dev
                  teacher_led_rule(DecisionRule(), LEADS, TEACHER_LED_RISK)).decision == KEEP_BASE


def test_teacher_risk_left_the_product_and_the_rule_without_a_limit_is_the_plain_rule() -> None:
    from sentadapt.config.merging import REMOVED_SETTINGS

    assert "teacher_risk" not in {f.name for f in dataclasses.fields(TrainConfig)}
    assert REMOVED_SETTINGS["teacher_risk"] is None  # a run saved with the default still resumes
    assert teacher_led_rule(DecisionRule(), LEADS, None) == DecisionRule()


def test_the_teacher_led_limit_is_what_the_pre_registered_rule_prints_from_the_stored_study() -> None:
    from research.experiments.lead_risk import lead_risk_verdict

    stored = json.loads((RESULTS / "study-lead-risk.json").read_text())
    assert lead_risk_verdict(stored["cells"]) == stored["verdict"]
    assert stored["verdict"]["chosen"] == TEACHER_LED_RISK  # what `--set teacher_risk=0.4` asked for
    # the same draws as the stored k3e studies' cells (their raw test Δs). Their decisions no longer match at 0.20:
    # the k3e studies were re-derived with issue 68's calibrated risk at its 0.10 default, while this study keeps the
    # bootstrap's risk it was judged by (research/findings.md, "Calibrated intervals and risk")
    cells = {(c["pairing"], c["domain"], c["size"], c["seed"]): c for c in stored["cells"]}
    for name in ("study-k3e.json", "study-k3e-social.json"):
        for cell in json.loads((RESULTS / name).read_text())["cells"]:
            mine = cells[(cell["pairing"], cell["domain"], cell["size"], cell["seed"])]
            assert mine["raw"] == pytest.approx(cell["raw"])


def test_runs_keep_their_best_evaluation_as_the_pre_registered_rule_prints() -> None:
    """research/findings.md, "Deciding on the last evaluation of a teacher run": `last` was not adopted."""
    from research.experiments.lead_risk import last_step_verdict

    stored = json.loads((RESULTS / "study-lead-risk.json").read_text())
    assert last_step_verdict(stored["cells"]) == stored["last_step"]
    assert stored["last_step"]["adopt_last"] is False
