"""The teacher's evidence on the dev pairs themselves (issue 41; the rule: research/findings.md, "The teacher's evidence
on the dev pairs themselves", committed before this study): a keep-base decision becomes use-adapted when the kept
step agrees with the teacher's cosines on the dev pairs significantly better than the base does, the student is
not significantly worse on dev, and — per variant — the teacher leads on dev.

    python -m research.experiments.dev_agreement --study   # research/results/distill → research/results/distill/study-dev-agreement.json
    python -m research.experiments.dev_agreement           # prints the verdict and the tables from the stored study
    python -m research.experiments.dev_agreement --check --study   # the teacher-led decision on a third pairing (l3-mpnet)
    python -m research.experiments.dev_agreement --check --store runs/distill --study   # after its runs: store, then study
    python -m research.experiments.dev_agreement --stress --study  # the teacher-led decision at 400 dev pairs
    python -m research.experiments.dev_agreement --defaults       # the defaults all these verdicts give, in their order

Four studies of the teacher-led decision, each with its rule in research/findings.md written before it was computed,
applied here in the order they were written (`teacher_defaults`):
1. the dev-pair evidence (`study`, `verdict`): the stored k3e runs, 100 cells;
2. both teacher-led relaxations on a third pairing, l3-mpnet (`check`, `check_verdict`): 50 cells;
3. `lead` evidence, the teacher's lead alone (`lead_only_verdict`): over the cells of 1 and 2;
4. the stress test at 400 dev pairs (`stress`, `stress_verdict`): 120 cells, which turned 1's and lead_risk's
   relaxations off.
Each reads only stored per-pair cosines (research/results/distill/runs: the base's and every evaluated step's on the pool)
and the teacher's pool cosines. Cells are drawn and kept as research/experiments/lead_risk.py keeps them
(distill_suite.kept_on_dev), so study 1's "today" decides every cell as lead_risk's 0.40 column does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from sentadapt.decision.rule import USE_ADAPTED, DecisionRule
from sentadapt.evaluation.evaluator import Delta

from research.experiments.decision_study import Run, test_change
from research.experiments.distill_suite import (
    PAIRINGS,
    PATIENCE,
    drawn_splits,
    kept_on_dev,
    run_folder,
    stored_runs,
)
from research.experiments.domain_data import ALL_DOMAINS
from research.experiments.stored_runs import computed_or_stored, store_run
from research.experiments.teacher_led import DEV_PAIRS, TEACHER_LED_RISK, agreement, teacher_led_rule, with_teacher_evidence

RESULTS = Path("research/results/distill")
VARIANT = "k3e"
GATES = ("any", "lead", "lead-ci")  # the order the rule tries them in: the least gated first
FALSE_USE_LIMIT = 0.05
DOMAIN_DROP_LIMIT = 0.10  # no pairing-and-domain mean applied Δ may fall more than this below today's
GAIN = 1.0  # a cell "gains" when its raw test Δ is at least this


def gate_open(gate: str, lead: Any) -> bool:
    """Whether the variant's condition on the teacher's dev lead holds."""
    if gate == "any":
        return True
    if gate == "lead":
        return lead.value > 0
    return lead.interval is not None and lead.interval[0] > 0


def kept_with_agreement(run: Run, teacher: np.ndarray, pool: Any, dev_rows: np.ndarray, test: np.ndarray,
                        resamples: int) -> tuple[Any, Any, dict[str, Any]]:
    """What adapt keeps on one drawn dev set (distill_suite.Kept), the kept step's agreement with the teacher on the
    dev pairs, and the record both studies store of the cell."""
    kept = kept_on_dev(run, teacher, pool, dev_rows, resamples, PATIENCE)
    found = agreement(teacher[dev_rows], run.base[dev_rows], run.steps[kept.step][dev_rows], resamples,
                      source=DEV_PAIRS)
    interval, lead = kept.delta.interval, kept.lead.interval
    record = {"step": kept.step, "dev_change": kept.delta.value,
              "dev_change_ci": None if interval is None else list(interval), "teacher_dev_lead": kept.lead.value,
              "teacher_dev_lead_ci": None if lead is None else list(lead), "stopped": kept.stopped,
              "agreement": found.to_dict(), "raw": test_change(pool, test, run.base, run.steps[kept.step])}
    return kept, found, record


def cell_decisions(run: Run, teacher: np.ndarray, pool: Any, dev_rows: np.ndarray, test: np.ndarray,
                   resamples: int) -> dict[str, Any]:
    """One drawn dev set: today's decision, the kept step's agreement with the teacher on the dev pairs, and per
    variant whether the student is used."""
    kept, found, record = kept_with_agreement(run, teacher, pool, dev_rows, test, resamples)
    rule = teacher_led_rule(DecisionRule(), kept.lead, TEACHER_LED_RISK)
    decided = kept.decide(rule)
    today = decided.decision == USE_ADAPTED and not kept.stopped
    interval = kept.delta.interval
    not_worse = interval is None or interval[1] > 0
    used = {gate: today or (not kept.stopped and decided.decision != USE_ADAPTED and gate_open(gate, kept.lead)
                            and found.better and not_worse) for gate in GATES}
    # `lead-ci` is the library's rule (decision.with_teacher_evidence), which `sentadapt adapt` applies
    used["lead-ci"] = not kept.stopped and with_teacher_evidence(decided, interval, kept.lead, found,
                                                                 rule).decision == USE_ADAPTED
    return {**record, "today": today, "used": used}


def study(results: Path, seeds: int, resamples: int) -> dict[str, Any]:
    cells = []
    for stored in stored_runs(results, [(pairing, VARIANT) for pairing in PAIRINGS], ALL_DOMAINS):
        for size, seed, dev_rows, test in drawn_splits(stored.pool, stored.domain, seeds):
            cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": size, "seed": seed,
                          **cell_decisions(stored.run, stored.teacher, stored.pool, dev_rows, test, resamples)})
        print(f"{stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    return {"variant": VARIANT, "seeds": seeds, "resamples": resamples, "cells": cells, "verdict": verdict(cells)}


CHECK_PAIRING, CHECK_VARIANT = "l3-mpnet", "k3"  # research/findings.md, "The teacher-led decision on a third pairing"
CHECK_DECISIONS = ("plain", "limit", "evidence", "both")


def check_decisions(run: Run, teacher: np.ndarray, pool: Any, dev_rows: np.ndarray, test: np.ndarray,
                    resamples: int) -> dict[str, Any]:
    """One drawn dev set of the check: whether the student is used under each of CHECK_DECISIONS."""
    kept, found, record = kept_with_agreement(run, teacher, pool, dev_rows, test, resamples)
    used = {}
    for name in CHECK_DECISIONS:
        rule = teacher_led_rule(DecisionRule(), kept.lead, TEACHER_LED_RISK) if name in ("limit", "both") \
            else DecisionRule()
        decided = kept.decide(rule)
        if name in ("evidence", "both"):
            decided = with_teacher_evidence(decided, kept.delta.interval, kept.lead, found, rule)
        used[name] = decided.decision == USE_ADAPTED and not kept.stopped
    return {**record, "used": used, "teacher_lead": test_change(pool, test, run.base, teacher)}


def store_check(work: Path, results: Path) -> None:
    """The third pairing's finished runs in WORK (`distill_suite --train --pairs l3-mpnet --variant k3`) into
    RESULTS, with the teacher's pool cosines: the l6-mpnet ones (the same model on the same pools, computed by the
    same pool_cosines), under the pairing's name."""
    import shutil

    for domain in ALL_DOMAINS:
        source = run_folder(work, CHECK_PAIRING, domain, CHECK_VARIANT)
        if not store_run(source, run_folder(results, CHECK_PAIRING, domain, CHECK_VARIANT)):
            raise SystemExit(f"{source}: not finished")
        cosines = results / "teacher-cosines"
        shutil.copy(cosines / f"l6-mpnet-{domain}.npy", cosines / f"{CHECK_PAIRING}-{domain}.npy")


def check(results: Path, seeds: int, resamples: int) -> dict[str, Any]:
    """The check's cells over the 5 domains of the third pairing, and its verdict."""
    cells = []
    for stored in stored_runs(results, [(CHECK_PAIRING, CHECK_VARIANT)], ALL_DOMAINS, required=True):
        for size, seed, dev_rows, test in drawn_splits(stored.pool, stored.domain, seeds):
            cells.append({"pairing": CHECK_PAIRING, "domain": stored.domain, "size": size, "seed": seed,
                          **check_decisions(stored.run, stored.teacher, stored.pool, dev_rows, test, resamples)})
    study_cells = json.loads((results / "study-dev-agreement.json").read_text())["cells"]
    return {"pairing": CHECK_PAIRING, "variant": CHECK_VARIANT, "seeds": seeds, "resamples": resamples,
            "cells": cells, "verdict": check_verdict(cells), "lead_only": lead_only_verdict(study_cells, cells)}


def check_verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule written before the runs: each relaxation stays unless it lifts false use above 5 % and above the
    decision without it."""
    per = {name: {**figures(cells, [c["used"][name] for c in cells]),
                  "changed_from_plain": sum(c["used"][name] != c["used"]["plain"] for c in cells)}
           for name in CHECK_DECISIONS}
    false_use = {name: f["false_use"] for name, f in per.items()}
    keep_limit = false_use["limit"] <= max(FALSE_USE_LIMIT, false_use["plain"])
    keep_evidence = false_use["both"] <= max(FALSE_USE_LIMIT, false_use["limit"])
    return {"cells": len(cells), "losing_cells": sum(c["raw"] < 0 for c in cells),
            "gaining_cells": sum(c["raw"] >= GAIN for c in cells),
            "teacher_ahead_cells": sum(gate_open("lead-ci", _lead(c)) for c in cells),
            "decisions": per, "keep_teacher_risk": keep_limit, "keep_teacher_evidence": keep_evidence}


STRESS_SIZE, STRESS_SEEDS = 400, 10  # research/findings.md, "The teacher-led decision at 400 dev pairs"
STRESS_RUNS = (("l6-mpnet", "k3e"), ("l3-l6", "k3e"), (CHECK_PAIRING, CHECK_VARIANT))


def stress(results: Path, resamples: int) -> dict[str, Any]:
    """The stress test's cells (the stored pairings × the four earlier domains × STRESS_SEEDS draws of STRESS_SIZE
    dev pairs) and its verdict."""
    from research.experiments.decision_study import draw
    from research.experiments.distill_suite import DEV_200, DOMAINS

    cells = []
    for stored in stored_runs(results, STRESS_RUNS, DOMAINS, required=True):
        for seed in range(STRESS_SEEDS):
            dev_rows, test = draw(stored.pool, STRESS_SIZE, seed, stored.domain)
            cell = check_decisions(stored.run, stored.teacher, stored.pool, dev_rows, test[test >= DEV_200],
                                   resamples)
            cell["used"]["lead"] = lead_only_used(cell, cell["used"]["both"])
            cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": STRESS_SIZE, "seed": seed,
                          **cell})
        print(f"{stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    return {"size": STRESS_SIZE, "seeds": STRESS_SEEDS, "resamples": resamples, "cells": cells,
            "verdict": stress_verdict(cells)}


def stress_verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule written before the stress test: the defaults stand unless `both` lifts false use above 5 % and above
    `plain`; `lead` becomes the default if it keeps false use within max(5 %, `both`'s), the mean applied Δ not
    below `both`'s, and changes at least one decision."""
    per = {name: {**figures(cells, [c["used"][name] for c in cells]),
                  "changed_from_both": sum(c["used"][name] != c["used"]["both"] for c in cells)}
           for name in ("plain", "both", "lead")}
    false_use = {name: f["false_use"] for name, f in per.items()}
    return {"cells": len(cells), "losing_cells": sum(c["raw"] < 0 for c in cells),
            "gaining_cells": sum(c["raw"] >= GAIN for c in cells),
            "teacher_ahead_cells": sum(gate_open("lead-ci", _lead(c)) for c in cells),
            "teacher_ahead_losing_cells": sum(gate_open("lead-ci", _lead(c)) and c["raw"] < 0 for c in cells),
            "decisions": per,
            "defaults_stand": false_use["both"] <= max(FALSE_USE_LIMIT, false_use["plain"]),
            "adopt_lead": (false_use["lead"] <= max(FALSE_USE_LIMIT, false_use["both"])
                           and per["lead"]["applied"] >= per["both"]["applied"]
                           and per["lead"]["changed_from_both"] > 0)}


def stress_lines(result: dict[str, Any]) -> list[str]:
    v = result["verdict"]
    out = [f"{v['cells']} cells at {result['size']} dev pairs: {v['teacher_ahead_cells']} with the teacher ahead on "
           f"dev (CI above 0), {v['teacher_ahead_losing_cells']} of them with a raw test Δ below 0; "
           f"{v['losing_cells']} losing, {v['gaining_cells']} with a raw test Δ ≥ +{GAIN:.1f}", "",
           "| decision | false use | power | cells used | changed from both | mean applied Δ |",
           "|---|---:|---:|---:|---:|---:|"]
    for name, f in v["decisions"].items():
        out.append(f"| `{name}` | {100 * f['false_use']:.0f} % | {100 * f['power']:.0f} % | {f['used']} | "
                   f"{f['changed_from_both']} | {f['applied']:+.2f} |")
    groups = v["decisions"]["plain"]["by_domain"]
    out += ["", "| pairing / domain | teacher ahead on dev | mean raw Δ | `plain` | `both` | `lead` |",
            "|---|---:|---:|---:|---:|---:|"]
    for group in groups:
        cells = [c for c in result["cells"] if f"{c['pairing']}/{c['domain']}" == group]
        ahead = sum(gate_open("lead-ci", _lead(c)) for c in cells)
        raw = np.mean([c["raw"] for c in cells])
        out.append(f"| {group} | {ahead}/{len(cells)} | {raw:+.2f} | " + " | ".join(
            f"{v['decisions'][name]['by_domain'][group]:+.2f}" for name in ("plain", "both", "lead")) + " |")
    out += ["", f"the defaults stand: {'yes' if v['defaults_stand'] else 'no'}; `lead` becomes the default: "
                f"{'yes' if v['adopt_lead'] else 'no'}."]
    return out


def teacher_defaults(results: Path) -> dict[str, Any]:
    """The teacher-run decision defaults the stored verdicts give, applied in the order their rules were written:
    the teacher-led limit (lead_risk), the dev-pair evidence (this study), the third pairing's check with the `lead`
    rule, then the 400-pair stress test. What `TrainConfig` must default to (a test holds it)."""
    read = lambda name: json.loads((results / name).read_text())  # noqa: E731
    risk: float | None = read("study-lead-risk.json")["verdict"]["chosen"]
    evidence = "dev" if read("study-dev-agreement.json")["verdict"]["chosen"] == "lead-ci" else "off"
    check = read("check-l3-mpnet.json")
    if not check["verdict"]["keep_teacher_risk"]:
        risk = None
    if not check["verdict"]["keep_teacher_evidence"]:
        evidence = "off"
    if check["lead_only"]["adopt_lead"]:
        evidence = "lead"
    stressed = read("stress-400.json")["verdict"]
    if not stressed["defaults_stand"]:
        risk, evidence = None, "off"
    if stressed["adopt_lead"]:
        evidence = "lead"
    return {"teacher_risk": None if risk == 0.2 else risk, "teacher_evidence": evidence}


def lead_only_used(cell: dict[str, Any], now: bool) -> bool:
    """`lead` evidence (research/findings.md, "The teacher's lead alone"): the student is used when the library's
    decision now (`now`) uses it, or when the teacher leads on dev (CI above 0) and the student's dev Δ CI's upper
    end is above 0; a stopped run ships nothing."""
    lead, change = cell["teacher_dev_lead_ci"], cell["dev_change_ci"]
    return now or (not cell["stopped"] and lead is not None and lead[0] > 0
                   and (change is None or change[1] > 0))


def lead_only_verdict(study_cells: list[dict[str, Any]], check_cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule written before the third pairing's results: per set, `lead` against the library's decision now
    (`lead-ci` in the study, `both` in the check)."""
    sets = {"study": (study_cells, [c["used"]["lead-ci"] for c in study_cells]),
            "check": (check_cells, [c["used"]["both"] for c in check_cells])}
    per, changed, met = {}, 0, True
    for name, (cells, now) in sets.items():
        lead = [lead_only_used(c, u) for c, u in zip(cells, now)]
        before, after = figures(cells, now), figures(cells, lead)
        changed += sum(a != b for a, b in zip(lead, now))
        ok = after["false_use"] <= max(FALSE_USE_LIMIT, before["false_use"]) and after["applied"] >= before["applied"]
        if name == "study":
            ok = ok and all(after["by_domain"][g] >= before["by_domain"][g] - DOMAIN_DROP_LIMIT
                            for g in before["by_domain"])
        per[name] = {"now": before, "lead": after, "changed": sum(a != b for a, b in zip(lead, now)), "met": ok}
        met = met and ok
    return {"sets": per, "changed": changed, "adopt_lead": met and changed > 0}


def check_lines(result: dict[str, Any]) -> list[str]:
    v = result["verdict"]
    out = [f"{result['pairing']}: {v['cells']} cells, {v['teacher_ahead_cells']} with the teacher ahead on dev (CI "
           f"above 0), {v['losing_cells']} with a raw test Δ below 0, {v['gaining_cells']} with one ≥ +{GAIN:.1f}",
           "", "| decision | false use | power | cells used | changed from plain | mean applied Δ |",
           "|---|---:|---:|---:|---:|---:|"]
    for name, f in v["decisions"].items():
        out.append(f"| `{name}` | {100 * f['false_use']:.0f} % | {100 * f['power']:.0f} % | {f['used']} | "
                   f"{f['changed_from_plain']} | {f['applied']:+.2f} |")
    out += ["", "| domain | the teacher's lead (test) | mean raw Δ | "
            + " | ".join(f"`{name}`" for name in v["decisions"]) + " |",
            "|---|---:|---:|" + "---:|" * len(v["decisions"])]
    for group in v["decisions"]["plain"]["by_domain"]:
        cells = [c for c in result["cells"] if f"{c['pairing']}/{c['domain']}" == group]
        lead, raw = np.mean([c["teacher_lead"] for c in cells]), np.mean([c["raw"] for c in cells])
        out.append(f"| {group} | {lead:+.2f} | {raw:+.2f} | " + " | ".join(f"{f['by_domain'][group]:+.2f}"
                                                                          for f in v["decisions"].values()) + " |")
    out += ["", f"teacher_risk 0.40 stands: {'yes' if v['keep_teacher_risk'] else 'no'}; teacher_evidence=dev "
                f"stands: {'yes' if v['keep_teacher_evidence'] else 'no'}."]
    lead = result.get("lead_only")
    if lead is not None:
        out += ["", "| cells | decision | false use | power | cells used | changed | mean applied Δ | met |",
                "|---|---|---:|---:|---:|---:|---:|:---:|"]
        for name, s in lead["sets"].items():
            for kind in ("now", "lead"):
                f = s[kind]
                out.append(f"| {name} | {'the library now' if kind == 'now' else '`lead` evidence'} | "
                           f"{100 * f['false_use']:.0f} % | {100 * f['power']:.0f} % | {f['used']} | "
                           f"{'–' if kind == 'now' else s['changed']} | {f['applied']:+.2f} | "
                           f"{'–' if kind == 'now' else ('yes' if s['met'] else 'no')} |")
        out += ["", f"`lead` evidence becomes the default: {'yes' if lead['adopt_lead'] else 'no'} "
                    f"({lead['changed']} decisions changed over both sets)."]
    return out


def figures(cells: list[dict[str, Any]], used: list[bool]) -> dict[str, Any]:
    """False use, power, cells used, mean applied Δ and each pairing-and-domain mean applied Δ."""
    losing = [u for c, u in zip(cells, used) if c["raw"] < 0]
    gaining = [u for c, u in zip(cells, used) if c["raw"] >= GAIN]
    applied = [c["raw"] if u else 0.0 for c, u in zip(cells, used)]
    groups = sorted({(c["pairing"], c["domain"]) for c in cells})
    return {"false_use": sum(losing) / len(losing) if losing else 0.0,
            "power": sum(gaining) / len(gaining) if gaining else float("nan"),
            "used": sum(used), "applied": float(np.mean(applied)),
            "by_domain": {f"{p}/{d}": float(np.mean([a for c, a in zip(cells, applied)
                                                    if (c["pairing"], c["domain"]) == (p, d)])) for p, d in groups}}


def verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The pre-registered rule: the first of GATES whose false use is ≤ 5 %, that lowers no pairing-and-domain mean
    applied Δ by more than 0.10 and the mean applied Δ not at all, against today's decision; None if none does."""
    today = figures(cells, [c["today"] for c in cells])
    per_gate = {gate: {**figures(cells, [c["used"][gate] for c in cells]),
                       "changed": sum(c["used"][gate] != c["today"] for c in cells)} for gate in GATES}
    qualifies = {gate: f["false_use"] <= FALSE_USE_LIMIT and f["applied"] >= today["applied"] and all(
        f["by_domain"][group] >= today["by_domain"][group] - DOMAIN_DROP_LIMIT for group in today["by_domain"])
        for gate, f in per_gate.items()}
    chosen = next((gate for gate in GATES if qualifies[gate]), None)
    return {"cells": len(cells), "losing_cells": sum(c["raw"] < 0 for c in cells),
            "gaining_cells": sum(c["raw"] >= GAIN for c in cells),
            "teacher_ahead_cells": sum(gate_open("lead-ci", _lead(c)) for c in cells),
            "agreement_better_cells": sum(c["agreement"]["ci"] is not None and c["agreement"]["ci"][0] > 0
                                          for c in cells),
            "today": today, "gates": per_gate, "qualifies": qualifies, "chosen": chosen}


def _lead(cell: dict[str, Any]) -> Any:
    """The teacher's dev lead of a stored cell, as the Delta the gates read."""
    interval = cell["teacher_dev_lead_ci"]
    return Delta(cell["teacher_dev_lead"], None if interval is None else tuple(interval))


def lines(result: dict[str, Any]) -> list[str]:
    v = result["verdict"]
    out = [f"{v['cells']} cells: {v['teacher_ahead_cells']} with the teacher ahead on dev (CI above 0), "
           f"{v['agreement_better_cells']} whose kept step agrees with the teacher on the dev pairs significantly "
           f"better than the base; {v['losing_cells']} with a raw test Δ below 0, {v['gaining_cells']} with one "
           f"≥ +{GAIN:.1f}", "",
           "| decision | false use | power | cells used | changed | mean applied Δ | qualifies |",
           "|---|---:|---:|---:|---:|---:|:---:|"]
    today = v["today"]
    out.append(f"| today (no evidence) | {100 * today['false_use']:.0f} % | {100 * today['power']:.0f} % | "
               f"{today['used']} | – | {today['applied']:+.2f} | – |")
    for gate, f in v["gates"].items():
        out.append(f"| `{gate}` | {100 * f['false_use']:.0f} % | {100 * f['power']:.0f} % | {f['used']} | "
                   f"{f['changed']} | {f['applied']:+.2f} | {'yes' if v['qualifies'][gate] else 'no'} |")
    out += ["", "| pairing / domain | today | " + " | ".join(f"`{gate}`" for gate in v["gates"]) + " |",
            "|---|---:|" + "---:|" * len(v["gates"])]
    for group, value in today["by_domain"].items():
        out.append(f"| {group} | {value:+.2f} | " + " | ".join(f"{f['by_domain'][group]:+.2f}"
                                                             for f in v["gates"].values()) + " |")
    chosen = v["chosen"]
    out += ["", f"Chosen by the rule: {'none (stays opt-in)' if chosen is None else f'`{chosen}`'}."]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="store_true", help="compute the chosen study from the stored runs")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--check", action="store_true",
                       help="the teacher-led decision on the third pairing (l3-mpnet) instead of the dev-pair study")
    which.add_argument("--stress", action="store_true", help="the teacher-led decision at 400 dev pairs instead")
    which.add_argument("--defaults", action="store_true",
                       help="print the teacher-run decision defaults the stored verdicts give")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--store", type=Path, metavar="WORK",
                        help="with --check: copy the third pairing's runs from WORK (runs/distill) into --results")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    if args.store and not args.check:
        parser.error("--store goes with --check")
    if args.defaults:
        print(json.dumps(teacher_defaults(args.results)))
        return
    if args.check and args.store:
        store_check(args.store, args.results)
    name, compute, render = (
        ("stress-400.json", lambda: stress(args.results, args.resamples), stress_lines) if args.stress else
        ("check-l3-mpnet.json", lambda: check(args.results, args.seeds, args.resamples), check_lines) if args.check
        else ("study-dev-agreement.json", lambda: study(args.results, args.seeds, args.resamples), lines))
    print("\n".join(render(computed_or_stored(args.results / name, compute if args.study else None))))


if __name__ == "__main__":
    main()
