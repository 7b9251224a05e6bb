"""The README is a front page (short, with the command line CI runs) and every relative link in it and in docs/
leads to a file that exists, and to a heading that exists when it names one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
README = REPOSITORY / "README.md"
PAGES = [README, *sorted((REPOSITORY / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def test_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 180, "README.md is the front page: move the detail into docs/"
    assert "make test" in text  # the command CI runs
    for section in ("## Install", "## The two commands", "## Python API", "## What to expect", "## Documentation"):
        assert f"\n{section}\n" in text


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, -, _ and spaces kept),
    spaces → hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE):
        name, number = slug(heading), 1
        while name in found:  # a repeated heading gets -1, -2, ...
            name = f"{slug(heading)}-{number}"
            number += 1
        found.add(name)
    return found


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def broken_links(page: Path) -> list[str]:
    """The page's relative links whose file, or whose heading in that file, does not exist."""
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(REPOSITORY)}: {broken}"


def test_slugs_are_githubs() -> None:
    assert slug("`sentadapt adapt --recipe auto`") == "sentadapt-adapt---recipe-auto"
    assert slug("Big bases on modest hardware: `--lora`") == "big-bases-on-modest-hardware---lora"
    assert slug("`sentadapt pairs` — propose pairs") == "sentadapt-pairs--propose-pairs"


API_CALL = re.compile(r"^- `(adapt|evaluate|export|diagnose|propose_pairs|decide_again)\((.*?)\)`\s*→",
                      re.DOTALL | re.MULTILINE)


def _documented_defaults(text: str) -> dict[str, dict[str, object]]:
    """docs/usage.md's list of the calls: each call's `keyword=literal` defaults as the page writes them."""
    import ast

    calls: dict[str, dict[str, object]] = {}
    for name, arguments in API_CALL.findall(text):
        defaults = calls.setdefault(name, {})
        for keyword, value in re.findall(r"(\w+)=([^,]+)", " ".join(arguments.split())):
            try:
                defaults[keyword] = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError):
                continue  # a name (DEFAULT_BASE_MODEL), not a value
    return calls


def test_the_api_defaults_in_the_usage_page_are_the_calls_defaults() -> None:
    """The usage page once said risk=0.2 after the default became 0.1: each default it writes is the call's."""
    import inspect

    import sentadapt

    calls = _documented_defaults((REPOSITORY / "docs" / "usage.md").read_text(encoding="utf-8"))
    assert set(calls) == {"adapt", "evaluate", "export", "diagnose", "propose_pairs", "decide_again"}
    wrong = {f"{name}({keyword}={value!r}): the call's default is {parameter.default!r}"
             for name, defaults in calls.items() for keyword, value in defaults.items()
             for parameter in [inspect.signature(getattr(sentadapt, name)).parameters[keyword]]
             if parameter.default != value and not (value == () and parameter.default in ((), None, []))}
    assert not wrong


def test_the_default_reader_takes_literals_and_skips_names() -> None:
    text = "- `adapt(corpus, *, risk=0.1, model=DEFAULT_BASE_MODEL,\n  seed=0, sts=None, ...)` → `AdaptResult`\n"
    assert _documented_defaults(text) == {"adapt": {"risk": 0.1, "seed": 0, "sts": None}}
