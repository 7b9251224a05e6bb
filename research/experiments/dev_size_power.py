"""How many dev pairs a teacher run's decision needs: the default decision (the product's rule and limit, the first
look of the label-more loop, best of the run's evaluations paid for; the file records them) applied to dev sets of
50-400 pairs drawn from the stored runs of the three pairings, and what it hands the user at each size.
Exploratory: it chooses no default, it says what labelling buys.

    python -m research.experiments.dev_size_power --study   # research/results/distill → research/results/distill/dev-size-power.json (~1 min)
    python -m research.experiments.dev_size_power           # prints the table from the stored file

Cells: the stored pairings (l6-mpnet and l3-l6 from k3e, l3-mpnet from k3) × the four earlier domains (social's pool
of 500 pairs cannot spare 400 and keep a test set) × 10 split seeds × each size, drawn by decision_study.draw as
every study draws them (test pairs from test.jsonl only), kept by distill_suite.kept_on_dev. Per size: false use
(the share of the cells with a raw test Δ below 0 that use the student), power (the share of those with a raw test
Δ ≥ +1.0 that use it) and the mean applied Δ (keep-base → 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from research.experiments.decision_study import draw, test_change
from research.experiments.dev_agreement import GAIN, STRESS_RUNS, figures
from research.experiments.distill_suite import DEV_200, DOMAINS, PATIENCE, kept_on_dev, stored_runs
from research.experiments.stored_runs import stored_study_main

RESULTS = Path("research/results/distill")
SIZES = (50, 100, 200, 300, 400)
SEEDS = 10


def study(results: Path, resamples: int) -> dict[str, Any]:
    from sentadapt.decision.rule import DecisionRule

    cells = []
    for stored in stored_runs(results, STRESS_RUNS, DOMAINS, required=True):
        run, pool = stored.run, stored.pool
        for size in SIZES:
            for seed in range(SEEDS):
                dev_rows, test = draw(pool, size, seed, stored.domain)
                kept = kept_on_dev(run, stored.teacher, pool, dev_rows, resamples, PATIENCE)
                cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": size, "seed": seed,
                              "step": kept.step, "used": kept.used(DecisionRule()),
                              "raw": test_change(pool, test[test >= DEV_200], run.base, run.steps[kept.step])})
        print(f"{stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    from research.experiments.study_settings import product_settings

    return {"settings": product_settings(), "sizes": list(SIZES), "seeds": SEEDS, "resamples": resamples,
            "cells": cells, "table": table(cells)}


def table(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for size in SIZES:
        chosen = [c for c in cells if c["size"] == size]
        weighed = figures(chosen, [c["used"] for c in chosen])
        rows.append({"size": size, "cells": len(chosen), "losing": sum(c["raw"] < 0 for c in chosen),
                     "gaining": sum(c["raw"] >= GAIN for c in chosen), "false_use": weighed["false_use"],
                     "power": weighed["power"], "applied": weighed["applied"],
                     "raw": float(np.mean([c["raw"] for c in chosen]))})
    return rows


def lines(result: dict[str, Any]) -> list[str]:
    out = ["| dev pairs | cells | losing | gaining ≥ +1.0 | false use | power | mean raw Δ | mean applied Δ |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["table"]:
        out.append(f"| {row['size']} | {row['cells']} | {row['losing']} | {row['gaining']} | "
                   f"{100 * row['false_use']:.0f} % | {100 * row['power']:.0f} % | {row['raw']:+.2f} | "
                   f"{row['applied']:+.2f} |")
    return out


def main() -> None:
    stored_study_main(__doc__, RESULTS, "dev-size-power.json", lambda args: study(args.results, args.resamples),
                      lines)


if __name__ == "__main__":
    main()
