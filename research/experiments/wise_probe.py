"""Weight-space interpolation of a distilled student and its base (WiSE-FT) on the distillation suite: a probe whose
verdict rule was written before its runs (research/findings.md, "Weight-space interpolation of student and base").

    python -m research.experiments.wise_probe --score      # runs/wise/l6-mpnet/DOMAIN models → research/results/wise/ (per-pair cosines)
    python -m research.experiments.wise_probe              # the study and the verdict, from results/ alone

The runs are k3's command with `--dev none` (queue: the findings entry), so each keeps its last step. `--score`
interpolates every backbone weight, θ_α = α · θ_student + (1 − α) · θ_base, for α in ALPHAS, and keeps the cosine
of every pool pair (6 decimals), after checking that α = 1 reproduces k3's stored last-step cosines (MATCH).
The study draws the cells as `distill_suite --study` does and compares `wise` (the best of α ∈ CHOSEN_AMONG on the
drawn dev set, the choice paid for), `wise-0.5` (α 0.5, no choice) and `best` (k3's stored run: the best of its
evaluations), each decided as the library decides a teacher run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from research.experiments.decision_runs import pool_file
from research.experiments.decision_study import Pool, Run, load_pool, load_run, test_change
from research.experiments.distill_suite import L6, drawn_splits, kept_on_dev, run_folder, teacher_cosines
from research.experiments.domain_data import DOMAINS
from research.experiments.lead_risk import cell_decisions
from research.experiments.stored_runs import computed_or_stored

RUNS = Path("runs/wise/l6-mpnet")
RESULTS = Path("research/results/wise")
DISTILL = Path("research/results/distill")
PAIRING = "l6-mpnet"
ALPHAS = (0.25, 0.5, 0.75, 1.0)
CHOSEN_AMONG = (0.5, 0.75, 1.0)
MATCH = 1e-3  # α = 1 against k3's stored last-step cosines: the same run, or the probe stops


def interpolated_cosines(student_folder: Path, pool: Pool, alpha: float) -> np.ndarray:
    """The pool pairs' cosines under θ_α (the base's encoder with every backbone weight interpolated)."""
    import torch
    from sentadapt.model.encoder import Encoder

    base, student = Encoder.load(L6, device="cpu"), Encoder.load(student_folder, device="cpu")
    mixed = {name: alpha * student.backbone.state_dict()[name] + (1 - alpha) * value
             if value.is_floating_point() else value for name, value in base.backbone.state_dict().items()}
    base.backbone.load_state_dict(mixed)
    texts = sorted({*pool.first, *pool.second})
    vectors = torch.nn.functional.normalize(base.encode(texts, batch_size=128).float(), dim=1)
    index = {text: row for row, text in enumerate(texts)}
    first = vectors[[index[text] for text in pool.first]]
    second = vectors[[index[text] for text in pool.second]]
    return (first * second).sum(dim=1).double().numpy()


def score(runs: Path, results: Path) -> None:
    for domain in DOMAINS:
        pool = load_pool(pool_file(DISTILL / "data", domain))
        k3 = load_run(run_folder(DISTILL, PAIRING, domain, "k3"), PAIRING, domain, "k3")
        assert k3 is not None, f"{domain}: no stored k3 run in {DISTILL}"
        cosines = {alpha: interpolated_cosines(runs / domain, pool, alpha) for alpha in ALPHAS}
        gap = float(np.abs(cosines[1.0] - k3.steps[max(k3.steps)]).max())
        if gap > MATCH:
            raise SystemExit(f"{domain}: α = 1 differs from k3's last step by {gap:.2e} (> {MATCH}): not the same "
                             "run, the probe stops")
        folder = results / PAIRING / domain
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cosines.json").write_text(json.dumps(
            {"alphas": list(ALPHAS), "k3_last_step": max(k3.steps), "alpha_1_vs_k3_last": gap,
             "cosines": {f"{alpha:.2f}": np.round(values, 6).tolist() for alpha, values in cosines.items()}}) + "\n")
        print(f"{domain}: α = 1 within {gap:.1e} of k3's step {max(k3.steps)}", flush=True)


def decided(run: Run, teacher: np.ndarray, pool: Pool, dev_rows: np.ndarray, resamples: int,
            options: list[np.ndarray]) -> tuple[int, bool]:
    """The option adapt would keep on this dev set (the best, the first of equals, its choice paid for, as among a
    run's evaluations) and whether the library uses it in a teacher run."""
    from sentadapt.decision.rule import DecisionRule

    from research.experiments.teacher_led import TEACHER_LED_RISK, teacher_led_rule

    as_run = Run(run.model, run.domain, run.recipe, run.base, dict(enumerate(options)))
    kept = kept_on_dev(as_run, teacher, pool, dev_rows, resamples, 0)
    return kept.step, kept.used(teacher_led_rule(DecisionRule(), kept.lead, TEACHER_LED_RISK))


def study(results: Path, seeds: int, resamples: int) -> dict[str, Any]:
    cells = []
    for domain in DOMAINS:
        pool = load_pool(pool_file(DISTILL / "data", domain))
        k3 = load_run(run_folder(DISTILL, PAIRING, domain, "k3"), PAIRING, domain, "k3")
        assert k3 is not None
        teacher = teacher_cosines(DISTILL, PAIRING, domain, pool)
        stored = json.loads((results / PAIRING / domain / "cosines.json").read_text())
        mixed = {float(alpha): np.asarray(values) for alpha, values in stored["cosines"].items()}
        for size, seed, dev_rows, test in drawn_splits(pool, domain, seeds):
            best = cell_decisions(k3, teacher, pool, dev_rows, test, resamples)
            options = [mixed[alpha] for alpha in CHOSEN_AMONG]
            chosen, used = decided(k3, teacher, pool, dev_rows, resamples, options)
            _, half_used = decided(k3, teacher, pool, dev_rows, resamples, [mixed[0.5]])
            cells.append({
                "domain": domain, "size": size, "seed": seed,
                "best": {"raw": best["raw"], "used": best["used"]["0.40"]},
                "wise": {"alpha": CHOSEN_AMONG[chosen], "used": used,
                         "raw": test_change(pool, test, k3.base, options[chosen])},
                "wise-0.5": {"used": half_used, "raw": test_change(pool, test, k3.base, mixed[0.5])},
                "fixed_raw": {f"{alpha:.2f}": test_change(pool, test, k3.base, values)
                              for alpha, values in mixed.items()}})
    return {"seeds": seeds, "resamples": resamples, "cells": cells, "verdict": verdict(cells)}


def verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule written first: `wise` is worth a feature iff its mean raw Δ ≥ best's + 0.10, captions' raw ≥ best's
    + 0.30, no domain's raw below best's − 0.10, and false use ≤ 5 %."""
    figures: dict[str, Any] = {}
    for name in ("best", "wise", "wise-0.5"):
        losing = [c for c in cells if c[name]["raw"] < 0]
        figures[name] = {
            "raw": float(np.mean([c[name]["raw"] for c in cells])),
            "applied": float(np.mean([c[name]["raw"] if c[name]["used"] else 0.0 for c in cells])),
            "false_use": sum(c[name]["used"] for c in losing) / len(losing) if losing else 0.0,
            "by_domain": {domain: float(np.mean([c[name]["raw"] for c in cells if c["domain"] == domain]))
                          for domain in DOMAINS}}
    best, wise = figures["best"], figures["wise"]
    conditions = {"raw": wise["raw"] >= best["raw"] + 0.10,
                  "captions": wise["by_domain"]["captions"] >= best["by_domain"]["captions"] + 0.30,
                  "domains": all(wise["by_domain"][d] >= best["by_domain"][d] - 0.10 for d in DOMAINS),
                  "false_use": wise["false_use"] <= 0.05}
    fixed = {alpha: {domain: float(np.mean([c["fixed_raw"][alpha] for c in cells if c["domain"] == domain]))
                     for domain in DOMAINS} for alpha in cells[0]["fixed_raw"]}
    return {"figures": figures, "fixed_alpha_raw": fixed, "conditions": conditions,
            "worth_a_feature": all(conditions.values())}


def lines(result: dict[str, Any]) -> list[str]:
    v = result["verdict"]
    out = ["| variant | mean raw Δ | " + " | ".join(DOMAINS) + " | mean applied Δ | false use |",
           "|---|---:|" + "---:|" * len(DOMAINS) + "---:|---:|"]
    for name, f in v["figures"].items():
        out.append(f"| {name} | {f['raw']:+.2f} | " + " | ".join(f"{f['by_domain'][d]:+.2f}" for d in DOMAINS) +
                   f" | {f['applied']:+.2f} | {100 * f['false_use']:.0f} % |")
    out += ["", "| α fixed (no choice) | " + " | ".join(DOMAINS) + " |", "|---:|" + "---:|" * len(DOMAINS)]
    for alpha, by_domain in v["fixed_alpha_raw"].items():
        out.append(f"| {alpha} | " + " | ".join(f"{by_domain[d]:+.2f}" for d in DOMAINS) + " |")
    chosen = [c["wise"]["alpha"] for c in result["cells"]]
    met = ", ".join(f"{name} {'met' if ok else 'not met'}" for name, ok in v["conditions"].items())
    out += ["", "α kept by `wise`: " + ", ".join(f"{a} × {chosen.count(a)}" for a in CHOSEN_AMONG) + ".",
            f"Conditions: {met}; worth a feature: {'yes' if v['worth_a_feature'] else 'no'}."]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--score", action="store_true", help="interpolate the runs' models and store the cosines")
    parser.add_argument("--study", action="store_true", help="recompute the study from research/results/wise")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    if args.score:
        score(RUNS, RESULTS)
    compute = (lambda: study(RESULTS, args.seeds, args.resamples)) if args.score or args.study else None
    print("\n".join(lines(computed_or_stored(RESULTS / "study.json", compute))))


if __name__ == "__main__":
    main()
