"""Which generated sections of research/results.md regenerate from tracked per-pair outputs, and which are records of runs
that were not kept (issue 41, item 6). `python -m research.experiments.sections` writes the index into research/results.md; a test
fails when a section is in neither list, so a new study must say which it is."""

from __future__ import annotations

import re
from pathlib import Path

from tools.doc_sections import write_section

SECTION = "sections"
DOC = Path("research/results.md")
# section → (the tracked outputs it regenerates from, the command that redraws it without training)
REDERIVABLE: dict[str, tuple[str, str]] = {
    "suite": ("research/results/suite/", "python -m research.experiments.suite_stored --render"),
    "eval-tasks": ("research/results/eval-tasks/", "python -m research.experiments.eval_tasks_stored --render"),
    "domain-suite": ("research/results/decision/", "python -m research.experiments.domain_stored --render"),
    "domain-suite-auto": ("research/results/decision/", "python -m research.experiments.domain_stored --render"),
    "grouping": ("research/results/grouping/, research/results/decision/", "python -m research.experiments.grouping_suite --render"),
    "decision-study": ("research/results/decision/", "python -m research.experiments.decision_study --render"),
    "lora": ("research/results/lora/, research/results/decision/", "python -m research.experiments.lora_suite --render"),
    "distillation": ("research/results/distill/", "python -m research.experiments.teacher_evidence --render"),
    "teacher-evidence": ("research/results/distill/", "python -m research.experiments.teacher_evidence --render"),
    "sizes": ("research/results/sizes/", "python -m research.experiments.sizes_suite --study --render research/results.md"),
    "distillation-social": ("research/results/distill/", "python -m research.experiments.teacher_evidence --render"),
    "distillation-variants": ("research/results/distill/", "python -m research.experiments.distill_variants --render"),
}
# section → why it is a record only (none today: a study whose runs were not kept has no section in results.md)
RECORDS: dict[str, str] = {}


def generated_sections(text: str) -> list[str]:
    """The names of the generated sections in a document, in order (the index itself left out)."""
    return [name for name in re.findall(r"<!-- generated: ([\w-]+) -->", text) if name != SECTION]


def render() -> str:
    lines = ["**Which figures regenerate.** The sections below regenerate without training from per-unit outputs "
             "tracked in `results/` (each evaluated step's cosine of every scored pair, each query's metric values); "
             "a test fails when one is "
             "stale (`python -m research.experiments.sections` rewrites this index, and a test fails when a generated "
             "section is in neither list):", "",
             "| section | tracked outputs | redraw |", "|---|---|---|"]
    lines += [f"| {name} | `{outputs}` | `{command}` |" for name, (outputs, command) in REDERIVABLE.items()]
    if RECORDS:
        lines += ["", "Records (their runs were not kept, so they do not regenerate):", ""]
        lines += [f"- `{name}`: {why}" for name, why in RECORDS.items()]
    else:
        lines += ["", "Every section regenerates: outside the generated sections this page holds no figure (a test). "
                  "Records of studies whose runs were not kept are in [findings.md](findings.md)."]
    return "\n".join(lines)


def main() -> None:
    write_section(Path(__file__).resolve().parents[2] / DOC, SECTION, render())
    print(f"wrote the index into {DOC}")


if __name__ == "__main__":
    main()
