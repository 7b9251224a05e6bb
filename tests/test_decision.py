"""The run's decision: use-adapted only when the dev Δ > 0 and its paired 95 % CI excludes 0."""

from __future__ import annotations

import pytest

from sentadapt.evaluation.decision import Decision, decide, decision_of


@pytest.mark.parametrize(("change", "interval", "decision", "reason"), [
    (2.68, [0.9, 4.4], "use-adapted",
     "the adapted model beats the base model on dev.tsv (Δ +2.68 [+0.90, +4.40]): the paired 95 % CI excludes 0"),
    (0.5, [-0.3, 1.2], "keep-base", "within noise on dev.tsv (Δ +0.50 [-0.30, +1.20]): the paired 95 % CI includes 0"),
    (0.5, [0.0, 1.2], "keep-base", "within noise on dev.tsv (Δ +0.50 [+0.00, +1.20]): the paired 95 % CI includes 0"),
    (-1.25, [-2.0, -0.5], "keep-base", "no checkpoint beat the base model on dev.tsv (Δ -1.25 [-2.00, -0.50])"),
    (0.0, [0.0, 0.0], "keep-base", "no checkpoint beat the base model on dev.tsv (Δ +0.00 [+0.00, +0.00])"),
    (0.4, None, "use-adapted", "the adapted model beats the base model on dev.tsv (Δ +0.40); no confidence interval "
                               "was computed (bootstrap off)"),
    (-0.4, None, "keep-base", "no checkpoint beat the base model on dev.tsv (Δ -0.40)"),
])
def test_each_branch_of_the_decision(change: float, interval: list[float] | None, decision: str, reason: str) -> None:
    assert decide(change, interval, "dev.tsv") == Decision(decision, reason)


def test_no_dev_set_means_no_decision() -> None:
    decided = decide(None, None, None)
    assert decided.decision is None and not decided.keep_base
    assert decided.reason == "unknown: no dev set, so nothing measured whether the adapted model beats the base model"


def test_a_run_record_without_a_decision_is_decided_from_its_change() -> None:
    old = {"dev": "stsb", "dev_change": 0.3, "dev_change_ci": [-0.1, 0.7]}  # metrics.json before decisions
    assert decision_of(old) == decide(0.3, [-0.1, 0.7], "stsb") and decision_of(old).keep_base
    recorded = {**old, "decision": "use-adapted", "decision_reason": "as recorded"}
    assert decision_of(recorded) == Decision("use-adapted", "as recorded")
