"""The label-more loop study (issue 83): its rule applied by code to the stored loops, the product's defaults are its
pick, a loop re-derives from the pools, and research/findings.md quotes the tables the study renders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from research.experiments import label_loop

REPO = Path(__file__).parent.parent.parent
STORED = label_loop.read(REPO / label_loop.RESULTS / label_loop.STUDY)


def test_the_products_defaults_are_the_rules_pick() -> None:
    from sentadapt.config.schema import DEFAULT_RISK, DEFAULT_SPENDING, LABEL_CAP

    decided = label_loop.verdict(STORED)
    assert decided["default"] == [DEFAULT_SPENDING, DEFAULT_RISK] and decided["stability"] >= 0.8
    assert max(look["n"] for loop in STORED["stored"] for look in loop["looks"]) == LABEL_CAP


def test_the_rule_bounds_losses_and_the_null_and_picks_the_largest_applied_gain() -> None:
    rows = label_loop.chosen_rows(STORED, "sqrt", 0.2)
    assert label_loop.admissible(STORED, "sqrt", 0.2, rows)
    null = label_loop.synthetic_use(STORED, "sqrt", 0.2)["+0.0"]
    assert null["used"] <= 0.2 + 2 * null["mc_se"] and null["loops"] == label_loop.SYNTHETIC_LOOPS
    # the pick is among admissible plans only, however much a barred one would apply
    looser = {plan: rows for plan in label_loop.plans()}
    assert label_loop.pick(STORED, looser, {plan: plan == ("obf", 0.05) for plan in looser}) == ("obf", 0.05)


def test_a_stored_loop_re_derives_from_the_pool() -> None:
    label_loop._load(STORED["resamples"])
    stored = next(entry for entry in STORED["stored"] if entry["arm"] == "chosen" and entry["first"] == 100
                  and entry["seed"] == 0)
    index = next(i for i, p in enumerate(label_loop._POPULATIONS["stored"]) if p.name == stored["population"])
    fresh = label_loop._stored_job((index, "chosen", 100, 0))
    assert [look["n"] for look in fresh["looks"]] == [look["n"] for look in stored["looks"]]
    for mine, theirs in zip(fresh["looks"], stored["looks"], strict=True):
        for key in ("delta", "se", "low", "high", "risk"):
            assert mine[key] == pytest.approx(theirs[key], abs=2e-6), key


def test_a_loop_decides_as_the_product_decides_each_look() -> None:
    from sentadapt.decision.rule import DecisionRule, decide
    from sentadapt.evaluation.evidence import Evidence

    looks = [{"n": 100, "delta": 0.5, "risk": 0.3}, {"n": 200, "delta": 1.2, "risk": 0.04},
             {"n": 400, "delta": 1.0, "risk": 0.02}]
    assert label_loop.run_loop(looks, "sqrt", 0.2) == (True, 200)
    assert label_loop.run_loop(looks, "sqrt", 0.2, loop=False) == (False, 100)
    evidence = Evidence(1.2, 0.6, 0.96, 1, 200, "pairs", tuple(np.linspace(-3, 3, 101)))
    made = decide(1.2, [0.0, 2.4], "dev", evidence, DecisionRule("risk", 0.2), earlier=[100])
    assert made.verdict == "use" and made.look is not None and made.look.sizes == (100, 200)


def test_findings_quote_the_tables_the_study_renders() -> None:
    findings = (REPO / "research" / "findings.md").read_text(encoding="utf-8")
    assert "\n".join(label_loop.lines(STORED)) in findings
