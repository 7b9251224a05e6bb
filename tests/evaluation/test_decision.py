"""The run's decision: the risk rule (default), the strict rule, the positive rule, and the evidence they weigh."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from sentadapt.decision.rule import (
    POSITIVE,
    RISK,
    STRICT,
    Decision,
    DecisionRule,
    decide,
    decision_of,
    small_dev_note,
)
from sentadapt.decision.sequential import look_of
from sentadapt.errors import ConfigError
from sentadapt.evaluation.evidence import Evidence, weigh
from tests.conftest import noisy_outputs, sts_dev_evaluator

STRICT_RULE = DecisionRule(STRICT)


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
def test_each_branch_of_the_strict_rule(change: float, interval: list[float] | None, decision: str,
                                        reason: str) -> None:
    assert decide(change, interval, "dev.tsv", rule=STRICT_RULE) == Decision(decision, reason, STRICT)


def test_no_dev_set_means_no_decision() -> None:
    decided = decide(None, None, None)
    assert decided.decision is None and not decided.keep_base
    assert decided.reason == "unknown: no dev set, so nothing measured whether the adapted model beats the base model"


def test_a_run_record_without_a_decision_is_decided_by_the_strict_rule_it_was_made_under() -> None:
    old = {"dev": "stsb", "dev_change": 0.3, "dev_change_ci": [-0.1, 0.7]}  # metrics.json before decisions
    assert decision_of(old) == decide(0.3, [-0.1, 0.7], "stsb", rule=STRICT_RULE) and decision_of(old).keep_base
    recorded = {**old, "decision": "use-adapted", "decision_reason": "as recorded"}
    assert decision_of(recorded) == Decision("use-adapted", "as recorded", STRICT)  # recorded before rules existed
    ruled = {**recorded, "decision_rule": RISK, "decision_risk": 0.12}
    assert decision_of(ruled) == Decision("use-adapted", "as recorded", RISK, 0.12)


# ---------------------------------------------------------------- the evidence (max-T over the evaluations)


def _normal_replicates(change: float, spread: float, resamples: int = 20_000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(change, spread, resamples)


def test_one_option_gives_the_one_sided_normal_confidence() -> None:
    base = np.zeros(20_000)
    evidence = weigh(base, [_normal_replicates(0.8, 0.8)], 80.0, [80.8], 0, 100)
    assert evidence is not None
    # Φ(Δ/s) = Φ(1) = 0.8413; 20,000 normal replicates estimate it within ±0.006 (3 SE)
    assert evidence.confidence == pytest.approx(statistics.NormalDist().cdf(1.0), abs=0.006)
    assert evidence.risk == pytest.approx(1 - evidence.confidence)
    assert (evidence.options, evidence.units, evidence.change) == (1, 100, pytest.approx(0.8))
    # the smallest Δ this dev set calls a gain at risk 0.2: z_0.8 · s = 0.8416 × 0.8 = 0.673
    assert evidence.detectable_gain(0.2) == pytest.approx(0.8416 * 0.8, abs=0.02)


def test_choosing_among_unrelated_options_costs_more_than_among_copies() -> None:
    base = np.zeros(20_000)
    best = _normal_replicates(1.0, 0.8, seed=1)
    copies = weigh(base, [best, best.copy(), best.copy()], 80.0, [81.0, 81.0, 81.0], 0, 100)
    unrelated = weigh(base, [best, _normal_replicates(0.2, 0.8, seed=2), _normal_replicates(-0.5, 0.8, seed=3)],
                      80.0, [81.0, 80.2, 79.5], 0, 100)
    alone = weigh(base, [best], 80.0, [81.0], 0, 100)
    assert copies is not None and unrelated is not None and alone is not None
    assert copies.confidence == pytest.approx(alone.confidence, abs=1e-12)  # identical options: nothing to pay
    # three independent options: P(max of 3 normals < 1.25) = Φ(1.25)³ = 0.8944³ = 0.716, against 0.894 alone
    assert unrelated.confidence == pytest.approx(statistics.NormalDist().cdf(1.25) ** 3, abs=0.01)
    assert unrelated.confidence < alone.confidence - 0.15


def test_a_model_identical_to_the_base_has_no_evidence_and_a_bootstrap_off_has_none() -> None:
    base = _normal_replicates(80.0, 0.5)
    assert weigh(base, [base.copy()], 80.0, [80.0], 0, 100) is None  # no spread: nothing to weigh
    assert weigh(np.array([]), [np.array([])], 80.0, [81.0], 0, 100) is None


# ---------------------------------------------------------------- the risk rule


def _evidence(change: float, confidence: float, options: int = 4, units: int = 100) -> Evidence:
    # M(b) of one option: standard normal noise, here its exact quantiles (q_0.8 = 0.8416)
    noise = tuple(statistics.NormalDist().inv_cdf((i + 0.5) / 2000) for i in range(2000))
    return Evidence(change, 0.8, confidence, options, units, "pairs", noise)


def test_the_risk_rule_uses_a_gain_whose_risk_is_within_the_limit() -> None:
    # 400 dev pairs: one look at the label-more loop's cap is held to the limit itself
    decided = decide(0.96, [-0.6, 2.5], "dev.jsonl", _evidence(0.96, 0.88, units=400), DecisionRule(RISK, 0.2))
    assert decided == Decision("use-adapted", "the adapted model beats the base model on dev.jsonl (Δ +0.96 [-0.60, "
                                              "+2.50]; risk 0.12 that it is no better (best of 4 evaluations), limit "
                                              "0.20)", RISK, pytest.approx(0.12), decided.look, "use")
    assert decided.look is not None and decided.look.sizes == (400,)
    # 100 pairs: the first look is held to 0.2 · √(100/400) = 0.10, and 0.12 is inconclusive there
    first = decide(0.96, [-0.6, 2.5], "dev.jsonl", _evidence(0.96, 0.88))
    assert (first.decision, first.verdict, first.label_more) == ("keep-base", "more", 200)


def test_the_risk_rule_keeps_the_base_when_the_risk_is_too_high_and_the_limit_is_the_users() -> None:
    evidence = _evidence(0.4, 0.7, units=400)
    decided = decide(0.4, [-1.2, 2.0], "dev.jsonl", evidence)
    assert decided.decision == "keep-base"
    assert decided.reason == ("not enough evidence on dev.jsonl (Δ +0.40 [-1.20, +2.00]; risk 0.30 that it is no "
                              "better (best of 4 evaluations), limit 0.20)")  # the last look: no more labels asked
    assert decide(0.4, [-1.2, 2.0], "dev.jsonl", evidence, DecisionRule(RISK, 0.35)).decision == "use-adapted"
    early = decide(0.4, [-1.2, 2.0], "dev.jsonl", _evidence(0.4, 0.7))
    assert early.reason == ("inconclusive on dev.jsonl (Δ +0.40 [-1.20, +2.00]; risk 0.30 that it is no better (best "
                            "of 4 evaluations), limit 0.100 at look 1 of the label-more loop (100 of 400 labels; 0.20 "
                            "over every look)): keep the base model for now and label 100 more pairs (the next look: "
                            "200 labels)")
    implausible = decide(-0.9, [-2.5, 0.7], "dev.jsonl", _evidence(-0.9, 0.15))
    assert (implausible.decision, implausible.verdict) == ("keep-base", "keep")  # risk 0.85 > 0.8: stop early
    assert decide(0.4, [-1.2, 2.0], "dev.jsonl", evidence, STRICT_RULE).decision == "keep-base"
    assert decide(0.4, [-1.2, 2.0], "dev.jsonl", evidence, DecisionRule(POSITIVE)).decision == "use-adapted"


def test_no_rule_uses_a_model_that_did_not_beat_the_base() -> None:
    for rule in (DecisionRule(), STRICT_RULE, DecisionRule(POSITIVE)):
        assert decide(-0.2, [-1.0, 0.6], "dev.jsonl", _evidence(-0.2, 0.3), rule).decision == "keep-base"


@pytest.mark.parametrize(("name", "risk", "message"), [
    ("maybe", 0.2, "--decision: 'maybe' is not a rule; choose one of risk, strict, positive"),
    ("risk", 0.0, "--risk: 0 is not a probability strictly between 0 and 1 (the default is 0.2)"),
    ("risk", 1.5, "--risk: 1.5 is not a probability strictly between 0 and 1 (the default is 0.2)"),
])
def test_bad_rules_are_one_line_errors(name: str, risk: float, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        DecisionRule(name, risk)
    assert str(error.value) == message


def test_a_small_dev_set_is_named_with_the_gain_it_can_confirm_and_the_pairs_it_would_need() -> None:
    evidence = _evidence(0.3, 0.6)  # s = 0.8 on 100 pairs
    gain = evidence.detectable_gain(0.1)  # ≈ 1.28 × 0.8 = 1.03
    needed = 100 * (gain / 0.5) ** 2  # ≈ 420 → rounded up to 450
    first = look_of([100], 0.2)  # the first look at 100 labels is held to 0.10
    assert small_dev_note(evidence, DecisionRule(), first) == (
        f"100 dev pairs: gains below ~{gain:.1f} cannot be confirmed at risk 0.10 (~{int(-(-needed // 50) * 50)} "
        "for ~0.5; `sentadapt pairs` proposes pairs to label; docs/evaluation.md)")
    assert gain == pytest.approx(1.2816 * 0.8, abs=2e-3)
    assert small_dev_note(evidence, DecisionRule(), first).startswith(
        "100 dev pairs: gains below ~1.0 cannot be confirmed at risk 0.10 (~450 for ~0.5;")
    assert small_dev_note(evidence, DecisionRule(RISK, 0.2)).startswith(  # at 0.20: ≈ 0.84 × 0.8 = 0.67
        "100 dev pairs: gains below ~0.7 cannot be confirmed at risk 0.20 (~200 for ~0.5;")
    big = Evidence(0.3, 0.2, 0.9, 4, 1600, "pairs", evidence.noise)  # 0.84 × 0.2 = 0.17: big enough
    assert small_dev_note(big, DecisionRule()) is None
    assert small_dev_note(None, DecisionRule()) is None
    assert small_dev_note(evidence, DecisionRule(POSITIVE)) is None  # that rule confirms nothing


# ---------------------------------------------------------------- through a real evaluator


def test_dev_evidence_pays_for_the_checkpoint_chosen_on_the_same_dev_set(tmp_path: Path) -> None:
    from sentadapt.evaluation.evaluator import dev_evidence

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 100)
    evaluator = sts_dev_evaluator(tmp_path, gold)
    def outputs(noise: float, seed: int) -> dict:
        return noisy_outputs(evaluator, gold, noise, seed)

    base = outputs(0.30, 1)
    steps = [outputs(0.29, seed) for seed in (2, 3, 4, 5)]  # four unrelated draws: no step truly better
    scores = [evaluator.from_outputs(step).average for step in steps]
    best = int(np.argmax(scores))
    alone = dev_evidence(evaluator, base, [steps[best]], 0)
    paid = dev_evidence(evaluator, base, steps, best)
    assert alone is not None and paid is not None
    assert paid.options == 4 and paid.change == pytest.approx(alone.change)
    assert paid.risk > alone.risk  # the best of four is optimistic: more risk once paid for
    assert dev_evidence(evaluator, base, [], 0) is None


def test_a_kept_base_under_a_clearly_better_teacher_gets_a_note_naming_what_to_do() -> None:
    from sentadapt.decision.rule import KEEP_BASE, USE_ADAPTED, Decision, teacher_lead_note
    from sentadapt.evaluation.evaluator import Delta

    keep = Decision(KEEP_BASE, "not enough evidence on dev.tsv (Δ -0.04 [-3.05, +3.25]; risk 0.52 …)", "risk", 0.52)
    leads = Delta(12.96, (6.16, 19.41))
    assert teacher_lead_note(keep, (-3.05, 3.25), leads) == (
        "the teacher leads the base on dev (+12.96 [+6.16, +19.41]) and the student is within noise of the base "
        "there: its share of that lead may be real but too small for this dev set to show; label more pairs to see "
        "it (`sentadapt pairs` proposes them; docs/decision.md)")
    assert teacher_lead_note(keep, (-3.5, -0.1), leads) is None  # significantly worse: nothing to add
    assert teacher_lead_note(keep, (-3.05, 3.25), Delta(4.0, (-1.0, 9.0))) is None  # lead not established
    assert teacher_lead_note(Decision(USE_ADAPTED, "beats", "risk"), (0.1, 3.0), leads) is None


def test_a_gain_just_above_the_one_at_stake_is_not_written_as_it() -> None:
    """Issue 82: 200 pairs said "gains below ~0.5 cannot be confirmed (~250 for ~0.5)"."""
    evidence = Evidence(0.3, 0.41, 0.6, 1, 200, "pairs", tuple(statistics.NormalDist().inv_cdf((i + 0.5) / 2000)
                                                              for i in range(2000)))
    note = small_dev_note(evidence, DecisionRule(RISK, 0.1), look_of([400], 0.1))
    gain = evidence.detectable_gain(0.1)  # ≈ 1.28 × 0.41 = 0.52: one decimal would write it as the 0.5 at stake
    assert round(gain, 1) == 0.5 < gain
    assert note is not None and note.startswith(f"200 dev pairs: gains below ~{gain:.2f} cannot be confirmed at risk "
                                                "0.10 (~250 for ~0.5;")
