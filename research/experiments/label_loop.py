"""The label-more loop's plan and limit (issue 83), by the rule written before it ran: research/findings.md, "The
label-more loop and its limit (issue 83)".

    python -m research.experiments.label_loop --study   # → research/results/calibration/label-loop.json.gz (~15 min, 2 cores)
    python -m research.experiments.label_loop           # prints the tables from the stored file

Each loop's looks are computed once, as the product computes them — the design's nested draw
(sentadapt/pairs/design.py), the evaluator's Δ, its calibrated SE and the one-option risk of `sentadapt decide` —
at n_1, 2 n_1, … up to the cap, whatever a plan would decide; every plan (sentadapt/decision/sequential.py's spending
functions × α) is then applied to the same looks. Stored: the ten runs of the chosen-labels study, candidates = the
pool (the domain: its finite-population factor applies), arms chosen (the after design) and random (a uniform
nested draw, read unweighted as a user's file). Synthetic two-phase: domains of 30,000 pairs, 2,000 candidates drawn
from each, then the after design (the two-phase variance: no finite-population factor).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import zlib
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from research.experiments.calibration import Population

RESULTS = Path("research/results/calibration")
STUDY = "label-loop.json.gz"
FIRST_SIZES = (50, 100, 200)
STORED_SEEDS = 40
ARMS = ("chosen", "random")
SYNTHETIC_DOMAIN = 30_000
SYNTHETIC_CANDIDATES = 2_000  # 5 × the cap: what `pairs CORPUS --run` proposes
SYNTHETIC_DELTAS = (-0.4, 0.0, 1.0)
SYNTHETIC_LOOPS = 2_000
SYNTHETIC_FIRST = 100
SPENDINGS = ("pocock", "obf", "sqrt")
ALPHAS = (0.05, 0.10, 0.15, 0.20)
LOSS = -0.3  # pool Δ at or below: a loss the rule bounds
FALSE_USE = 0.05
GAIN = 1.0
TIE = 0.01
BOOTSTRAP = 1000
Z95 = 1.959963984540054


def generator(*parts: object) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(str(part).encode()) for part in parts])


# ------------------------------------------------------------------------------------------------ the looks
def looks(population: Population, candidates: np.ndarray, guide: np.ndarray, first: int, finite: bool,
          rng: np.random.Generator, resamples: int, weighted: bool = True) -> list[dict[str, Any]]:
    """Every look of one loop: the nested draw among `candidates` (indices into the population) at first, 2·first,
    … up to the cap, each weighed as `decide` weighs it. `finite`: the candidates are the domain."""
    from sentadapt.config.schema import LABEL_CAP
    from sentadapt.decision.sequential import next_size
    from sentadapt.pairs.design import design_shape, inclusion_probabilities, nested_sample, order_keys

    keys = order_keys(rng.random(len(candidates)), design_shape(guide))
    rows: np.ndarray | None = None
    out = []
    size: int | None = first
    while size is not None and size <= len(candidates):
        probabilities = inclusion_probabilities(guide, size)
        rows = nested_sample(probabilities, keys, size, kept=rows)
        weights = 1.0 / probabilities[rows] if weighted else None
        out.append({"n": size, **weigh(population, candidates[rows], weights, finite, resamples)})
        size = next_size(size) if size < LABEL_CAP else None
    return out


def weigh(population: Population, rows: np.ndarray, weights: np.ndarray | None, finite: bool,
          resamples: int) -> dict[str, Any]:
    """The Δ, its SE, its 95 % interval and the one-option risk, as `sentadapt decide` computes them."""
    from sentadapt.data.pair_files import ScoredPairs
    from sentadapt.evaluation.evaluator import Evaluator, dev_evidence
    from sentadapt.evaluation.sts import ScoredPairsTask

    pairs = ScoredPairs(source="dev.tsv")
    for index in rows:
        pairs.append(f"a{index}", f"b{index}", float(population.gold[index]))
    if weights is not None:
        pairs.weights = [float(weight) for weight in weights]
        pairs.design = finite
    evaluator = Evaluator([ScoredPairsTask("dev.tsv", pairs)], resamples=resamples)
    base = {"dev.tsv": {"cosine": population.base[rows].tolist()}}
    adapted = {"dev.tsv": {"cosine": population.adapted[rows].tolist()}}
    delta = evaluator.compare_outputs(base, adapted)
    evidence = dev_evidence(evaluator, base, [adapted], 0)
    low, high = delta.interval if delta.interval else (float("nan"), float("nan"))
    return {"delta": delta.value, "low": low, "high": high,
            "se": None if evidence is None else evidence.spread, "risk": None if evidence is None else evidence.risk}


# ------------------------------------------------------------------------------------------------ the cells
def stored_populations() -> list[Population]:
    from research.experiments.calibration import stored

    return stored()


def synthetic_domain(target: float) -> Population:
    """A domain of SYNTHETIC_DOMAIN pairs whose Δ is `target` (calibration.synthetic's construction: gold 0-5 with
    ties, the base ρ ≈ 0.8)."""
    from research.experiments.calibration import synthetic

    return synthetic(target, SYNTHETIC_DOMAIN)


def _stored_job(arguments: tuple[int, str, int, int]) -> dict[str, Any]:
    index, arm, first, seed = arguments
    population = _POPULATIONS["stored"][index]
    rng = generator("label loop", population.name, arm, first, seed)
    everything = np.arange(len(population.gold))
    guide = population.guides["after"] if arm == "chosen" else np.zeros(len(everything))
    path = looks(population, everything, guide, first, True, rng, _RESAMPLES[0], weighted=arm == "chosen")
    return {"population": population.name, "arm": arm, "first": first, "seed": seed, "looks": path}


def _synthetic_job(arguments: tuple[float, int, int]) -> list[dict[str, Any]]:
    from sentadapt.pairs.design import disagreement

    target, start, stop = arguments
    population = _POPULATIONS["synthetic"][target]
    out = []
    for seed in range(start, stop):
        rng = generator("label loop synthetic", target, seed)
        candidates = np.sort(rng.choice(len(population.gold), SYNTHETIC_CANDIDATES, replace=False))
        guide = disagreement(population.base[candidates], population.adapted[candidates])
        path = looks(population, candidates, guide, SYNTHETIC_FIRST, False, rng, _RESAMPLES[0])
        out.append({"population": population.name, "target": target, "seed": seed, "looks": path})
    return out


_POPULATIONS: dict[str, Any] = {}
_RESAMPLES = [400]


def _load(resamples: int) -> None:
    _RESAMPLES[0] = resamples
    _POPULATIONS["stored"] = stored_populations()
    _POPULATIONS["synthetic"] = {target: synthetic_domain(target) for target in SYNTHETIC_DELTAS}


def study(workers: int, resamples: int) -> dict[str, Any]:
    _load(resamples)
    stored_jobs = [(index, arm, first, seed) for index in range(len(_POPULATIONS["stored"])) for arm in ARMS
                   for first in FIRST_SIZES for seed in range(STORED_SEEDS)]
    synthetic_jobs = [(target, start, min(SYNTHETIC_LOOPS, start + 50)) for target in SYNTHETIC_DELTAS
                      for start in range(0, SYNTHETIC_LOOPS, 50)]
    with ProcessPoolExecutor(workers, initializer=_load, initargs=(resamples,)) as pool:
        stored_loops = list(pool.map(_stored_job, stored_jobs, chunksize=8))
        print(f"label loop: {len(stored_loops)} stored loops", flush=True)
        synthetic_loops = [loop for part in pool.map(_synthetic_job, synthetic_jobs) for loop in part]
    truth = {p.name: p.delta for p in _POPULATIONS["stored"]}
    truth.update({p.name: p.delta for p in _POPULATIONS["synthetic"].values()})
    return {"first_sizes": list(FIRST_SIZES), "stored_seeds": STORED_SEEDS, "synthetic_loops": SYNTHETIC_LOOPS,
            "synthetic_domain": SYNTHETIC_DOMAIN, "synthetic_candidates": SYNTHETIC_CANDIDATES,
            "resamples": resamples, "truth": truth, "stored": stored_loops, "synthetic": synthetic_loops}


# ------------------------------------------------------------------------------------------------ the plans
def plans() -> Iterator[tuple[str, float]]:
    for spending in SPENDINGS:
        for alpha in ALPHAS:
            yield spending, alpha


_LIMITS: dict[tuple[str, float, tuple[int, ...]], float] = {}


def pocock(alpha: float, t: float) -> float:
    """Pocock-type spending (Lan & DeMets 1983): α ln(1 + (e − 1) t)."""
    return alpha * math.log(1 + (math.e - 1) * t)


def obf(alpha: float, t: float) -> float:
    """O'Brien-Fleming-type spending: 2 − 2 Φ(z_{1 − α/2} / √t)."""
    normal = NormalDist()
    return 2 - 2 * normal.cdf(normal.inv_cdf(1 - alpha / 2) / math.sqrt(t)) if t > 0 else 0.0


def spending_function(name: str) -> Any:
    """The rule's three candidates: the product keeps the one it picked (sentadapt/decision/sequential.py)."""
    from sentadapt.decision.sequential import sqrt_spending

    return {"pocock": pocock, "obf": obf, "sqrt": sqrt_spending}[name]


def limit(spending: str, alpha: float, sizes: tuple[int, ...]) -> float:
    from sentadapt.decision.sequential import nominal_limits

    key = (spending, alpha, sizes)
    if key not in _LIMITS:
        _LIMITS[key] = nominal_limits(sizes, alpha, spending_function(spending))[-1]
    return _LIMITS[key]


def run_loop(path: list[dict[str, Any]], spending: str, alpha: float, loop: bool = True) -> tuple[bool, int]:
    """(used, labels) of one loop under a plan, as decision/sequential.Look decides each look (`loop` False: the
    first look alone, a user who labels no more)."""
    from sentadapt.decision.sequential import FUTILITY_RISK

    sizes: tuple[int, ...] = ()
    for index, look in enumerate(path):
        sizes = (*sizes, look["n"])
        risk = look["risk"]
        last = not loop or index == len(path) - 1
        if risk is not None and look["delta"] > 0 and risk <= limit(spending, alpha, sizes):
            return True, look["n"]
        if last or risk is None or risk > FUTILITY_RISK:
            return False, look["n"]
    return False, sizes[-1] if sizes else 0


_MEMO: dict[tuple[Any, ...], tuple[Any, Any]] = {}  # (what was asked, the result's id) → (the result, its answer):
# a table reads each plan's loops several times, and a plan is 2,400 + 6,000 loops decided in Python


def _remembered(asked: tuple[Any, ...], result: dict[str, Any], compute: Any) -> Any:
    """The answer for this very result (held with it, so another result at the same id is never given it)."""
    key = (*asked, id(result))
    if key not in _MEMO or _MEMO[key][0] is not result:
        _MEMO[key] = (result, compute())
    return _MEMO[key][1]


def outcomes(result: dict[str, Any], spending: str, alpha: float, loop: bool = True) -> list[dict[str, Any]]:
    """Every stored loop under the plan: used, labels, its pool Δ."""
    return _remembered(("outcomes", spending, alpha, loop), result, lambda: _outcomes(result, spending, alpha, loop))


def _outcomes(result: dict[str, Any], spending: str, alpha: float, loop: bool) -> list[dict[str, Any]]:
    truth = result["truth"]
    out = []
    for entry in result["stored"]:
        used, labels = run_loop(entry["looks"], spending, alpha, loop)
        out.append({"population": entry["population"], "arm": entry["arm"], "first": entry["first"],
                    "seed": entry["seed"], "used": used, "labels": labels, "truth": truth[entry["population"]]})
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    losing = [row["used"] for row in rows if row["truth"] <= LOSS]
    gaining = [row for row in rows if row["truth"] >= GAIN]
    return {"loops": len(rows), "losing": len(losing), "gaining": len(gaining),
            "false_use": float(np.mean(losing)) if losing else 0.0,
            "power": float(np.mean([row["used"] for row in gaining])) if gaining else 0.0,
            "labels_at_gain": float(np.mean([row["labels"] for row in gaining])) if gaining else 0.0,
            "labels": float(np.mean([row["labels"] for row in rows])) if rows else 0.0,
            "applied": float(np.mean([row["truth"] * row["used"] for row in rows])) if rows else 0.0}


def synthetic_use(result: dict[str, Any], spending: str, alpha: float) -> dict[str, dict[str, float]]:
    """Per synthetic domain Δ: the share of its loops that used the model, its Monte-Carlo SE, the mean labels."""
    return _remembered(("synthetic", spending, alpha), result, lambda: _synthetic_use(result, spending, alpha))


def _synthetic_use(result: dict[str, Any], spending: str, alpha: float) -> dict[str, dict[str, float]]:
    out = {}
    for target in SYNTHETIC_DELTAS:
        loops = [entry for entry in result["synthetic"] if entry["target"] == target]
        ran = [run_loop(entry["looks"], spending, alpha) for entry in loops]
        rate = float(np.mean([used for used, _ in ran])) if ran else 0.0
        out[f"{target:+.1f}"] = {"loops": len(ran), "used": rate,
                                 "mc_se": float(np.sqrt(rate * (1 - rate) / max(1, len(ran)))),
                                 "labels": float(np.mean([labels for _, labels in ran])) if ran else 0.0}
    return out


def admissible(result: dict[str, Any], spending: str, alpha: float, rows: list[dict[str, Any]]) -> bool:
    """The rule's bounds: losses (pool Δ ≤ −0.3) used ≤ 5 % at each first size (the chosen arm: the loop's), and
    synthetic Δ = 0 used at most α + 2 Monte-Carlo SE."""
    for first in result["first_sizes"]:
        if summary([row for row in rows if row["first"] == first])["false_use"] > FALSE_USE:
            return False
    null = synthetic_use(result, spending, alpha)["+0.0"]
    return null["used"] <= alpha + 2 * null["mc_se"]


def pick(result: dict[str, Any], rows_of: dict[tuple[str, float], list[dict[str, Any]]],
         allowed: dict[tuple[str, float], bool]) -> tuple[str, float] | None:
    """The admissible plan with the largest mean applied pool Δ; within TIE, fewer mean labels, then the smaller α."""
    scored = {plan: summary(rows) for plan, rows in rows_of.items() if allowed[plan]}
    if not scored:
        return None
    best = max(score["applied"] for score in scored.values())
    near = [plan for plan, score in scored.items() if score["applied"] >= best - TIE]
    return min(near, key=lambda plan: (scored[plan]["labels"], plan[1]))


def chosen_rows(result: dict[str, Any], spending: str, alpha: float) -> list[dict[str, Any]]:
    return [row for row in outcomes(result, spending, alpha) if row["arm"] == "chosen"]


def verdict(result: dict[str, Any]) -> dict[str, Any]:
    """The rule's pick, its stability over bootstrap resamples of the stored loops, and the figures read after
    (computed once per stored result)."""
    return _remembered(("verdict",), result, lambda: _verdict(result))


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    rows_of = {plan: chosen_rows(result, *plan) for plan in plans()}
    allowed = {plan: admissible(result, *plan, rows_of[plan]) for plan in plans()}
    winner = pick(result, rows_of, allowed)
    picks = _bootstrap_picks(result, rows_of, allowed)
    name = "none" if winner is None else f"{winner[0]} {winner[1]:g}"
    stable = picks.get(name, 0) / BOOTSTRAP
    default = winner if stable >= 0.8 or winner is None else _plan(max(picks, key=lambda key: picks[key]))
    return {"pick": None if winner is None else list(winner), "stability": stable, "picks": picks,
            "default": None if default is None else list(default),
            "admissible": {f"{s} {a:g}": ok for (s, a), ok in allowed.items()}}


def _bootstrap_picks(result: dict[str, Any], rows_of: dict[tuple[str, float], list[dict[str, Any]]],
                     allowed: dict[tuple[str, float], bool]) -> dict[str, int]:
    """The rule's pick (the admissible plan with the largest mean applied Δ; within TIE, fewer labels, then the smaller
    α) on BOOTSTRAP resamples of the stored loops: runs drawn with replacement, then seeds within each run."""
    first = next(iter(rows_of.values()))
    populations = sorted({row["population"] for row in first})
    position = {(row["population"], row["first"], row["seed"]): index for index, row in enumerate(first)}
    plans_in = [plan for plan in rows_of if allowed[plan]]
    applied = np.array([[row["truth"] * row["used"] for row in rows_of[plan]] for plan in plans_in])
    labels = np.array([[row["labels"] for row in rows_of[plan]] for plan in plans_in], dtype=np.float64)
    assert all([(row["population"], row["first"], row["seed"]) for row in rows_of[plan]]
               == [(row["population"], row["first"], row["seed"]) for row in first] for plan in plans_in)
    rng = np.random.default_rng(83)
    picks: dict[str, int] = {}
    for _ in range(BOOTSTRAP):
        drawn = rng.choice(populations, len(populations), replace=True)
        seeds = {name: rng.integers(0, result["stored_seeds"], result["stored_seeds"]) for name in sorted(set(drawn))}
        rows = np.array([position[(name, size, int(seed))] for name in drawn for size in result["first_sizes"]
                         for seed in seeds[name]])
        if not plans_in:
            picks["none"] = picks.get("none", 0) + 1
            continue
        means, counts = applied[:, rows].mean(axis=1), labels[:, rows].mean(axis=1)
        near = [index for index in range(len(plans_in)) if means[index] >= means.max() - TIE]
        spending, alpha = plans_in[min(near, key=lambda index: (counts[index], plans_in[index][1]))]
        label = f"{spending} {alpha:g}"
        picks[label] = picks.get(label, 0) + 1
    return picks


def _plan(label: str) -> tuple[str, float] | None:
    if label == "none":
        return None
    spending, alpha = label.split()
    return spending, float(alpha)


def coverage(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The first looks' 95 % intervals at n = 100 and 200: of the pool Δ (stored, chosen and random arms) and of the
    domain Δ (synthetic two-phase, each Δ), with the Monte-Carlo SE."""
    truth = result["truth"]
    rows = []
    for size in (100, 200):
        for arm in ARMS:
            hits = [look["low"] <= truth[entry["population"]] <= look["high"] for entry in result["stored"]
                    if entry["arm"] == arm for look in entry["looks"] if look["n"] == size]
            rows.append(_coverage_row("stored", arm, size, hits))
        for target in SYNTHETIC_DELTAS:
            hits = [look["low"] <= truth[entry["population"]] <= look["high"] for entry in result["synthetic"]
                    if entry["target"] == target for look in entry["looks"] if look["n"] == size]
            rows.append(_coverage_row(f"two-phase {target:+.1f}", "chosen", size, hits))
    return rows


def _coverage_row(cells: str, arm: str, size: int, hits: list[bool]) -> dict[str, Any]:
    rate = float(np.mean(hits)) if hits else float("nan")
    return {"cells": cells, "arm": arm, "n": size, "draws": len(hits), "coverage": rate,
            "mc_se": float(np.sqrt(rate * (1 - rate) / max(1, len(hits))))}


# ------------------------------------------------------------------------------------------------ the tables
def lines(result: dict[str, Any]) -> list[str]:
    decided = verdict(result)
    out = [f"The rule's pick: {_named(decided['pick'])} (the same pick in {100 * decided['stability']:.0f} % of "
           f"{BOOTSTRAP} bootstrap resamples of the stored loops); the default: {_named(decided['default'])}", "",
           "| plan | admissible | loops | losing | false use | gaining ≥ +1.0 | power | labels at +1.0 | mean labels "
           "| mean applied Δ | first look alone: power at n₁ = 100 | synthetic Δ = 0 used | Δ = −0.4 used | "
           "Δ = +1.0 used |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for spending, alpha in plans():
        rows = chosen_rows(result, spending, alpha)
        whole = summary(rows)
        alone = summary([row for row in outcomes(result, spending, alpha, loop=False)
                         if row["arm"] == "chosen" and row["first"] == 100])
        synthetic = synthetic_use(result, spending, alpha)
        ok = decided["admissible"][f"{spending} {alpha:g}"]
        out.append(f"| {spending} {alpha:.2f} | {'yes' if ok else 'no'} | {whole['loops']} | {whole['losing']} | "
                   f"{100 * whole['false_use']:.1f} % | {whole['gaining']} | {100 * whole['power']:.0f} % | "
                   f"{whole['labels_at_gain']:.0f} | {whole['labels']:.0f} | {whole['applied']:+.3f} | "
                   f"{100 * alone['power']:.0f} % | " + " | ".join(
                       f"{100 * synthetic[key]['used']:.1f} ± {100 * synthetic[key]['mc_se']:.1f} %"
                       for key in ("+0.0", "-0.4", "+1.0")) + " |")
    out += ["", "Per first look (the default plan; chosen arm, then random labels read unweighted):", "",
            "| arm | n₁ | loops | false use | power | labels at +1.0 | mean applied Δ |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    default = decided["default"] or ["sqrt", 0.1]
    every = outcomes(result, default[0], default[1])
    for arm in ARMS:
        for first in result["first_sizes"]:
            part = summary([row for row in every if row["arm"] == arm and row["first"] == first])
            out.append(f"| {arm} | {first} | {part['loops']} | {100 * part['false_use']:.1f} % | "
                       f"{100 * part['power']:.0f} % | {part['labels_at_gain']:.0f} | {part['applied']:+.3f} |")
    out += ["", "Coverage of the first looks' 95 % intervals (the pool Δ; the domain Δ for the two-phase cells):", "",
            "| cells | arm | n | draws | coverage |", "|---|---|---:|---:|---:|"]
    for row in coverage(result):
        out.append(f"| {row['cells']} | {row['arm']} | {row['n']} | {row['draws']} | "
                   f"{100 * row['coverage']:.1f} ± {100 * row['mc_se']:.1f} % |")
    return out


def doc_lines(result: dict[str, Any]) -> list[str]:
    """What docs/decision.md quotes: the default plan's loops per first look (the chosen design), and the synthetic
    domains' use rates, at the product's default (research/tests/test_label_loop.py holds the product to the pick)."""
    from sentadapt.config.schema import DEFAULT_RISK, DEFAULT_SPENDING

    every = outcomes(result, DEFAULT_SPENDING, DEFAULT_RISK)
    alone = outcomes(result, DEFAULT_SPENDING, DEFAULT_RISK, loop=False)
    out = ["| first look | loops | gains ≥ +1.0 used (the first look alone) | labels at a gain | losses ≤ −0.3 used |",
           "|---:|---:|---:|---:|---:|"]
    for first in result["first_sizes"]:
        part = summary([row for row in every if row["arm"] == "chosen" and row["first"] == first])
        single = summary([row for row in alone if row["arm"] == "chosen" and row["first"] == first])
        out.append(f"| {first} labels | {part['loops']} | {100 * part['power']:.0f} % ({100 * single['power']:.0f} %) | "
                   f"{part['labels_at_gain']:.0f} | {100 * part['false_use']:.1f} % |")
    synthetic = synthetic_use(result, DEFAULT_SPENDING, DEFAULT_RISK)
    out += ["", f"A synthetic domain of {SYNTHETIC_DOMAIN:,} pairs, {SYNTHETIC_CANDIDATES:,} candidates drawn from it, "
                f"first look at {SYNTHETIC_FIRST} labels ({SYNTHETIC_LOOPS:,} loops each): a domain Δ of exactly +1.0 "
                f"used in {100 * synthetic['+1.0']['used']:.0f} % of loops, a Δ of 0 in "
                f"{100 * synthetic['+0.0']['used']:.1f} % (the limit: {100 * DEFAULT_RISK:.0f} %), a Δ of −0.4 in "
                f"{100 * synthetic['-0.4']['used']:.1f} %."]
    return out


def _named(plan: list[Any] | None) -> str:
    return "none" if plan is None else f"{plan[0]} spending at α = {plan[1]:g}"


def read(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))


def write(path: Path, result: dict[str, Any]) -> None:
    """The study as gzip-compressed JSON (mtime 0: the same study gives the same bytes), atomically."""
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_bytes(gzip.compress(json.dumps(result).encode("utf-8"), mtime=0))
    tmp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="store_true", help="compute the loops (~15 min on 2 cores)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--resamples", type=int, default=400)
    args = parser.parse_args()
    path = RESULTS / STUDY
    if args.study:
        result = study(args.workers, args.resamples)
        write(path, result)
    print("\n".join(lines(read(path))))


if __name__ == "__main__":
    main()
