"""Stopping a run whose teacher trails on dev (`teacher_check`; the rule: research/findings.md, "Stopping a run whose
teacher trails on dev", committed before this study): what `on` (a run whose teacher's dev CI is below 0 ships
nothing) and `off` (the run trains and the default decision guards) hand the user, on dev sets large enough to
establish a trailing teacher.

    python -m research.experiments.teacher_check --study   # research/results/distill → research/results/distill/teacher-check.json (~1 min)
    python -m research.experiments.teacher_check           # prints the verdict and the table from the stored file

Cells: the stored pairings (dev_agreement.STRESS_RUNS) × the four earlier domains × 10 split seeds × 200 and 400 dev
pairs, and 600 for the domains whose pool holds at least 1,000 pairs; drawn by decision_study.draw (test pairs from
test.jsonl only), kept by distill_suite.kept_on_dev.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from research.experiments.decision_study import draw, test_change
from research.experiments.dev_agreement import FALSE_USE_LIMIT, STRESS_RUNS, figures
from research.experiments.distill_suite import DEV_200, DOMAINS, PATIENCE, kept_on_dev, stored_runs
from research.experiments.stored_runs import stored_study_main

RESULTS = Path("research/results/distill")
SIZES = (200, 400, 600)
LARGE_POOL = 1000  # 600 dev pairs only from pools at least this large (the rest keep a test set)
SEEDS = 10
MIN_STOPPED = 5


def sizes_for(pool_size: int) -> tuple[int, ...]:
    return SIZES if pool_size >= LARGE_POOL else SIZES[:2]


def study(results: Path, resamples: int) -> dict[str, Any]:
    from sentadapt.decision.rule import USE_ADAPTED, DecisionRule

    cells = []
    for stored in stored_runs(results, STRESS_RUNS, DOMAINS, required=True):
        run, pool, teacher = stored.run, stored.pool, stored.teacher
        for size in sizes_for(len(pool.gold)):
            for seed in range(SEEDS):
                dev_rows, test = draw(pool, size, seed, stored.domain)
                kept = kept_on_dev(run, teacher, pool, dev_rows, resamples, PATIENCE)
                test = test[test >= DEV_200]
                decided = kept.decide(DecisionRule()).decision == USE_ADAPTED
                cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": size, "seed": seed,
                              "teacher_dev_lead": kept.lead.value,
                              "teacher_dev_lead_ci": None if kept.lead.interval is None
                              else list(kept.lead.interval),
                              "stopped": kept.stopped, "used": {"on": decided and not kept.stopped, "off": decided},
                              "raw": test_change(pool, test, run.base, run.steps[kept.step]),
                              "teacher_lead": test_change(pool, test, run.base, teacher)})
        print(f"{stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    return {"sizes": list(SIZES), "seeds": SEEDS, "resamples": resamples, "cells": cells, "verdict": verdict(cells)}


def arm(cells: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """False use, power, cells used and the mean applied Δ of one arm, as dev_agreement.figures weighs them."""
    weighed = figures(cells, [c["used"][name] for c in cells])
    return {key: weighed[key] for key in ("false_use", "power", "used", "applied")}


def verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule written before the study: `off` by default if ≥ MIN_STOPPED cells are stopped, its false use is
    within max(5 %, `on`'s) and its mean applied Δ is not below `on`'s."""
    on, off = arm(cells, "on"), arm(cells, "off")
    stopped = [c for c in cells if c["stopped"]]
    return {"cells": len(cells), "stopped": len(stopped), "losing_cells": sum(c["raw"] < 0 for c in cells),
            "on": on, "off": off,
            "stopped_raw": float(np.mean([c["raw"] for c in stopped])) if stopped else None,
            "stopped_applied_off": float(np.mean([c["raw"] if c["used"]["off"] else 0.0 for c in stopped]))
            if stopped else None,
            "stopped_used_off": sum(c["used"]["off"] for c in stopped),
            "stopped_losing_used_off": sum(c["used"]["off"] and c["raw"] < 0 for c in stopped),
            "default_off": (len(stopped) >= MIN_STOPPED
                            and off["false_use"] <= max(FALSE_USE_LIMIT, on["false_use"])
                            and off["applied"] >= on["applied"])}


def lines(result: dict[str, Any]) -> list[str]:
    v = result["verdict"]
    out = [f"{v['cells']} cells, {v['stopped']} stopped by `on` (the teacher's dev CI below 0), "
           f"{v['losing_cells']} with a raw test Δ below 0", "",
           "| teacher_check | false use | power | cells used | mean applied Δ |", "|---|---:|---:|---:|---:|"]
    for name in ("on", "off"):
        f = v[name]
        out.append(f"| `{name}` | {100 * f['false_use']:.0f} % | {100 * f['power']:.0f} % | {f['used']} | "
                   f"{f['applied']:+.2f} |")
    stopped = [c for c in result["cells"] if c["stopped"]]
    if stopped:
        out += ["", "| stopped cell | dev pairs | the teacher's dev lead | its test lead | the student's raw Δ | "
                    "used with `off` |", "|---|---:|---:|---:|---:|:---:|"]
        for c in stopped:
            lo, hi = c["teacher_dev_lead_ci"]
            out.append(f"| {c['pairing']}/{c['domain']} seed {c['seed']} | {c['size']} | {c['teacher_dev_lead']:+.2f} "
                       f"[{lo:+.2f}, {hi:+.2f}] | {c['teacher_lead']:+.2f} | {c['raw']:+.2f} | "
                       f"{'yes' if c['used']['off'] else 'no'} |")
    out += ["", f"`teacher_check` off by default: {'yes' if v['default_off'] else 'no'}."]
    return out


def main() -> None:
    stored_study_main(__doc__, RESULTS, "teacher-check.json", lambda args: study(args.results, args.resamples),
                      lines)


if __name__ == "__main__":
    main()
