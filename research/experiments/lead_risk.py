"""A decision that trusts a leading teacher more (issue 41; the rule: research/findings.md, "A decision that trusts a
leading teacher more", committed before this study): when the teacher leads the base on the dev set (its paired
95 % CI above 0), the risk limit is L instead of 0.20, for L in LIMITS; the code picks L by the rule.

    python -m research.experiments.lead_risk --study     # research/results/distill → research/results/distill/study-lead-risk.json
    python -m research.experiments.lead_risk             # prints the verdict and the table from the stored study

Reads only the stored k3e runs (research/results/distill/runs/k3e: the teacher-run defaults with the evidence hold-out,
both pairings × the 5 domains): each run's per-pair cosines at every evaluated step, the pool and the teacher's
pool cosines. Cells are drawn and scored as distill_suite's study draws them (the same seeds, sizes, patience,
test pairs from test.jsonl only), so at L = 0.20 every cell decides as study-k3e.json's does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from research.experiments.decision_study import Run, test_change
from research.experiments.distill_suite import (
    PAIRINGS,
    PATIENCE,
    drawn_splits,
    kept_on_dev,
    stored_runs,
)
from research.experiments.domain_data import ALL_DOMAINS
from research.experiments.stored_runs import stored_study_main

RESULTS = Path("research/results/distill")
VARIANT = "k3e"
LIMITS = (0.20, 0.30, 0.40)  # fixed before the study; 0.20 is today's DEFAULT_RISK
FALSE_USE_LIMIT = 0.05
DOMAIN_DROP_LIMIT = 0.10  # no pairing-and-domain mean applied Δ may fall more than this below its value at 0.20
GAIN = 1.0  # a cell "gains" when its raw test Δ is at least this
TEACHER_LED = 0.40  # the limit the first rule chose (decision.TEACHER_LED_RISK), which `best` is compared at
POWER_GAIN = 0.05  # `last` must use at least this much more of the gaining cells
RAW_DROP_LIMIT = 0.10  # nor lower the mean raw test Δ by more than this


def cell_decisions(run: Run, teacher: np.ndarray, pool: Any, dev_rows: np.ndarray, test: np.ndarray,
                   resamples: int) -> dict[str, Any]:
    """One drawn dev set: what adapt keeps and, for each limit, whether the student is used."""
    from sentadapt.decision.rule import DecisionRule

    from research.experiments.teacher_led import TEACHER_LED_RISK, teacher_led_rule

    kept = kept_on_dev(run, teacher, pool, dev_rows, resamples, PATIENCE)
    lead, step, delta, evidence, stopped = kept.lead, kept.step, kept.delta, kept.evidence, kept.stopped
    ahead = lead.interval is not None and lead.interval[0] > 0
    used = {f"{limit:.2f}": kept.used(teacher_led_rule(DecisionRule(), lead, limit)) for limit in LIMITS}
    # the `last` variant (research/findings.md, "Deciding on the last evaluation of a teacher run"): the final
    # evaluation, no early stopping, one option; the teacher-led limit as the library now applies it
    last = max(run.steps)
    final = kept_on_dev(Run(run.model, run.domain, run.recipe, run.base, {last: run.steps[last]}), teacher, pool,
                        dev_rows, resamples, 0)
    last_delta, last_evidence = final.delta, final.evidence
    last_used = final.used(teacher_led_rule(DecisionRule(), final.lead, TEACHER_LED_RISK))
    return {"step": step, "dev_change": delta.value, "risk": evidence.risk if evidence is not None else None,
            "teacher_dev_lead": lead.value, "teacher_ahead": ahead, "stopped": stopped, "used": used,
            "raw": test_change(pool, test, run.base, run.steps[step]),
            "last": {"step": last, "dev_change": last_delta.value, "used": last_used,
                     "risk": last_evidence.risk if last_evidence is not None else None,
                     "raw": test_change(pool, test, run.base, run.steps[last])}}


def study(results: Path, seeds: int, resamples: int) -> dict[str, Any]:
    cells = []
    for stored in stored_runs(results, [(pairing, VARIANT) for pairing in PAIRINGS], ALL_DOMAINS):
        for size, seed, dev_rows, test in drawn_splits(stored.pool, stored.domain, seeds):
            cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": size, "seed": seed,
                          **cell_decisions(stored.run, stored.teacher, stored.pool, dev_rows, test, resamples)})
        print(f"{stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    return {"variant": VARIANT, "seeds": seeds, "resamples": resamples, "limits": list(LIMITS), "cells": cells,
            "verdict": lead_risk_verdict(cells), "last_step": last_step_verdict(cells)}


def last_step_verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The pre-registered rule for `last` against `best` (both at the teacher-led limit the library applies)."""
    best_limit = f"{TEACHER_LED:.2f}"
    variants = {"best": [{"pairing": c["pairing"], "domain": c["domain"], "raw": c["raw"],
                          "used": c["used"][best_limit]} for c in cells],
                "last": [{"pairing": c["pairing"], "domain": c["domain"], "raw": c["last"]["raw"],
                          "used": c["last"]["used"]} for c in cells]}
    figures = {}
    for name, rows in variants.items():
        losing, gaining = [r for r in rows if r["raw"] < 0], [r for r in rows if r["raw"] >= GAIN]
        groups = sorted({(r["pairing"], r["domain"]) for r in rows})
        figures[name] = {
            "false_use": sum(r["used"] for r in losing) / len(losing) if losing else 0.0,
            "power": sum(r["used"] for r in gaining) / len(gaining) if gaining else float("nan"),
            "losing_cells": len(losing), "gaining_cells": len(gaining), "used": sum(r["used"] for r in rows),
            "raw": float(np.mean([r["raw"] for r in rows])),
            "applied": float(np.mean([r["raw"] if r["used"] else 0.0 for r in rows])),
            "by_domain": {f"{p}/{d}": float(np.mean([r["raw"] if r["used"] else 0.0 for r in rows
                                                    if (r["pairing"], r["domain"]) == (p, d)])) for p, d in groups}}
    best, last = figures["best"], figures["last"]
    conditions = {"false_use": last["false_use"] <= FALSE_USE_LIMIT,
                  "power": last["power"] >= best["power"] + POWER_GAIN,
                  "domains": all(last["by_domain"][g] >= best["by_domain"][g] - DOMAIN_DROP_LIMIT
                                 for g in best["by_domain"]),
                  "raw": last["raw"] >= best["raw"] - RAW_DROP_LIMIT}
    return {"figures": figures, "conditions": conditions, "adopt_last": all(conditions.values())}


def lead_risk_verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The pre-registered rule applied: per limit, false use, power and each pairing-and-domain mean applied Δ;
    the chosen limit is the largest with false use ≤ 5 % and no domain mean more than 0.10 below 0.20's."""
    losing = [c for c in cells if c["raw"] < 0]
    gaining = [c for c in cells if c["raw"] >= GAIN]
    groups = sorted({(c["pairing"], c["domain"]) for c in cells})

    def applied(limit: str, group: tuple[str, str]) -> float:
        chosen = [c for c in cells if (c["pairing"], c["domain"]) == group]
        return float(np.mean([c["raw"] if c["used"][limit] else 0.0 for c in chosen]))

    per_limit = {}
    for limit in (f"{value:.2f}" for value in LIMITS):
        per_limit[limit] = {
            "false_use": sum(c["used"][limit] for c in losing) / len(losing) if losing else 0.0,
            "power": sum(c["used"][limit] for c in gaining) / len(gaining) if gaining else float("nan"),
            "used": sum(c["used"][limit] for c in cells),
            "applied": float(np.mean([c["raw"] if c["used"][limit] else 0.0 for c in cells])),
            "by_domain": {f"{p}/{d}": applied(limit, (p, d)) for p, d in groups}}
    today = per_limit[f"{LIMITS[0]:.2f}"]["by_domain"]
    qualifies = {limit: figures["false_use"] <= FALSE_USE_LIMIT and all(
        figures["by_domain"][group] >= today[group] - DOMAIN_DROP_LIMIT for group in today)
        for limit, figures in per_limit.items()}
    chosen = max((float(limit) for limit, ok in qualifies.items() if ok), default=LIMITS[0])
    return {"cells": len(cells), "losing_cells": len(losing), "gaining_cells": len(gaining),
            "teacher_ahead_cells": sum(c["teacher_ahead"] for c in cells), "limits": per_limit,
            "qualifies": qualifies, "chosen": chosen}


def lines(result: dict[str, Any]) -> list[str]:
    verdict = result["verdict"]
    out = [f"{verdict['cells']} cells ({verdict['teacher_ahead_cells']} with the teacher ahead on dev), "
           f"{verdict['losing_cells']} with a raw test Δ below 0, {verdict['gaining_cells']} with one ≥ +{GAIN:.1f}",
           "", "| limit when the teacher leads | false use | power | cells used | mean applied Δ | qualifies |",
           "|---:|---:|---:|---:|---:|:---:|"]
    for limit, figures in verdict["limits"].items():
        qualifies = "yes" if verdict["qualifies"][limit] else "no"
        out.append(f"| {limit} | {100 * figures['false_use']:.0f} % | {100 * figures['power']:.0f} % | "
                   f"{figures['used']} | {figures['applied']:+.2f} | {qualifies} |")
    out += ["", "| pairing / domain | " + " | ".join(f"applied at {limit}" for limit in verdict["limits"]) + " |",
            "|---|" + "---:|" * len(verdict["limits"])]
    for group in next(iter(verdict["limits"].values()))["by_domain"]:
        out.append(f"| {group} | " + " | ".join(f"{figures['by_domain'][group]:+.2f}"
                                               for figures in verdict["limits"].values()) + " |")
    out += ["", f"Chosen by the rule: {verdict['chosen']:.2f}."]
    if "last_step" in result:
        last = result["last_step"]
        out += ["", "| kept step | false use | power | cells used | mean raw Δ | mean applied Δ |",
                "|---|---:|---:|---:|---:|---:|"]
        for name, figures in last["figures"].items():
            out.append(f"| {name} | {100 * figures['false_use']:.0f} % ({figures['losing_cells']} losing) | "
                       f"{100 * figures['power']:.0f} % ({figures['gaining_cells']} gaining) | {figures['used']} | "
                       f"{figures['raw']:+.2f} | {figures['applied']:+.2f} |")
        out += ["", "| pairing / domain | applied, best | applied, last |", "|---|---:|---:|"]
        for group, value in last["figures"]["best"]["by_domain"].items():
            out.append(f"| {group} | {value:+.2f} | {last['figures']['last']['by_domain'][group]:+.2f} |")
        met = ", ".join(f"{name} {'met' if ok else 'not met'}" for name, ok in last["conditions"].items())
        out += ["", f"`last` against `best`: {met}; adopt `last`: {'yes' if last['adopt_last'] else 'no'}."]
    return out


def main() -> None:
    stored_study_main(__doc__, RESULTS, "study-lead-risk.json",
                      lambda args: study(args.results, args.seeds, args.resamples), lines, seeds=True)


if __name__ == "__main__":
    main()
