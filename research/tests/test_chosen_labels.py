"""The chosen-labels study (issue 58): its rule applied by code, its cells re-derived from the stored per-pair
outputs, and every figure the user docs and the README quote computed from the stored study."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from research.experiments import chosen_labels
from research.experiments.chosen_labels import (
    Stored,
    coverage_rows,
    errors,
    lines,
    power_rows,
    rule_share,
)

REPO = Path(__file__).parent.parent.parent
RESULTS = REPO / "research" / "results" / "distill"
STORED = json.loads((RESULTS / chosen_labels.STUDY).read_text())


@pytest.fixture(scope="module")
def social() -> Stored:
    """The smallest stored run (l3-l6 on the 500-pair social pool), read from its per-pair outputs."""
    from research.experiments.distill_suite import stored_runs

    (stored,) = stored_runs(RESULTS, [("l3-l6", "k3e")], ["social"], required=True)
    return Stored(stored)


def test_the_rule_picks_the_share_the_product_uses() -> None:
    from sentadapt.pairs.design import UNIFORM_SHARE

    assert rule_share(STORED["errors"]) == STORED["share"] == UNIFORM_SHARE == 0.5
    # the tie rule: a share within 0.01 of the best's largest ratio and larger wins
    table = {"c": {"random": 1.0, "after 0.2": 0.70, "after 0.3": 0.705, "after 0.5": 0.72}}
    assert rule_share(table) == 0.3


def test_a_cell_re_derives_from_the_per_pair_outputs(social: Stored, monkeypatch: pytest.MonkeyPatch) -> None:
    assert social.pool_change == pytest.approx(STORED["pool_change"]["l3-l6/social"], abs=1e-9)
    assert errors([social]) == {"l3-l6/social": pytest.approx(STORED["errors"]["l3-l6/social"], abs=1e-9)}
    monkeypatch.setattr(chosen_labels, "SEEDS", 2)
    monkeypatch.setattr(chosen_labels, "COVERAGE_DRAWS", 3)
    cells = chosen_labels.decisions([social], STORED["share"], STORED["resamples"])
    stored = {(c["arm"], c["size"], c["seed"]): c for c in STORED["decisions"] if c["pairing"] == "l3-l6"
              and c["domain"] == "social" and c["seed"] < 2}
    assert len(cells) == len(stored) == 24
    for cell in cells:
        twin = stored[(cell["arm"], cell["size"], cell["seed"])]
        assert cell["used"] == twin["used"] and cell["raw"] == pytest.approx(twin["raw"], abs=1e-9)
    drawn = chosen_labels.coverage([social], STORED["share"], STORED["resamples"])
    kept = {(c["design"], c["size"], c["seed"]): c for c in STORED["coverage"] if c["pairing"] == "l3-l6"
            and c["domain"] == "social" and c["seed"] < 3}
    assert len(drawn) == len(kept) == 27
    for cell in drawn:
        twin = kept[(cell["design"], cell["size"], cell["seed"])]
        assert cell["covered"] == twin["covered"] and cell["low"] == pytest.approx(twin["low"], abs=1e-9)


@pytest.mark.parametrize(("pairing", "domain"), [(pairing, domain) for pairing in ("l6-mpnet", "l3-l6")
                                                  for domain in ("news", "captions", "forums", "glosses", "social")])
def test_every_cells_first_draws_re_derive(pairing: str, domain: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """All ten (pairing, domain) cells: split seed 0 of every arm and size, and the first coverage draw of every
    design and size, as stored."""
    from research.experiments.distill_suite import stored_runs

    (stored,) = stored_runs(RESULTS, [(pairing, "k3e")], [domain], required=True)
    run = Stored(stored)
    assert run.pool_change == pytest.approx(STORED["pool_change"][f"{pairing}/{domain}"], abs=1e-9)
    monkeypatch.setattr(chosen_labels, "SEEDS", 1)
    monkeypatch.setattr(chosen_labels, "COVERAGE_DRAWS", 1)
    here = [c for c in STORED["decisions"] if c["pairing"] == pairing and c["domain"] == domain and c["seed"] == 0]
    stored_cells = {(c["arm"], c["size"]): c for c in here}
    for cell in chosen_labels.decisions([run], STORED["share"], STORED["resamples"]):
        twin = stored_cells[(cell["arm"], cell["size"])]
        assert cell["used"] == twin["used"] and cell["raw"] == pytest.approx(twin["raw"], abs=1e-9)
    kept = {(c["design"], c["size"]): c for c in STORED["coverage"] if c["pairing"] == pairing
            and c["domain"] == domain and c["seed"] == 0}
    for cell in chosen_labels.coverage([run], STORED["share"], STORED["resamples"]):
        twin = kept[(cell["design"], cell["size"])]
        assert cell["covered"] == twin["covered"] and cell["low"] == pytest.approx(twin["low"], abs=1e-9)


def figures() -> dict[str, str]:
    return chosen_labels.quoted(STORED)


def test_the_readme_and_the_decision_page_quote_the_stored_study() -> None:
    quoted = figures()
    # re-run at issue 83's defaults: each `decide` is the first look of the label-more loop
    assert quoted == {"after": "0.69-0.88×", "before": "0.85-1.04×", "coverage": "94.7-98.9 %", "saved": "12-31 %",
                      "size": "100", "chosen": "55 % (chosen)", "random": "54 % (random)", "gain": "+1.0"}
    # the README leads with the label-more loop (research/experiments/readme_figures.label_loop) and sends the reader
    # here for what choosing pairs buys
    decision = " ".join((REPO / "docs" / "decision.md").read_text(encoding="utf-8").split())
    for key in ("after", "before", "coverage", "chosen", "random"):
        assert quoted[key] in decision, key
    assert quoted["saved"] in decision
    page = (REPO / "docs" / "decision.md").read_text(encoding="utf-8")
    findings = (REPO / "research" / "findings.md").read_text(encoding="utf-8")
    assert all(line in page and line in findings for line in lines(STORED) if line)


def reading_figures(result: dict[str, Any]) -> list[str]:
    """The figures of research/findings.md's reading of the study, from the stored cells."""
    power = {(row["arm"], row["size"]): row for row in power_rows(result)}
    oracle = {(row["arm"], row["size"]): row for row in chosen_labels.pool_oracle_rows(result)}
    gaining = {arm: power[(arm, 200)]["gaining"] for arm in ("after", "random after")}  # the same model decided on
    return [f"used {100 * power[('after', 100)]['power']:.0f} % of the gaining cells (false use "
            f"{100 * power[('after', 100)]['false_use']:.0f} %), at 200 {100 * power[('after', 200)]['power']:.0f} % "
            f"(false use {100 * power[('after', 200)]['false_use']:.0f} %)",
            f"({gaining['after']} gaining cells at 200 chosen labels against {gaining['random after']} for random ones)",
            f"power {100 * oracle[('after', 100)]['power']:.0f} % / {100 * oracle[('random after', 100)]['power']:.0f} "
            f"% at 100 labels and {100 * oracle[('after', 200)]['power']:.0f} % / "
            f"{100 * oracle[('random after', 200)]['power']:.0f} % at 200",
            f"used {100 * power[('random after', 100)]['power']:.0f} % / {100 * power[('random after', 200)]['power']:.0f}"
            f" % of the gaining cells at 100 / 200 (random labels in the run's own dev flow: "
            f"{100 * power[('random', 100)]['power']:.0f} % / {100 * power[('random', 200)]['power']:.0f} %)"]


def test_the_findings_reading_quotes_the_stored_cells() -> None:
    findings = " ".join((REPO / "research" / "findings.md").read_text(encoding="utf-8").split())
    for figure in [*reading_figures(STORED), figures()["after"], figures()["before"], figures()["coverage"]]:
        assert figure in findings, figure


def test_coverage_and_error_cells_are_what_the_tables_summarise() -> None:
    assert len(STORED["coverage"]) == 10 * 3 * 3 * STORED["coverage_draws"]
    assert len(STORED["decisions"]) == 10 * 3 * STORED["seeds"] * 4
    rows = coverage_rows(STORED)
    assert all(0.93 <= row["coverage"] <= 1.0 for row in rows)  # the coverage target holds everywhere
    # every stored draw's flag is what its interval says of its pool Δ, and each row counts its own draws
    truth = STORED["pool_change"]
    assert all(c["covered"] == (c["low"] <= truth[f"{c['pairing']}/{c['domain']}"] <= c["high"])
               for c in STORED["coverage"])
    for row in rows:
        drawn = [c for c in STORED["coverage"] if c["design"] == row["design"] and c["size"] == row["size"]]
        assert len(drawn) == 10 * STORED["coverage_draws"]
        assert row["coverage"] == sum(c["covered"] for c in drawn) / len(drawn)
