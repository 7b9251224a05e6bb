"""The default risk limit with the calibrated risk (issue 68): its rule applied by code to the stored cells, a cell
re-derived from the stored per-pair outputs, the product's default equal to the rule's pick, the findings quoting it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research.experiments import risk_limit

REPO = Path(__file__).parent.parent.parent
STORED = json.loads((REPO / risk_limit.RESULTS / risk_limit.STUDY).read_text(encoding="utf-8"))


def test_the_rule_picked_0_10_for_a_single_look_which_issue_83_superseded() -> None:
    """Issue 68's rule chose the limit of one look (0.10). Issue 83's rule chose the limit over every look of the
    label-more loop (research/tests/test_label_loop.py: the product's default now), whose first look at 100 labels
    is tested at 0.10 again."""
    from sentadapt.decision.sequential import look_of

    rows = risk_limit.table(STORED)
    assert len(STORED["cells"]) == 10 * 3 * STORED["seeds"] * 4
    assert risk_limit.rule_limit(rows) == 0.10
    assert look_of([100], 0.2).limit == pytest.approx(risk_limit.rule_limit(rows), abs=1e-12)
    # the rule: the largest limit with false use ≤ 5 % in every row; none passing: the smallest
    made = [{"limit": limit, "false_use": use} for limit, use in ((0.05, 0.0), (0.10, 0.04), (0.15, 0.06), (0.20, 0.09))]
    assert risk_limit.rule_limit(made) == 0.10
    assert risk_limit.rule_limit([{"limit": limit, "false_use": 0.5} for limit in risk_limit.LIMITS]) == 0.05


def test_a_cell_re_derives_from_the_per_pair_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first split seed of every arm and size on one run (l3-l6 on the 500-pair social pool)."""
    from research.experiments import chosen_labels, distill_suite

    real = distill_suite.stored_runs
    monkeypatch.setattr(distill_suite, "stored_runs", lambda results, runs, domains, required: real(
        results, [("l3-l6", "k3e")], ["social"], required=required))
    monkeypatch.setattr(chosen_labels, "SEEDS", 1)
    fresh = risk_limit.study(STORED["resamples"])["cells"]
    stored = {(c["arm"], c["size"]): c for c in STORED["cells"] if c["pairing"] == "l3-l6"
              and c["domain"] == "social" and c["seed"] == 0}
    assert len(fresh) == len(stored) == 12
    for cell in fresh:
        twin = stored[(cell["arm"], cell["size"])]
        assert cell["step"] == twin["step"] and cell["stopped"] == twin["stopped"]
        for key in ("dev_change", "risk", "pool_change"):
            assert cell[key] == pytest.approx(twin[key], abs=1e-9), key


def test_the_findings_quote_the_stored_study() -> None:
    page = (REPO / "research" / "findings.md").read_text(encoding="utf-8")
    assert all(line in page for line in risk_limit.lines(STORED) if line)
