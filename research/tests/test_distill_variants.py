"""research/results.md's `distillation-variants` section is what research/experiments/distill_variants.py renders from the stored
test studies (issue 41, item 6): a stale copy fails here."""

from __future__ import annotations

import re
from pathlib import Path

from research.experiments import distill_variants

REPO = Path(__file__).resolve().parents[2]


def test_the_variants_section_is_what_the_stored_studies_render() -> None:
    text = (REPO / "research" / "results.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- generated: distillation-variants -->\n## Every teacher-run variant on test\n\n(.*?)\n"
                      r"<!-- end generated: distillation-variants -->", text, re.DOTALL)
    assert found is not None
    assert found.group(1) == distill_variants.render(REPO / "research" / "results" / "distill"), (
        f"stale: {distill_variants.COMMAND}")


def test_every_variant_is_listed_and_a_target_met_is_bold() -> None:
    found = distill_variants.studies(REPO / "research" / "results" / "distill")
    assert list(found) == list(distill_variants.VARIANTS)  # a study for every variant the table describes
    rows = distill_variants.pairing_table({"k3": found["k3"]}, "l6-mpnet")
    assert rows[2].startswith("| k3 | the teacher-run defaults") and "| +3.43 | -0.71 |" in rows[2]
    assert rows[-1] == "| target | issue 41 | ≥ +3.98 | ≥ +0.57 |  |  | ≥ +1.50 | ≥ +1.40 | ≥ +1.60 |"
    assert distill_variants._cell(1.5, 1.5) == "**+1.50**" and distill_variants._cell(1.49, 1.5) == "+1.49"
