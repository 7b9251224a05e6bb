"""The calibration study (issue 68): its rule applied by code, a cell re-derived from the pools, and every figure
research/findings.md quotes computed from the stored draws."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from research.experiments import calibration

REPO = Path(__file__).parent.parent.parent
STORED = calibration.load()


def test_the_rule_picks_the_estimator_the_product_uses() -> None:
    table = calibration.coverage_table(STORED)
    assert len(table) == 21 and all(row["draws"] == calibration.DRAWS for row in table)
    assert calibration.rule_pick(table) == "C"
    # the tie rule: as many cells within the band, then the nearer to 95 % on average, then B before C
    tied = [{"A": 0.99, "B": 0.955, "C": 0.95}, {"A": 0.99, "B": 0.97, "C": 0.97}]
    assert calibration.rule_pick(tied) == "C"
    assert calibration.rule_pick([{"A": 0.99, "B": 0.95, "C": 0.95}]) == "B"


def test_a_cell_re_derives_from_the_pools() -> None:
    """Three draws of the synthetic chosen cell at n = 100: the same Δ, interval and SEs as stored."""
    population = calibration.synthetic(1.0)
    stored = [row for row in STORED["draws_out"] if row["population"] == population.name
              and row["design"] == "chosen" and row["size"] == 100 and row["seed"] < 3]
    assert len(stored) == 3
    for row in stored:
        fresh = calibration.intervals(population, *calibration.draw(population, "chosen", 100, row["seed"]),
                                      row["seed"])
        for key in ("delta", "se_A", "se_B", "se_C"):
            assert fresh[key] == pytest.approx(row[key], abs=2e-6), key
        np.testing.assert_allclose(fresh["A"], row["A"], atol=2e-6)
    assert STORED["truth"][population.name] == pytest.approx(population.delta, abs=2e-6)


def test_the_product_computes_candidate_c() -> None:
    """The product's SE of the evaluator's paired Δ is the study's C on the same draw."""
    from sentadapt.data.pair_files import ScoredPairs
    from sentadapt.evaluation.evaluator import Evaluator
    from sentadapt.evaluation.sts import ScoredPairsTask

    population = calibration.synthetic(1.0)
    rows, weights, inclusion = calibration.draw(population, "chosen", 100, 0)
    pairs = ScoredPairs(source="dev")
    for row in rows:
        pairs.append(f"a{row}", f"b{row}", float(population.gold[row]))
    pairs.weights, pairs.design = [float(w) for w in weights], True
    evaluator = Evaluator([ScoredPairsTask("dev", pairs)], resamples=200)
    first = evaluator.from_outputs({"dev": {"cosine": population.base[rows].tolist()}})
    other = evaluator.from_outputs({"dev": {"cosine": population.adapted[rows].tolist()}})
    expected = calibration.intervals(population, rows, weights, inclusion, 0)["se_C"]
    assert evaluator.change_se(first, other) == pytest.approx(expected, rel=1e-6)


def test_the_findings_quote_the_stored_study() -> None:
    findings = " ".join((REPO / "research" / "findings.md").read_text(encoding="utf-8").split())
    page = (REPO / "research" / "findings.md").read_text(encoding="utf-8")
    assert all(line in page for line in calibration.lines(STORED) if line)
    for figure in calibration.reading(STORED):
        assert figure in findings, figure
