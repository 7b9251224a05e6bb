"""Calibrated intervals (issue 68): which standard error of a dev Δ covers at its nominal 95 %.
The rule was written before this study ran: research/findings.md, "Calibrated intervals and risk (issue 68)".

    python -m research.experiments.calibration --study   # → research/results/calibration/coverage.json.gz (~10 min, 2 cores)
    python -m research.experiments.calibration           # prints the tables from the stored file

Candidates: A, the product's paired percentile bootstrap as it was (1,000 resamples); B, the delete-one jackknife
with the design factor; C, the infinitesimal jackknife (the empirical influence function) with the same factor — the
rule's pick, now sentadapt/evaluation/variance.py. B and C give Δ ± 1.96 SE. Cells: synthetic finite pools with a set pool Δ (uniform and chosen designs)
and the ten stored (pairing, domain) cells of the chosen-labels study (uniform, before, after), n = 50/100/200;
truth = the Δ over the whole pool. Every draw's three intervals are stored (per-draw outputs), so every figure
regenerates from the file.
"""

from __future__ import annotations

import argparse
import json
import zlib
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path("research/results/calibration")
STUDY = "coverage.json.gz"  # every draw's Δ, SEs and interval, gzip-compressed JSON (~3 MB)
SIZES = (50, 100, 200)
DRAWS = 3000  # per cell: a coverage's Monte-Carlo SE is √(0.95 · 0.05 / 3000) ≈ 0.4 points
SYNTHETIC_POOL = 1000
SYNTHETIC_DELTAS = (0.0, 1.0)  # pool Δ, Spearman × 100
RESAMPLES = 1000
Z95 = 1.959963984540054
CANDIDATES = ("A", "B", "C")
BAND = (0.94, 0.96)


@dataclass
class Population:
    """A finite pool: gold scores, the base's and the adapted model's cosines, and its Δ (× 100)."""

    name: str
    gold: np.ndarray
    base: np.ndarray
    adapted: np.ndarray
    guides: dict[str, np.ndarray]  # design → the disagreement it is drawn by

    @property
    def delta(self) -> float:
        return 100 * (_spearman(self.adapted, self.gold) - _spearman(self.base, self.gold))


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def generator(*parts: object) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(str(part).encode()) for part in parts])


def synthetic(target: float, size: int = SYNTHETIC_POOL) -> Population:
    """Gold 0-5 from a latent z; the base ranks like a sentence-tuned model (ρ ≈ 0.8 with gold); the adapted model is
    the base moved toward z by t and away by fresh noise (0.3): t solved so that the pool Δ is `target`."""
    from sentadapt.pairs.design import disagreement

    rng = generator("synthetic", target, size)
    z = rng.normal(size=size)
    gold = np.clip(np.round(1.2 * z + 2.5), 0, 5)
    base = z + rng.normal(scale=0.6, size=size)
    noise = rng.normal(scale=0.3, size=size)

    def delta(t: float) -> float:
        return 100 * (_spearman(base + t * (z - base) + noise, gold) - _spearman(base, gold))

    low, high = -0.5, 1.0
    for _ in range(60):  # bisection: Δ(t) rises with t
        middle = (low + high) / 2
        low, high = (middle, high) if delta(middle) < target else (low, middle)
    adapted = base + (low + high) / 2 * (z - base) + noise
    return Population(f"synthetic Δ {target:+.1f}", gold, base, adapted,
                      {"chosen": disagreement(base, adapted)})


def stored() -> list[Population]:
    from research.experiments.chosen_labels import RUNS, Stored
    from research.experiments.distill_suite import stored_runs
    from research.experiments.domain_data import ALL_DOMAINS

    runs = [Stored(s) for s in stored_runs(Path("research/results/distill"), RUNS, ALL_DOMAINS, required=True)]
    return [Population(f"{run.pairing}/{run.domain}", run.pool.gold, run.run.base, run.last, run.guides)
            for run in runs]


def draw(population: Population, design: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, weights, inclusion probabilities) of one dev set: uniform (π = n/M) or chosen by a guide's
    disagreement, as `pairs` draws them."""
    from sentadapt.pairs.design import UNIFORM_SHARE, inclusion_probabilities

    from research.experiments.chosen_labels import pareto_sample  # the sampler `pairs` used when this study ran

    rng = generator(population.name, design, size, seed)
    count = len(population.gold)
    if design == "uniform":
        rows = np.sort(rng.permutation(count)[:size])
        probabilities = np.full(size, size / count)
    else:
        everything = inclusion_probabilities(population.guides[design], size, UNIFORM_SHARE)
        rows = pareto_sample(everything, size, rng)
        probabilities = everything[rows]
    return rows, 1.0 / probabilities, probabilities


def intervals(population: Population, rows: np.ndarray, weights: np.ndarray, inclusion: np.ndarray,
              seed: int) -> dict[str, Any]:
    """The weighted Δ (× 100) and each candidate's 95 % interval."""
    from sentadapt.evaluation import bootstrap, weighted_stats
    from sentadapt.evaluation.variance import influence_se, influence_values

    gold, base, adapted = population.gold[rows], population.base[rows], population.adapted[rows]
    groups = weighted_stats.TieGroups(gold)
    base_groups, adapted_groups = weighted_stats.TieGroups(base), weighted_stats.TieGroups(adapted)

    def delta(counts: np.ndarray) -> np.ndarray:
        weighted = counts * weights
        return 100 * (weighted_stats.weighted_spearman(weighted, adapted_groups, groups)
                      - weighted_stats.weighted_spearman(weighted, base_groups, groups))

    size = len(rows)
    value = float(delta(np.ones((1, size)))[0])
    replicates = bootstrap.replicate(size, RESAMPLES, bootstrap.task_seed(population.name, seed), {"d": delta})["d"]
    low_a, high_a = bootstrap.interval(replicates)
    se_b = jackknife_se(delta, value, size, weights, inclusion)
    se_c = influence_se(influence_values(size, {"d": delta})["d"], size, inclusion)  # the product's (C won)
    return {"delta": value, "A": [low_a, high_a], "se_A": float(np.std(replicates, ddof=1)),
            "se_B": se_b, "se_C": se_c}


def jackknife_se(statistic: Any, value: float, size: int, weights: np.ndarray, inclusion: np.ndarray) -> float:
    """Candidate B: the delete-one jackknife with the design factor (Berger & Skinner 2005),
    V = n/(n−1) Σ (1 − π_i)(ε_i − ε̄)², ε_i = (1 − w̃_i)(θ̂ − θ̂₍ᵢ₎)."""
    deleted = statistic(1.0 - np.eye(size))
    effects = (1.0 - weights / weights.sum()) * (value - deleted)
    factor = 1.0 - np.clip(inclusion, 0.0, 1.0)
    return float(np.sqrt(size / (size - 1) * np.sum(factor * (effects - effects.mean()) ** 2)))


def cells(populations: list[Population]) -> Iterator[tuple[str, str, int]]:
    for population in populations:
        designs = ["uniform", "chosen"] if population.name.startswith("synthetic") else ["uniform", "before", "after"]
        for design in designs:
            for size in SIZES:
                yield population.name, design, size


def _run_cell(arguments: tuple[str, str, int, int, int]) -> list[dict[str, Any]]:
    name, design, size, first, last = arguments
    population = _POPULATIONS[name]
    out = []
    for seed in range(first, last):
        rows, weights, inclusion = draw(population, design, size, seed)
        out.append({"population": name, "design": design, "size": size, "seed": seed,
                    **intervals(population, rows, weights, inclusion, seed)})
    return out


_POPULATIONS: dict[str, Population] = {}


def _load() -> None:
    for population in [synthetic(target) for target in SYNTHETIC_DELTAS] + stored():
        _POPULATIONS[population.name] = population


def study(workers: int) -> dict[str, Any]:
    _load()
    populations = list(_POPULATIONS.values())
    stored_count = sum(not p.name.startswith("synthetic") for p in populations)
    jobs = []
    for name, design, size in cells(populations):
        draws = DRAWS if name.startswith("synthetic") else DRAWS // stored_count
        jobs += [(name, design, size, start, min(draws, start + 100)) for start in range(0, draws, 100)]
    with ProcessPoolExecutor(workers, initializer=_load) as pool:
        draws_out = [row for part in pool.map(_run_cell, jobs) for row in part]
    return {"sizes": list(SIZES), "draws": DRAWS, "resamples": RESAMPLES,
            "truth": {p.name: p.delta for p in populations}, "draws_out": draws_out}


def covered(row: dict[str, Any], truth: float, candidate: str) -> bool:
    if candidate == "A":
        low, high = row["A"]
    else:
        se = row[f"se_{candidate}"]
        low, high = row["delta"] - Z95 * se, row["delta"] + Z95 * se
    return bool(low <= truth <= high)


def coverage_table(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (kind, design, size): each candidate's coverage with its Monte-Carlo SE, and the mean SE ratio
    to the RMSE against the truth."""
    keyed: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in result["draws_out"]:
        kind = "synthetic " + row["population"].split()[-1] if row["population"].startswith("synthetic") else "stored"
        keyed.setdefault((kind, row["design"], row["size"]), []).append(row)
    table = []
    for (kind, design, size), rows in sorted(keyed.items()):
        truths = np.array([result["truth"][row["population"]] for row in rows])
        errors = np.array([row["delta"] for row in rows]) - truths
        rmse = float(np.sqrt(np.mean(errors ** 2)))
        entry: dict[str, Any] = {"kind": kind, "design": design, "size": size, "draws": len(rows), "rmse": rmse,
                                 "bias": float(errors.mean())}
        for candidate in CANDIDATES:
            hits = np.array([covered(row, truth, candidate) for row, truth in zip(rows, truths)])
            entry[candidate] = float(hits.mean())
            entry[f"mc_{candidate}"] = float(np.sqrt(hits.mean() * (1 - hits.mean()) / len(hits)))
            entry[f"ratio_{candidate}"] = float(np.mean([row[f"se_{candidate}"] for row in rows]) / rmse)
        table.append(entry)
    return table


def rule_pick(table: list[dict[str, Any]]) -> str:
    """The rule: most cells within the band; then the smaller mean |coverage − 95 %|; then B before C (A last)."""
    def score(candidate: str) -> tuple[int, float, int]:
        inside = sum(BAND[0] <= row[candidate] <= BAND[1] for row in table)
        distance = float(np.mean([abs(row[candidate] - 0.95) for row in table]))
        return -inside, distance, "BCA".index(candidate)

    return min(CANDIDATES, key=score)


def lines(result: dict[str, Any]) -> list[str]:
    table = coverage_table(result)
    out = [f"The rule's pick: {rule_pick(table)}", "",
           "| cells | design | n | draws | A (bootstrap) | B (design jackknife) | C (influence) | SE ÷ RMSE: A / B / C |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in table:
        shown = [f"{100 * row[c]:.1f} ± {100 * row[f'mc_{c}']:.1f} %" for c in CANDIDATES]
        ratios = " / ".join(f"{row[f'ratio_{c}']:.2f}" for c in CANDIDATES)
        out.append(f"| {row['kind']} | {row['design']} | {row['size']} | {row['draws']} | " + " | ".join(shown)
                   + f" | {ratios} |")
    inside = {c: sum(BAND[0] <= row[c] <= BAND[1] for row in table) for c in CANDIDATES}
    out += ["", "Cells within 94-96 %: " + ", ".join(f"{c} {inside[c]} of {len(table)}" for c in CANDIDATES)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="store_true", help="run the study and store it")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.study:
        RESULTS.mkdir(parents=True, exist_ok=True)
        store(study(args.workers))
    print("\n".join(lines(load())))


def rounded(value: Any) -> Any:
    """Floats to 6 decimals (a coverage reads intervals of width ≥ 0.1): the stored file stays small."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def store(result: dict[str, Any]) -> None:
    import gzip

    with gzip.open(RESULTS / STUDY, "wt", encoding="utf-8") as handle:
        json.dump(rounded(result), handle, separators=(",", ":"))


def load() -> dict[str, Any]:
    import gzip

    with gzip.open(RESULTS / STUDY, "rt", encoding="utf-8") as handle:
        return json.load(handle)


if __name__ == "__main__":
    main()


def reading(result: dict[str, Any]) -> list[str]:
    """The figures research/findings.md's reading quotes, as it prints them."""
    table = coverage_table(result)

    def spread(values: list[float], fmt: str) -> str:
        return f"{fmt.format(min(values))}-{fmt.format(max(values))}"

    def at(size: int, key: str) -> list[float]:
        return [row[key] for row in table if row["size"] == size]

    inside = [row for row in table if BAND[0] <= row["C"] <= BAND[1]]
    return [f"the bootstrap's SE was {spread([row['ratio_A'] for row in table], '{:.2f}')}× the true error",
            f"C's is {spread([row['ratio_C'] for row in table], '{:.2f}')}×",
            f"C covers within the band in {len(inside)} of the {len(table)} cells",
            f"at n = 100 it covers {spread([100 * v for v in at(100, 'C')], '{:.1f}')} %, at n = 50 "
            f"{spread([100 * v for v in at(50, 'C')], '{:.1f}')} % (the bootstrap: "
            f"{spread([100 * row['A'] for row in table], '{:.1f}')} % everywhere)",
            f"{spread(at(200, 'ratio_C'), '{:.2f}')} at n = 200, {spread(at(50, 'ratio_C'), '{:.2f}')} at n = 50",
            f"no cell covers below {100 * min(row['C'] for row in table):.1f} %"]
