"""The PPI bound (research/findings.md, "What the teacher's cosines could add to the dev labels"): its resampled
Spearman agrees with scipy's, and its verdict and table are what the code prints from the stored cells."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from research.experiments.ppi_bound import label_teacher_correlation, lines, resampled_spearman, verdict

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "research" / "results" / "distill" / "ppi-bound.json"


def test_the_resampled_spearman_is_scipy_s_on_every_resample_ties_included() -> None:
    rng = np.random.default_rng(0)
    predicted, gold = rng.normal(size=40), rng.integers(0, 5, size=40).astype(float)  # gold full of ties
    rows = rng.integers(0, 40, size=(6, 40))
    expected = [100 * spearmanr(predicted[row], gold[row]).statistic for row in rows]
    assert resampled_spearman(predicted, gold, rows) == pytest.approx(expected, abs=1e-9)


def test_a_teacher_that_is_the_labels_correlates_fully_and_noise_barely() -> None:
    rng = np.random.default_rng(1)
    gold = rng.normal(size=150)
    base, student = gold + rng.normal(scale=1.0, size=150), gold + rng.normal(scale=0.8, size=150)
    same = label_teacher_correlation(student, base, gold.copy(), gold, 300, [0])
    assert same["rho"] == pytest.approx(1.0) and same["labelled_spread"] == pytest.approx(same["teacher_spread"])
    unrelated = label_teacher_correlation(student, base, rng.normal(size=150), gold, 300, [0])
    assert abs(unrelated["rho"]) < 0.5


def test_the_stored_verdict_and_the_findings_table_are_what_the_code_prints() -> None:
    stored = json.loads(STORED.read_text())
    assert len(stored["cells"]) == 100
    assert verdict(stored["cells"]) == stored["verdict"]
    assert stored["verdict"]["worth_building"] is False
    findings = (REPO / "research" / "findings.md").read_text()
    printed = [line for line in lines(stored) if line]
    assert len(printed) == 13 and all(line in findings for line in printed)
