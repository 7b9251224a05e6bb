"""Generated sections of a markdown document, replaced one at a time.

A benchmark that regenerates only its own part of a document (research/results.md's eval-tasks job and domain suite,
bench/README.md's `bench_gpu --quick`) writes between two HTML comments, so the other sections (hours of CPU to
regenerate) stay as their own runs wrote them. A section seen for the first time goes before `## GPU` (the doc's
footer) or, failing that, at the end. Here, not in bench/ or research/experiments/, because both write sections.
"""

from __future__ import annotations

import re
from pathlib import Path

FOOTER_HEADING = "## GPU"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"


def wrap(name: str, body: str) -> str:
    begin, end = markers(name)
    return f"{begin}\n{body.strip()}\n{end}"


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with section `name` set to `body` (replaced between its markers, or inserted)."""
    begin, end = markers(name)
    block = wrap(name, body)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    footer = text.find(f"\n{FOOTER_HEADING}")
    if footer >= 0:
        return text[:footer].rstrip("\n") + "\n\n" + block + "\n" + text[footer:]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` through a temporary file renamed over it: a reader never sees half a file."""
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_section(path: Path, name: str, body: str) -> None:
    """Replace one section of the file at `path` (created if missing), written atomically."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    write_atomically(path, replace_section(text, name, body))
