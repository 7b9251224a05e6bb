"""research/experiments/teacher_led.py: the teacher's evidence (the agreement of a model's cosines with the
teacher's) and the rule that would turn keep-base into use-adapted — what the studies weighed and the product
dropped (issue 59)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr
from sentadapt.decision.rule import KEEP_BASE, USE_ADAPTED, Decision, DecisionRule
from sentadapt.evaluation.evaluator import Delta

from research.experiments.teacher_led import Agreement, agreement, with_teacher_evidence


def test_agreement_is_spearman_with_the_teachers_cosines_and_a_paired_ci() -> None:
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=2000)
    base = teacher + rng.normal(scale=1.5, size=2000)
    student = teacher + rng.normal(scale=0.8, size=2000)
    found = agreement(teacher, base, student, resamples=300)
    assert found.base == pytest.approx(100 * spearmanr(base, teacher).statistic, abs=1e-9)
    assert found.student == pytest.approx(100 * spearmanr(student, teacher).statistic, abs=1e-9)
    assert found.interval is not None and found.interval[0] < found.change < found.interval[1]
    assert found.better and found.pairs == 2000
    same = agreement(teacher, base, base, resamples=300)
    assert same.change == 0 and same.interval == (0.0, 0.0) and not same.better
    assert agreement(teacher, base, student, resamples=0).interval is None


KEEP = Decision(KEEP_BASE, "not enough evidence on dev.tsv (Δ -0.04 [-3.05, +3.25]; risk 0.52 …)", "risk", 0.52)
LEADS = Delta(12.96, (6.16, 19.41))


@pytest.mark.parametrize(("lead", "agreement_ci", "dev_ci", "used"), [
    (LEADS, (0.5, 2.0), (-3.05, 3.25), True),  # the held-out social-posts case of issue 41
    (Delta(4.0, (-1.0, 9.0)), (0.5, 2.0), (-3.05, 3.25), False),  # the teacher's lead is not established
    (LEADS, (-0.2, 2.0), (-3.05, 3.25), False),  # the agreement gain is not established
    (LEADS, (0.5, 2.0), (-3.5, -0.1), False),  # significantly worse on dev
    (None, (0.5, 2.0), (-3.05, 3.25), False),  # no teacher weighed
])
def test_the_rule_uses_the_student_only_when_all_three_conditions_hold(lead, agreement_ci, dev_ci, used) -> None:
    found = Agreement(80.0, 81.2, agreement_ci, 5000)
    decided = with_teacher_evidence(KEEP, dev_ci, lead, found, DecisionRule())
    assert decided.decision == (USE_ADAPTED if used else KEEP_BASE)
    if used:
        assert decided.reason == (
            f"{KEEP.reason}, but the teacher leads the base on dev (+12.96 [+6.16, +19.41]) and the student's "
            f"agreement with the teacher on 5,000 held-out corpus pairs 80.00 → 81.20 (Δ +1.20 [+0.50, +2.00]): "
            "it carries part of that lead")
    else:
        assert decided is KEEP
    use = Decision(USE_ADAPTED, "beats", "risk", 0.1)
    assert with_teacher_evidence(use, dev_ci, lead, Agreement(80.0, 79.0, (-2.0, -0.5), 5000), DecisionRule()) is use
