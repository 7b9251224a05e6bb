"""A faster teacher run (issue 60): the rule that decides whether the two levers become the teacher-run default,
applied in code to the suite's studies (research/findings.md, "A faster teacher run").

    python -m research.experiments.distill_suite --train --variant k3f --pairs l3-l6,l6-mpnet \\
        --extra=--set --extra=views=none,feature-cutoff --extra=--mixed-precision --extra=auto
    python -m research.experiments.distill_suite --variant k3f --pairs l3-l6,l6-mpnet --store-from runs/distill \\
        --work research/results/distill
    python -m research.experiments.distill_suite --study --variant k3f --work research/results/distill
    python -m research.experiments.teacher_speed --work research/results/distill      # the verdict

The levers: ConSERT's views `none,feature-cutoff`, whose `none` view is the student's encoding and so serves the
distillation term (two encoder passes per step instead of three), and `mixed_precision: auto` (bf16 autocast on a
CPU with native bf16 matmuls; the suite's machine has AVX-512 BF16, so its runs trained in bf16). Both together
(k3f) fell: not adopted. bf16 alone (`--candidate k3bf`, its rule written before its runs) held in all 8 cells: a
ConSERT teacher run's default since (ConsertRecipe.spec.teacher_defaults; research/tests/test_teacher_defaults.py).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from research.experiments.distill_suite import PAIRINGS, domain_raw, study_path
from research.experiments.domain_data import DOMAINS

INCUMBENT = "k3"  # today's teacher-run defaults
CANDIDATE = "k3f"  # the same with both levers
MARGIN = 0.10  # issue 60: a domain's raw Δ may fall by at most this much (points of Spearman × 100)


def verdict(work: Path, incumbent: str = INCUMBENT, candidate: str = CANDIDATE) -> dict[str, Any]:
    """Per pairing and domain, the mean raw test Δ over the 5 split seeds at 200 dev pairs (distill_suite.domain_raw)
    of both variants; the candidate is adopted iff it is within MARGIN of the incumbent (or above it) in every one of
    the 2 × 4 cells. A missing study or cell is not adopted."""
    cells: list[dict[str, Any]] = []
    studies = {}
    for variant in (incumbent, candidate):
        path = study_path(work, variant)
        studies[variant] = json.loads(path.read_text())["cells"] if path.is_file() else []
    for pairing in PAIRINGS:
        for domain in DOMAINS:
            old, new = (domain_raw(studies[variant], pairing, domain) for variant in (incumbent, candidate))
            held = not math.isnan(old) and not math.isnan(new) and new >= old - MARGIN
            cells.append({"pairing": pairing, "domain": domain, incumbent: old, candidate: new, "held": held})
    return {"cells": cells, "adopt": all(cell["held"] for cell in cells)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("research/results/distill"))
    parser.add_argument("--incumbent", default=INCUMBENT, help="the variant the candidate must hold against")
    parser.add_argument("--candidate", default=CANDIDATE)
    args = parser.parse_args()
    result = verdict(args.work, incumbent=args.incumbent, candidate=args.candidate)
    for cell in result["cells"]:
        print(f"{cell['pairing']:9} {cell['domain']:9} {args.incumbent} {cell[args.incumbent]:+.2f}  "
              f"{args.candidate} {cell[args.candidate]:+.2f}  {'held' if cell['held'] else 'FELL'}")
    print(f"adopt {args.candidate}: {'yes' if result['adopt'] else 'no'}")


if __name__ == "__main__":
    main()
