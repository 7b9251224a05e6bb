"""research/results.md says which generated sections regenerate from tracked outputs and which are records
(research/experiments/sections.py, issue 41 item 6): a section in neither list, or a stale index, fails here."""

from __future__ import annotations

from pathlib import Path

from tools.doc_sections import wrap

from research.experiments import sections

REPO = Path(__file__).resolve().parents[2]


def test_every_generated_section_is_either_rederivable_or_a_named_record() -> None:
    found = sections.generated_sections((REPO / sections.DOC).read_text(encoding="utf-8"))
    assert sorted(found) == sorted([*sections.REDERIVABLE, *sections.RECORDS])
    assert not set(sections.REDERIVABLE) & set(sections.RECORDS)


def test_the_index_in_results_md_is_what_the_registry_renders() -> None:
    assert wrap(sections.SECTION, sections.render()) in (REPO / sections.DOC).read_text(encoding="utf-8")


def test_a_section_in_neither_list_is_seen() -> None:
    text = "<!-- generated: sections -->x<!-- end generated: sections -->\n<!-- generated: new-study -->"
    assert sections.generated_sections(text) == ["new-study"]


def outside_sections(text: str) -> str:
    """The text of a document with every generated section (markers included) removed."""
    import re

    return re.sub(r"<!-- generated: ([\w-]+) -->.*?<!-- end generated: \1 -->", "", text, flags=re.DOTALL)


def test_results_md_holds_no_figure_outside_its_generated_sections() -> None:
    """Every figure of results.md regenerates: the hand-written rest (title, intro, the GPU pointer) has no table and
    no decimal number."""
    import re

    rest = outside_sections((REPO / sections.DOC).read_text(encoding="utf-8"))
    assert [line for line in rest.splitlines() if line.startswith("|")] == []
    assert re.findall(r"[+-]?\d+\.\d+", rest) == []


def test_a_figure_outside_the_sections_is_seen() -> None:
    text = "# R\n<!-- generated: a -->| 1.00 |<!-- end generated: a -->\nwe gained +0.94 here\n"
    assert outside_sections(text) == "# R\n\nwe gained +0.94 here\n"
