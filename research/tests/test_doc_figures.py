"""The user docs' figures (issue 59, item 7): for every page research/experiments/doc_figures.py covers, each passage
recomputed from the stored outputs is on the page word for word, every number of its prose and tables lies inside one
(or inside a definition), and a mutation of any of them is caught."""

from __future__ import annotations

from functools import cache

import pytest

from research.experiments.doc_figures import PAGES, USER_PAGES, figures, problems, report, text_of


@cache
def recomputed(path: str) -> list[str]:
    return PAGES[path].passages()


@pytest.mark.parametrize("path", sorted(PAGES))
def test_the_page_quotes_every_recomputed_passage_and_no_number_outside_them(path: str) -> None:
    assert problems(PAGES[path], text_of(path), recomputed(path)) == []


@pytest.mark.parametrize("path", sorted(PAGES))
def test_changing_any_number_of_the_page_is_caught(path: str) -> None:
    text, page = text_of(path), PAGES[path]
    found = figures(text)
    assert len(found) > 20
    for match in found:
        digit = match.group()[-1]
        mutated = text[:match.end() - 1] + ("1" if digit != "1" else "2") + text[match.end():]
        assert problems(page, mutated, recomputed(path)), (
            f"{path}: changing {match.group()!r} near {text[match.start() - 30:match.end() + 10]!r}")


def test_an_uncovered_number_is_reported_with_its_words() -> None:
    page = PAGES["docs/sizes.md"]
    found = problems(page, text_of(page.path) + "\nIt runs 37 % faster.\n", recomputed(page.path))
    assert len(found) == 1 and found[0].startswith("not recomputed by any test: …") and "runs 37 % faster." in found[0]


def test_the_report_lists_every_user_page_and_the_covered_ones_as_complete() -> None:
    rows = {line.split(" | ")[0].strip("| "): line for line in report()[2:]}
    assert list(rows) == list(USER_PAGES) and set(PAGES) == set(USER_PAGES)  # every user page is covered
    assert all(rows[path].endswith("| 0 |") for path in PAGES)
