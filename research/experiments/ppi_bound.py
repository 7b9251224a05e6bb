"""How much the teacher's cosines could add to a teacher run's dev labels, at best (issue 41; the reading:
research/findings.md, "What the teacher's cosines could add to the dev labels", committed before this study).

    python -m research.experiments.ppi_bound --study     # research/results/distill → research/results/distill/ppi-bound.json (~1 min)
    python -m research.experiments.ppi_bound             # prints the verdict and the table from the stored study

Prediction-powered inference (PPI++, Angelopoulos et al. 2023) estimates the student's Δ over the base from n
labelled pairs L and N unlabelled pairs U of the same distribution as Δ(L) − λ·(Δᶠ(L) − Δᶠ(U)), where Δᶠ is the
same Δ with the teacher's cosines in place of the labels. With the best λ its variance is
Var Δ(L) · (1 − ρ² · N / (n + N)), ρ the correlation of Δ(L) and Δᶠ(L) over resamples of L: with unlimited
unlabelled pairs the teacher saves at most a share ρ² of the labels for the same power. ρ needs only the dev pairs.

Cells are drawn and kept as research/experiments/lead_risk.py draws them from the stored k3e runs (both pairings × the 5
domains × 5 split seeds × 100 and 200 dev pairs); only the dev rows are read, never a test pair.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import rankdata

from research.experiments.distill_suite import PAIRINGS, PATIENCE, drawn_splits, kept_on_dev, stored_runs
from research.experiments.domain_data import ALL_DOMAINS
from research.experiments.stored_runs import stored_study_main

RESULTS = Path("research/results/distill")
VARIANT = "k3e"
WORTH_BUILDING = 0.30  # the median ρ² over the cells must reach this (≥ 30 % fewer labels at best) to build PPI


def resampled_spearman(predicted: np.ndarray, gold: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Spearman × 100 of `predicted` against `gold` on each resample (a row of `rows`), ties ranked as their mean."""
    first, second = rankdata(predicted[rows], axis=1), rankdata(gold[rows], axis=1)
    first -= first.mean(axis=1, keepdims=True)
    second -= second.mean(axis=1, keepdims=True)
    return 100 * (first * second).sum(axis=1) / np.sqrt((first ** 2).sum(axis=1) * (second ** 2).sum(axis=1))


def label_teacher_correlation(student: np.ndarray, base: np.ndarray, teacher: np.ndarray, gold: np.ndarray,
                              resamples: int, seed: list[int]) -> dict[str, float]:
    """ρ of the student's Δ over the base against the labels and against the teacher's cosines, over bootstrap
    resamples of the dev pairs (all arrays restricted to them), with both Δ's spread."""
    rows = np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold)))
    labelled = resampled_spearman(student, gold, rows) - resampled_spearman(base, gold, rows)
    teacher_labelled = resampled_spearman(student, teacher, rows) - resampled_spearman(base, teacher, rows)
    rho = float(np.corrcoef(labelled, teacher_labelled)[0, 1])
    return {"rho": rho, "labelled_spread": float(labelled.std()), "teacher_spread": float(teacher_labelled.std())}


def study(results: Path, seeds: int, resamples: int) -> dict[str, Any]:
    cells = []
    for stored in stored_runs(results, [(pairing, VARIANT) for pairing in PAIRINGS], ALL_DOMAINS, required=True):
        for size, seed, dev_rows, _test in drawn_splits(stored.pool, stored.domain, seeds):
            kept = kept_on_dev(stored.run, stored.teacher, stored.pool, dev_rows, resamples, PATIENCE)
            key = [seed, size, zlib.crc32(f"{stored.pairing}/{stored.domain}".encode())]
            cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": size, "seed": seed,
                          "step": kept.step, **label_teacher_correlation(
                              stored.run.steps[kept.step][dev_rows], stored.run.base[dev_rows],
                              stored.teacher[dev_rows], stored.pool.gold[dev_rows], resamples, key)})
        print(f"{stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    return {"variant": VARIANT, "seeds": seeds, "resamples": resamples, "cells": cells, "verdict": verdict(cells)}


def verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The reading written first: PPI is worth building only if the median ρ² over the cells is ≥ WORTH_BUILDING."""
    squared = [cell["rho"] ** 2 for cell in cells]
    median = float(np.median(squared))
    return {"cells": len(cells), "median_rho_squared": median, "max_rho_squared": float(max(squared)),
            "cells_at_or_above": sum(value >= WORTH_BUILDING for value in squared),
            "worth_building": median >= WORTH_BUILDING}


def lines(result: dict[str, Any]) -> list[str]:
    cells, found = result["cells"], result["verdict"]
    out = ["| pairing / domain | mean ρ | mean ρ² (labels saved at best) | spread of the labelled Δ | "
           "the same, at best with PPI |", "|---|---:|---:|---:|---:|"]
    for pairing, domain in dict.fromkeys((cell["pairing"], cell["domain"]) for cell in cells):
        chosen = [cell for cell in cells if (cell["pairing"], cell["domain"]) == (pairing, domain)]
        rho = np.array([cell["rho"] for cell in chosen])
        spread = np.array([cell["labelled_spread"] for cell in chosen])
        best = spread * np.sqrt(1 - rho ** 2)  # N → ∞: Var · (1 − ρ²)
        out.append(f"| {pairing}/{domain} | {rho.mean():.2f} | {100 * (rho ** 2).mean():.0f} % | "
                   f"{spread.mean():.2f} | {best.mean():.2f} |")
    out += ["", f"{found['cells']} cells: median ρ² {100 * found['median_rho_squared']:.0f} %, largest "
                f"{100 * found['max_rho_squared']:.0f} %, {found['cells_at_or_above']} at or above "
                f"{100 * WORTH_BUILDING:.0f} %; worth building: {'yes' if found['worth_building'] else 'no'}."]
    return out


def main() -> None:
    stored_study_main(__doc__, RESULTS, "ppi-bound.json", lambda args: study(args.results, args.seeds, args.resamples),
                      lines, seeds=True)


if __name__ == "__main__":
    main()
