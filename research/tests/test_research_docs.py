"""The research wing's write-ups link to files and headings that exist (as tests/test_docs.py checks the user docs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_docs import broken_links

RESEARCH = Path(__file__).resolve().parents[1]
PAGES = [*sorted(RESEARCH.glob("*.md")), RESEARCH / "experiments" / "README.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(RESEARCH)))
def test_every_relative_link_in_the_research_write_ups_resolves(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(RESEARCH)}: {broken}"
