"""docs/results.md says which generated sections regenerate from tracked outputs and which are records
(experiments/sections.py, issue 41 item 6): a section in neither list, or a stale index, fails here."""

from __future__ import annotations

from pathlib import Path

from experiments import sections
from tools.doc_sections import wrap

REPO = Path(__file__).resolve().parents[1]


def test_every_generated_section_is_either_rederivable_or_a_named_record() -> None:
    found = sections.generated_sections((REPO / sections.DOC).read_text(encoding="utf-8"))
    assert sorted(found) == sorted([*sections.REDERIVABLE, *sections.RECORDS])
    assert not set(sections.REDERIVABLE) & set(sections.RECORDS)


def test_the_index_in_results_md_is_what_the_registry_renders() -> None:
    assert wrap(sections.SECTION, sections.render()) in (REPO / sections.DOC).read_text(encoding="utf-8")


def test_a_section_in_neither_list_is_seen() -> None:
    text = "<!-- generated: sections -->x<!-- end generated: sections -->\n<!-- generated: new-study -->"
    assert sections.generated_sections(text) == ["new-study"]
