"""Issue 41 item 5: the teacher-run default is what the selection rule's code prints from the stored dev grid
(research/findings.md, "Objectives together": the rule was committed before the runs it judges)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sentadapt.config.merging import REMOVED_SETTINGS
from sentadapt.config.schema import TrainConfig
from sentadapt.recipes.presets import TEACHER_DEFAULTS

from research.experiments.distill_suite import (
    DEV_RULES,
    INCUMBENT,
    SELECTION,
    SELECTION_PAIRING,
    chosen_variant,
    confirmed,
    rule_tables,
    rule_verdict,
    select,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("scores", "chosen"), [
    ({"k3": 1.10, "k3x": 1.15, "k3xn": 1.0}, "k3"),  # +0.05 is within the margin: the simpler stays
    ({"k3": 1.10, "k3x": 1.16, "k3xn": 1.0}, "k3x"),
    ({"k3": 1.10, "k3x": 1.30, "k3xn": 1.31}, "k3xn"),
    ({"k3": 1.10}, "k3"),  # no challenger finished
])
def test_a_challenger_must_beat_the_incumbent_by_more_than_the_margin(scores: dict[str, float], chosen: str) -> None:
    assert chosen_variant(scores) == chosen


def test_the_teacher_default_is_what_the_rule_prints_from_the_stored_grid() -> None:
    chosen, scores = select(REPO / "research/results/distill", list(SELECTION), SELECTION_PAIRING, resamples=1000)
    assert INCUMBENT in scores
    default, figures = confirmed(REPO / "research/results/distill", chosen, SELECTION_PAIRING)
    shipped = TEACHER_DEFAULTS.get("distill_kind", TrainConfig().distillation.distill_kind)
    assert shipped == SELECTION[default], (chosen, scores, figures)


@pytest.mark.parametrize(("name", "section"), [("share", "## The share of neighbours in a batch"),
                                               ("batch", "## Larger batches for a teacher run")])
def test_a_lever_default_is_what_its_rule_prints_from_the_stored_grid(name: str, section: str) -> None:
    rule = DEV_RULES[name]
    verdict = rule_verdict(REPO / "research/results/distill", rule, resamples=1000)
    assert "l6-mpnet" in verdict["pairings"]  # the rule reads the all-MiniLM-L6-v2 ← all-mpnet-base-v2 runs at least
    # a lever the product dropped (issue 59) ships its neutral value: what its rule kept
    shipped = TEACHER_DEFAULTS.get(rule.key, getattr(TrainConfig(), rule.key, REMOVED_SETTINGS.get(rule.key)))
    assert shipped == verdict[rule.key] == rule.variants[verdict["default"]], verdict
    findings = (REPO / "research/findings.md").read_text()
    text = findings[findings.index(section):]
    rows = [line for line in rule_tables(REPO / "research/results/distill", rule, resamples=1000) if line.startswith("| ")]
    assert all(row in text for row in rows), [row for row in rows if row not in text]


def test_the_captions_probe_figures_are_what_its_stored_outputs_give() -> None:
    """research/findings.md, "Captions without the recipe's loss": dev-200 −0.17 (kept the base), test raw −0.19."""
    import json

    import numpy as np

    from research.experiments.distill_suite import dev_200

    captions = dev_200(REPO / "research/results/distill", "k3r0", "l6-mpnet", resamples=1000)[1]
    assert f"{captions['dev_change']:+.2f}" == "-0.17" and not captions["used"]
    study = json.loads((REPO / "research/results/distill/study-k3r0-captions.json").read_text())
    assert f"{np.mean([c['raw'] for c in study['cells'] if c['size'] == 200]):+.2f}" == "-0.19"
    assert all(c["applied"] == 0 for c in study["cells"])


def test_a_challenger_the_dev_step_names_must_still_pass_its_test_study() -> None:
    """The rule's second step on stored studies. With a margin of −0.05 the dev step names k3b. Under issue 68's
    calibrated risk at 0.10 its test study was not below k3's, so the step kept it (batch 128); at issue 83's default
    decision (each decision the first look of the label-more loop) k3b's applied Δ at 200 falls below k3's (+0.82
    against +0.86), and the step sends the default back to k3, as it did before issue 68. At the rule's own margin
    the default stays k3 (the test above)."""
    from dataclasses import replace

    rule = replace(DEV_RULES["batch"], margin=-0.05)
    verdict = rule_verdict(REPO / "research/results/distill", rule, resamples=1000)
    assert verdict["dev_choice"] == "k3b"
    test = verdict["test"]
    assert test["k3b"]["raw"] >= test["k3"]["raw"] and test["k3b"]["applied_100"] >= test["k3"]["applied_100"]
    assert test["k3b"]["applied_200"] < test["k3"]["applied_200"]
    assert verdict["default"] == "k3" and verdict["batch_size"] == 64
