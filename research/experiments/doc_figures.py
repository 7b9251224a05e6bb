"""Every figure the user docs quote, recomputed (issue 59, item 7): README.md and the docs/ pages in DOCUMENTS.

    python -m research.experiments.doc_figures             # each covered page's passages, recomputed
    python -m research.experiments.doc_figures --report    # per user page: its numbers, and how many no passage covers

A page's passages are the phrases it must hold word for word (whitespace aside), each with its figures recomputed from
research/results/ (per-pair outputs and the studies derived from them), the example data or the product's constants.
research/tests/test_doc_figures.py checks, for every page in DOCUMENTS, that the page holds each passage and that every
number of its prose and tables lies inside a passage or a definition (a number that defines rather than measures,
with the words that make it one): editing any figure of a covered page fails that test. Code blocks, inline code
and link targets are not figures.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from research.experiments import readme_figures
from research.experiments.readme_figures import REPO, RESULTS, flat, numbers_outside

# the pages a user reads (docs/options.md is generated from the code, and tests/test_options_doc.py fails on any
# edit of it; architecture, internals and development are the maintainers' pages)
USER_PAGES = ("README.md", "docs/usage.md", "docs/recipes.md", "docs/teacher.md", "docs/decision.md",
              "docs/evaluation.md", "docs/diagnostics.md", "docs/sizes.md", "docs/reliability.md", "docs/cluster.md")


@dataclass(frozen=True)
class Page:
    path: str
    passages: Callable[[], list[str]]
    definitions: tuple[str, ...] = ()


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _signed(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")


def sizes_passages() -> list[str]:
    """docs/sizes.md: storage arithmetic, the product's constants, and the sizes study's means
    (research/results/sizes/study.json, which research/tests/test_sizes_suite.py re-derives from the stored cosines)."""
    from sentadapt.config import RunConfig
    from sentadapt.evaluation.bootstrap import CONFIDENCE
    from sentadapt.evaluation.evaluate import CALIBRATION_LIMIT
    from sentadapt.evaluation.forms import PRECISIONS
    from sentadapt.recipes.base import Matryoshka

    from research.experiments.sizes_suite import DOMAINS, SIZES, WEIGHTED_SMALL_SIZES, forms, seed_delta

    study = _json(RESULTS / "sizes" / "study.json")
    cells = study["cells"]
    largest, smallest = SIZES[0], SIZES[-1]
    stored = 100_000_000  # 100 M vectors: GB = 1e8 × bytes a vector / 1e9

    def gigabytes(bytes_a_vector: float) -> str:
        return f"{stored * bytes_a_vector / 1e9:.3g}"  # 153.6 → 154, 9.6, 1.2

    weights = Matryoshka.of(SIZES, ()).weights

    def news_cost(runs: tuple[tuple[str, str], ...]) -> str:
        costs = [seed_delta(cells, alone, "384 fp32", "news") - seed_delta(cells, full, "384 fp32", "news")  # type: ignore[operator]
                 for full, alone in runs]
        return f"{min(costs):.2f}–{max(costs):.2f}"

    equal = news_cost((("teacher-m", "teacher"), ("teacher-m-s1", "teacher-s1")))
    weighted = news_cost((("teacher-mw", "teacher"), ("teacher-mw-s1", "teacher-s1")))
    labels = [form.label(largest) for form in forms() if form.label(largest) not in ("192 binary", "96 binary")]
    by_label = {form.label(largest): form for form in forms()}
    rows = [f"| with the teacher | {' | '.join(labels)} |",
            "| bytes a vector | " + " | ".join(f"{by_label[label].bytes_per_vector(largest):g}" for label in labels)
            + " |"]
    for variant, name in (("teacher", "without `--matryoshka`"),
                          ("teacher-mw", f"`--matryoshka {','.join(map(str, SIZES))}` (weights "
                                         f"{','.join(f'{w:g}' for w in weights)}, the default)"),
                          ("teacher-m", f"`--matryoshka {','.join(map(str, SIZES))}`, `matryoshka_weights=1,1,1`")):
        chosen = [c for c in cells if c["variant"] == variant]
        rows.append(f"| {name} | " + " | ".join(
            _signed(sum(c["test_delta"][label] for c in chosen) / len(chosen)) for label in labels) + " |")

    costs = {(domain, run): seed_delta(cells, alone, "384 fp32", domain) - seed_delta(cells, run, "384 fp32", domain)  # type: ignore[operator]
             for domain in DOMAINS for run, alone in (("teacher-mw", "teacher"), ("teacher-mw-s1", "teacher-s1"))
             if seed_delta(cells, run, "384 fp32", domain) is not None}
    worst_domain, _ = max(costs, key=lambda key: costs[key])

    def plain_cost(variant: str, domain: str | None) -> float:
        domains = DOMAINS if domain is None else [domain]
        return sum(seed_delta(cells, "plain", "384 fp32", d) - seed_delta(cells, variant, "384 fp32", d)  # type: ignore[operator]
                   for d in domains) / len(domains)

    forms_tested = len(SIZES) * len(PRECISIONS)
    words = {2: "two"}
    return [
        f"{stored // 1_000_000} M vectors of {largest} float32 values are {gigabytes(4 * largest)} GB, of {smallest} "
        f"int8 values {gigabytes(smallest)} GB, of {smallest} bits {gigabytes(smallest / 8)} GB",
        f"The weights default to {weights[0]:g} for the largest size and {weights[1]:g} for each other",
        f"with equal weights the full size lost {equal} on news against a run without Matryoshka ({words[2]} training "
        f"seeds); with the largest weighted twice it lost {weighted} there ({words[2]} seeds)",
        f"every row with its {100 * CONFIDENCE:.0f} % CI",
        f"first {CALIBRATION_LIMIT:,} distinct lines",
        f"at most the run's `--risk` ({_default(RunConfig, 'risk'):.2f} by default)",
        f"though {forms_tested} forms are tested",
        f"with the all-mpnet-base-v2 teacher and without, at {'/'.join(map(str, SIZES))} × fp32/int8/binary, on "
        f"re-drawn test splits ({study['seeds']} seeds)",
        *rows,
        f"at full size it costs at most {max(costs.values()):.2f} in any suite domain ({worst_domain}, over "
        f"{words[2]} training seeds) with the default weights, and its {WEIGHTED_SMALL_SIZES[0].split()[0]}-dim prefix "
        f"scores at least the base's {largest} dims",
        f"teacher it cost {plain_cost('plain-m', None):.2f} at full size on average ({plain_cost('plain-m', 'news'):.2f} "
        f"on news; {plain_cost('plain-mw', None):.2f} and {plain_cost('plain-mw', 'news'):.2f} with the default "
        f"weights {','.join(f'{w:g}' for w in weights)})",
        f"Δ against the base's {largest} fp32",
        *_asserted_tolerance("tests/evaluation/test_forms.py", "atol=1e-6",
                             "equal those computed from sentence-transformers' codes to 1e-6"),
    ]


def _default(config: type, name: str) -> Any:
    """A dataclass field's default, without building the class (RunConfig has required fields)."""
    import dataclasses

    return next(field.default for field in dataclasses.fields(config) if field.name == name)


def _asserted_tolerance(test_file: str, assertion: str, passage: str) -> list[str]:
    """A tolerance the page says a test holds: the passage only while that test still asserts it."""
    return [passage] if assertion in (REPO / test_file).read_text(encoding="utf-8") else []


SIZES_DEFINITIONS = (
    "in 255 steps, floor((v − min) / step) − 128",  # int8 as sentence-transformers' quantize_embeddings defines it
    "the bits v > 0, 8 a byte; scored as 1 − 2·Hamming/d, the cosine of the ±1 vectors",
    "Sizes must be multiples of 8", "(sizes divisible by 8)",
    "a Dense layer of weight [I_N | 0]", "Its products are x · 1", "the trailing coordinates are set to 0",
    "when its dev Δ ≥ 0",
)

PAGES = {page.path: page for page in (
    Page("README.md", readme_figures.passages, readme_figures.DEFINITIONS),
    Page("docs/sizes.md", sizes_passages, SIZES_DEFINITIONS),
)}


def text_of(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


def problems(page: Page, text: str, passages: list[str]) -> list[str]:
    """What the page lacks (a recomputed passage) or holds unchecked (a number no passage or definition covers)."""
    missing = [f"missing: {passage}" for passage in passages if flat(passage) not in flat(text)]
    loose = numbers_outside(text, [*passages, *page.definitions])
    return missing + [f"not recomputed by any test: …{number}…" for number in loose]


def figures(text: str) -> list[re.Match[str]]:
    """The page's numbers outside code blocks, inline code and link targets, as a reader takes them for figures (a
    digit after a letter is part of a name: L6, v2, STS14)."""
    code = [(m.start(), m.end()) for m in re.finditer(r"```.*?```|`[^`\n]*`|\]\([^)\n]*\)", text, flags=re.S)]
    return [m for m in re.finditer(r"\d+", text) if not any(a <= m.start() < b for a, b in code)
            and not re.match(r"[A-Za-z]", text[m.start() - 1])]


def report() -> list[str]:
    lines = ["| page | numbers | not covered |", "|---|---:|---:|"]
    for path in USER_PAGES:
        text = text_of(path)
        page = PAGES.get(path)
        covered = page.passages() if page else []
        loose = numbers_outside(text, [*covered, *(page.definitions if page else ())])
        lines.append(f"| {path} | {len(numbers_outside(text, []))} | {len(loose)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true", help="per user page: its numbers and the uncovered ones")
    args = parser.parse_args()
    if args.report:
        print("\n".join(report()))
        return
    for page in PAGES.values():
        print(f"## {page.path}")
        for passage in page.passages():
            print(passage)


if __name__ == "__main__":
    main()
