"""The default risk limit with the calibrated risk (issue 68), by the rule written before it ran: research/findings.md,
"Calibrated intervals and risk (issue 68)", "The default risk limit".

    python -m research.experiments.risk_limit --study   # → research/results/calibration/risk-limit.json (~10 min)
    python -m research.experiments.risk_limit           # prints the tables from the stored file

The chosen-labels decision study's cells (research/experiments/chosen_labels.py: ten stored teacher runs, n = 50,
100, 200, split seeds 0-19, the arms random, before, after and random after), decided by the product as it is now
(the calibrated SE in a studentised max-T), each cell stored with what every limit needs: the decision's risk,
whether its dev Δ is positive, whether the teacher check stopped the run, and the Δ over the whole pool of the model
it would use — the truth the study is judged by.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path("research/results/calibration")
STUDY = "risk-limit.json"
LIMITS = (0.05, 0.10, 0.15, 0.20)
FALSE_USE = 0.05  # the rule's bound, in every (arm, size) row
GAIN = 1.0  # a gain worth using: pool Δ ≥ +1.0 (Spearman × 100)


def study(resamples: int) -> dict[str, Any]:
    from sentadapt.pairs.design import UNIFORM_SHARE

    from research.experiments.chosen_labels import (
        ARMS,
        RUNS,
        SEEDS,
        SIZES,
        Stored,
        arm_rows,
        last_evidence,
        spearman_change,
    )
    from research.experiments.distill_suite import PATIENCE, kept_on_dev, stored_runs
    from research.experiments.domain_data import ALL_DOMAINS

    runs = [Stored(s) for s in stored_runs(Path("research/results/distill"), RUNS, ALL_DOMAINS, required=True)]
    cells = []
    for stored in runs:
        pool, run = stored.pool, stored.run
        everything = np.arange(len(pool))
        truth = {step: spearman_change(pool, everything, None, run.base, cosines) for step, cosines in run.steps.items()}
        for size in SIZES:
            for seed in range(SEEDS):
                for arm in ARMS:
                    rows, weights = arm_rows(stored, arm, size, seed, UNIFORM_SHARE)
                    if arm in ("random", "before"):
                        kept = kept_on_dev(run, stored.teacher, pool, rows, resamples, PATIENCE, weights)
                        step, change, evidence, stopped = kept.step, kept.delta.value, kept.evidence, kept.stopped
                    else:
                        delta, evidence = last_evidence(stored, rows, weights, resamples)
                        step, change, stopped = max(run.steps), delta.value, False
                    cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": size, "seed": seed,
                                  "arm": arm, "step": step, "dev_change": change, "stopped": stopped,
                                  "risk": None if evidence is None else evidence.risk, "pool_change": truth[step]})
        print(f"risk limit {stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    return {"limits": list(LIMITS), "sizes": list(SIZES), "seeds": SEEDS, "resamples": resamples, "cells": cells}


def used(cell: dict[str, Any], limit: float) -> bool:
    """The risk rule at `limit`: a positive dev Δ whose risk is at most the limit, in a run the teacher did not stop."""
    return (not cell["stopped"] and cell["dev_change"] > 0 and cell["risk"] is not None
            and cell["risk"] <= limit)


def table(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per limit, arm and size: false use (pool Δ < 0, used) and power (pool Δ ≥ +1.0, used)."""
    rows = []
    for limit in result["limits"]:
        for arm in ("random", "before", "after", "random after"):
            for size in result["sizes"]:
                cells = [c for c in result["cells"] if c["arm"] == arm and c["size"] == size]
                losing = [used(c, limit) for c in cells if c["pool_change"] < 0]
                gaining = [used(c, limit) for c in cells if c["pool_change"] >= GAIN]
                rows.append({"limit": limit, "arm": arm, "size": size, "losing": len(losing),
                             "gaining": len(gaining), "false_use": float(np.mean(losing)) if losing else 0.0,
                             "power": float(np.mean(gaining)) if gaining else 0.0})
    return rows


def rule_limit(rows: list[dict[str, Any]]) -> float:
    """The largest limit whose false use is ≤ 5 % in every (arm, size) row (the smallest limit when none is)."""
    passing = [limit for limit in LIMITS if all(row["false_use"] <= FALSE_USE for row in rows if row["limit"] == limit)]
    return max(passing) if passing else min(LIMITS)


def lines(result: dict[str, Any]) -> list[str]:
    rows = table(result)
    out = [f"The rule's limit: {rule_limit(rows):g}", "",
           "| limit | labels | arm | losing | gaining ≥ +1.0 | false use | power |", "|---:|---:|---|---:|---:|---:|---:|"]
    for row in rows:
        out.append(f"| {row['limit']:.2f} | {row['size']} | {row['arm']} | {row['losing']} | {row['gaining']} | "
                   f"{100 * row['false_use']:.0f} % | {100 * row['power']:.0f} % |")
    return out


def main() -> None:
    from research.experiments.stored_runs import stored_study_main

    stored_study_main(__doc__, RESULTS, STUDY, lambda args: study(args.resamples), lines)


if __name__ == "__main__":
    main()
