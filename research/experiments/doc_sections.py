"""Commands recorded before bench/ split in two, or before experiments/ moved under research/, in today's form. (The generated sections of a document that the
suites write are tools/doc_sections.py, shared with bench/.)"""

from __future__ import annotations

import re

# the scripts that left bench/ for research/experiments/ when bench/ split in two (the rest stayed in bench/)
MOVED_TO_EXPERIMENTS = frozenset({
    "decision_runs", "decision_study", "doc_sections", "domain_data", "domain_render", "domain_suite", "levers_table",
    "make_eval_tasks", "results_render", "results_suite", "split_pairs"})


def current_command(command: str) -> str:
    """`command` in today's form: results.json files written before the split hold `python bench/NAME.py ...`,
    which no longer runs (the scripts import each other as packages); re-rendering them prints `python -m`. Those
    written before the research wing (issue 59) hold `python -m experiments.NAME`, now `research.experiments.NAME`."""
    def module(match: re.Match[str]) -> str:
        package = "research.experiments" if match[1] in MOVED_TO_EXPERIMENTS else "bench"
        return f"python -m {package}.{match[1]}"

    command = re.sub(r"\bpython bench/(\w+)\.py\b", module, command)
    return re.sub(r"(?<![\w.])experiments\.(?=\w)", "research.experiments.", command)
