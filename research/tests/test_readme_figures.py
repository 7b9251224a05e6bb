"""README.md's figures (issue 59, item 7): each passage recomputed from the stored outputs is in the README word for
word, every number of its prose and tables lies inside one, and a mutation of any of them is caught."""

from __future__ import annotations

import re

from research.experiments.readme_figures import REPO, flat, numbers_outside, passages

README = (REPO / "README.md").read_text(encoding="utf-8")
PASSAGES = passages()


def problems(text: str) -> list[str]:
    missing = [f"missing: {passage}" for passage in PASSAGES if flat(passage) not in flat(text)]
    return missing + [f"not recomputed by any test: …{number}…" for number in numbers_outside(text, PASSAGES)]


def test_the_readme_quotes_every_recomputed_passage_and_nothing_else() -> None:
    assert problems(README) == []


def numbers(text: str) -> list[re.Match[str]]:
    """README's numbers outside code blocks, inline code and link targets: what a reader takes for a figure."""
    code = [(m.start(), m.end()) for m in re.finditer(r"```.*?```|`[^`\n]*`|\]\([^)\n]*\)", text, flags=re.S)]
    return [m for m in re.finditer(r"\d+", text) if not any(a <= m.start() < b for a, b in code)
            and not re.match(r"[A-Za-z]", text[m.start() - 1])]  # L6, v2, STS14: names, not figures


def test_changing_any_number_of_the_readme_is_caught() -> None:
    found = numbers(README)
    assert len(found) > 80
    for match in found:
        digit = match.group()[-1]
        mutated = README[:match.end() - 1] + ("1" if digit != "1" else "2") + README[match.end():]
        assert problems(mutated), f"changing {match.group()!r} near {README[match.start() - 30:match.end() + 10]!r}"
