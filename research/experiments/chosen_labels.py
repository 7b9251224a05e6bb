"""Chosen labels (issue 58): what a dev set chosen where the models disagree buys the decision, against random pairs.
The rule was written before this study ran: research/findings.md, "Chosen labels (issue 58)".

    python -m research.experiments.chosen_labels --study   # stored runs → research/results/distill/chosen-labels.json (~10 min)
    python -m research.experiments.chosen_labels           # prints the tables from the stored file

Every figure follows from the stored per-pair outputs of the k3e teacher runs (research/results/distill/runs: the pool's
cosines of the base and of every evaluated step), the teacher's pool cosines and the pools' gold scores. The designs
are the product's own (sentadapt/pairs/design.py), the dev Δ, its interval and the decision the product's
evaluator and `decide`; a chosen dev set is read with its weights, as `adapt --dev` and `sentadapt decide` read the
file `pairs --teacher` / `pairs --run` wrote.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np

from research.experiments.decision_study import DevSet, Pool, draw, test_change
from research.experiments.dev_agreement import GAIN, figures
from research.experiments.distill_suite import DEV_200, PATIENCE, kept_on_dev, stored_runs
from research.experiments.domain_data import ALL_DOMAINS, key
from research.experiments.stored_runs import stored_study_main

RESULTS = Path("research/results/distill")
STUDY = "chosen-labels.json"
RUNS = (("l6-mpnet", "k3e"), ("l3-l6", "k3e"))
SIZES = (50, 100, 200)
SEEDS = 20
SHARES = (0.2, 0.3, 0.5)  # the rule's candidates for the design's uniform share
ERROR_SIZE, ERROR_DRAWS, COVERAGE_DRAWS = 100, 300, 100
TIE = 0.01  # within this of the smallest largest ratio, the larger share wins
ARMS = ("random", "before", "after", "random after")
DESIGNS = ("random", "before", "after")


def test_rows(pool: Pool, dev: np.ndarray) -> np.ndarray:
    """The test.jsonl rows of the pool sharing no sentence with a dev pair (as decision_study.draw)."""
    seen = {key(text) for index in dev for text in (pool.first[index], pool.second[index])}
    return np.array([i for i in range(DEV_200, len(pool))
                     if key(pool.first[i]) not in seen and key(pool.second[i]) not in seen], dtype=np.int64)


def generator(*parts: object) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(str(part).encode()) for part in parts])


def pareto_sample(probabilities: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n indices, sorted, drawn without replacement with inclusion probabilities ≈ `probabilities` (Pareto πps): the
    sampler `pairs` used until issue 83 replaced it by a nested one (sequential Poisson sampling), kept here so that
    the studies made with it regenerate their stored draws."""
    uniform = rng.random(len(probabilities))
    with np.errstate(divide="ignore", invalid="ignore"):
        keys = (uniform / (1 - uniform)) * ((1 - probabilities) / probabilities)
    keys[probabilities >= 1.0] = -1.0  # certain pairs first
    return np.sort(np.argsort(keys, kind="stable")[:n])


def chosen(disagreement: np.ndarray, size: int, share: float, rng: np.random.Generator,
           ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, weights) as `pairs --teacher/--run` chose them among the pool's pairs when this study ran (Pareto πps)."""
    from sentadapt.pairs.design import inclusion_probabilities

    probabilities = inclusion_probabilities(disagreement, size, share)
    rows = pareto_sample(probabilities, size, rng)
    return rows, 1.0 / probabilities[rows]


def spearman_change(pool: Pool, rows: np.ndarray, weights: np.ndarray | None, base: np.ndarray,
                    adapted: np.ndarray) -> float:
    dev = DevSet(pool, rows, 0, weights=weights)
    return dev.score(adapted) - dev.score(base)


class Stored:
    """One stored run with the two disagreements the designs read."""

    def __init__(self, stored: Any) -> None:
        from sentadapt.pairs.design import disagreement

        self.pairing, self.domain, self.pool = stored.pairing, stored.domain, stored.pool
        self.run, self.teacher = stored.run, stored.teacher
        self.last = self.run.steps[max(self.run.steps)]
        self.guides = {"before": disagreement(self.run.base, self.teacher),
                       "after": disagreement(self.run.base, self.last)}
        everything = np.arange(len(self.pool))
        self.pool_change = spearman_change(self.pool, everything, None, self.run.base, self.last)

    def rows(self, design: str, size: int, seed: int, share: float, purpose: str) -> tuple[np.ndarray, Any]:
        if design == "random":
            rng = generator(purpose, self.pairing, self.domain, size, seed)
            return np.sort(rng.permutation(len(self.pool))[:size]), None
        return chosen(self.guides[design], size, share, generator(purpose, design, self.pairing, self.domain, size,
                                                                   seed, share))


def errors(runs: list[Stored]) -> dict[str, Any]:
    """RMSE of the last model's dev Δ against its pool Δ at ERROR_SIZE labels, per cell and design (and share)."""
    table: dict[str, dict[str, float]] = {}
    for stored in runs:
        cell: dict[str, float] = {}
        variants = [("random", 0.0)] + [(design, share) for design in ("before", "after") for share in SHARES]
        for design, share in variants:
            estimates = [spearman_change(stored.pool, *stored.rows(design, ERROR_SIZE, seed, share, "error"),
                                         stored.run.base, stored.last) for seed in range(ERROR_DRAWS)]
            name = design if design == "random" else f"{design} {share:g}"
            cell[name] = float(np.sqrt(np.mean((np.asarray(estimates) - stored.pool_change) ** 2)))
        table[f"{stored.pairing}/{stored.domain}"] = cell
        print(f"errors {stored.pairing} {stored.domain}: {cell}", flush=True)
    return table


def ratios(table: dict[str, dict[str, float]], design: str, share: float) -> dict[str, float]:
    return {cell: values[f"{design} {share:g}"] / values["random"] for cell, values in table.items()}


def rule_share(table: dict[str, dict[str, float]]) -> float:
    """The rule: the share whose largest after-design ratio is smallest; within TIE of it, the larger share."""
    worst = {share: max(ratios(table, "after", share).values()) for share in SHARES}
    best = min(worst.values())
    return max(share for share in SHARES if worst[share] <= best + TIE)


def coverage(runs: list[Stored], share: float, resamples: int) -> list[dict[str, Any]]:
    cells = []
    for stored in runs:
        for design in DESIGNS:
            for size in SIZES:
                for seed in range(COVERAGE_DRAWS):
                    rows, weights = stored.rows(design, size, seed, share, "coverage")
                    dev = DevSet(stored.pool, rows, resamples, weights=weights)
                    delta = dev.evaluator.compare_outputs(dev.outputs(stored.run.base), dev.outputs(stored.last))
                    low, high = delta.interval  # type: ignore[misc]
                    cells.append({"pairing": stored.pairing, "domain": stored.domain, "design": design, "size": size,
                                  "seed": seed, "delta": delta.value, "low": low, "high": high,
                                  "covered": bool(low <= stored.pool_change <= high)})
        print(f"coverage {stored.pairing} {stored.domain}: {len(cells)} draws so far", flush=True)
    return cells


def arm_rows(stored: Stored, arm: str, size: int, seed: int, share: float) -> tuple[np.ndarray, Any]:
    """(dev rows, weights) of one decision cell: uniform pairs read unweighted for the random arms (as a user gives
    them), the design's draw with its weights for the others."""
    if arm in ("random", "random after"):
        return draw(stored.pool, size, seed, stored.domain)[0], None
    return stored.rows(arm, size, seed, share, "decision")


def last_evidence(stored: Stored, rows: np.ndarray, weights: Any, resamples: int) -> tuple[Any, Any]:
    """(the last model's paired Δ, its evidence) as `sentadapt decide` weighs it: one option, nothing chosen on
    these labels."""
    from sentadapt.evaluation.evaluator import dev_evidence

    dev = DevSet(stored.pool, rows, resamples, weights=weights)
    base, last = dev.outputs(stored.run.base), dev.outputs(stored.last)
    return dev.evaluator.compare_outputs(base, last), dev_evidence(dev.evaluator, base, [last], 0)


def decided_once(stored: Stored, rows: np.ndarray, weights: Any, resamples: int) -> bool:
    """`sentadapt decide` on the run's last model: used or not under the default rule."""
    from sentadapt.decision.rule import USE_ADAPTED, DecisionRule, decide

    delta, evidence = last_evidence(stored, rows, weights, resamples)
    return decide(delta.value, delta.interval, "dev", evidence, DecisionRule()).decision == USE_ADAPTED


def decisions(runs: list[Stored], share: float, resamples: int) -> list[dict[str, Any]]:
    """Every arm of every cell: used or not, and the raw test Δ of the model it would use."""
    from sentadapt.decision.rule import DecisionRule

    cells = []
    for stored in runs:
        pool, run = stored.pool, stored.run
        for size in SIZES:
            for seed in range(SEEDS):
                for arm in ARMS:
                    rows, weights = arm_rows(stored, arm, size, seed, share)
                    test = test_rows(pool, rows)
                    if arm in ("random", "before"):
                        kept = kept_on_dev(run, stored.teacher, pool, rows, resamples, PATIENCE, weights)
                        used, model = kept.used(DecisionRule()), run.steps[kept.step]
                    else:
                        used, model = decided_once(stored, rows, weights, resamples), stored.last
                    cells.append({"pairing": stored.pairing, "domain": stored.domain, "size": size, "seed": seed,
                                  "arm": arm, "used": used, "raw": test_change(pool, test, run.base, model)})
        print(f"decisions {stored.pairing} {stored.domain}: {len(cells)} cells so far", flush=True)
    return cells


def study(results: Path, resamples: int) -> dict[str, Any]:
    runs = [Stored(stored) for stored in stored_runs(results, RUNS, ALL_DOMAINS, required=True)]
    table = errors(runs)
    share = rule_share(table)
    print(f"the rule's share: {share:g}", flush=True)
    from research.experiments.study_settings import product_settings

    return {"settings": product_settings(), "sizes": list(SIZES), "seeds": SEEDS, "resamples": resamples,
            "shares": list(SHARES),
            "error_draws": ERROR_DRAWS, "coverage_draws": COVERAGE_DRAWS, "share": share,
            "pool_change": {f"{s.pairing}/{s.domain}": s.pool_change for s in runs},
            "errors": table, "coverage": coverage(runs, share, resamples),
            "decisions": decisions(runs, share, resamples)}


def power_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for arm in ARMS:
        for size in result["sizes"]:
            cells = [c for c in result["decisions"] if c["arm"] == arm and c["size"] == size]
            weighed = figures(cells, [c["used"] for c in cells])
            rows.append({"arm": arm, "size": size, "cells": len(cells), "losing": sum(c["raw"] < 0 for c in cells),
                         "gaining": sum(c["raw"] >= GAIN for c in cells), "false_use": weighed["false_use"],
                         "power": weighed["power"], "applied": weighed["applied"]})
    return rows


def pool_oracle_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Not in the rule (read after it): the arms that decide on the last model judged by its Δ over the whole pool,
    the population a chosen dev set's weighted Δ estimates (the committed test rows exclude the chosen pairs, which
    are where the models differ most, so a chosen dev set leaves a test set biased toward agreement)."""
    rows = []
    for arm in ("after", "random after"):
        for size in result["sizes"]:
            cells = [c for c in result["decisions"] if c["arm"] == arm and c["size"] == size]
            truth = [result["pool_change"][f"{c['pairing']}/{c['domain']}"] for c in cells]
            gaining = [c["used"] for c, t in zip(cells, truth) if t >= GAIN]
            losing = [c["used"] for c, t in zip(cells, truth) if t < 0]
            rows.append({"arm": arm, "size": size, "gaining": len(gaining), "losing": len(losing),
                         "power": sum(gaining) / len(gaining), "false_use": sum(losing) / len(losing)})
    return rows


def coverage_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"design": design, "size": size,
             "coverage": float(np.mean([c["covered"] for c in result["coverage"]
                                        if c["design"] == design and c["size"] == size]))}
            for design in DESIGNS for size in result["sizes"]]


def quoted(result: dict[str, Any]) -> dict[str, str]:
    """The figures README.md and docs/decision.md quote, as they print them."""
    share = result["share"]

    def spread(values: list[float], fmt: str, unit: str = "") -> str:
        return f"{fmt.format(min(values))}-{fmt.format(max(values))}{unit}"

    after = [values[f"after {share:g}"] / values["random"] for values in result["errors"].values()]
    before = [values[f"before {share:g}"] / values["random"] for values in result["errors"].values()]
    covered = [100 * row["coverage"] for row in coverage_rows(result)]
    # power judged by the Δ over the whole pool, the population the labels are drawn from (issue 68: the committed
    # test rows exclude the chosen pairs, so they lean toward agreement)
    power = {(row["arm"], row["size"]): row for row in pool_oracle_rows(result)}
    return {
        "after": spread([round(r, 2) for r in after], "{:.2f}", "×"),
        "before": spread([round(r, 2) for r in before], "{:.2f}", "×"),
        "coverage": spread([round(c, 1) for c in covered], "{:.1f}", " %"),
        "saved": f"{round(100 * (1 - max(after)))}-{round(100 * (1 - min(after)))} %",
        "size": str(ERROR_SIZE),
        "chosen": f"{100 * power[('after', ERROR_SIZE)]['power']:.0f} % (chosen)",
        "random": f"{100 * power[('random after', ERROR_SIZE)]['power']:.0f} % (random)",
        "gain": f"{GAIN:+.1f}",
    }


def lines(result: dict[str, Any]) -> list[str]:
    share = result["share"]
    out = [f"Design share (the rule's pick among {', '.join(f'{s:g}' for s in result['shares'])}): {share:g}", "",
           f"RMSE of the dev Δ at {ERROR_SIZE} labels against the pool Δ ({result['error_draws']} draws), and the "
           "ratio to random's:", "",
           "| pairing / domain | pool Δ | random | before | after | before ÷ random | after ÷ random |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for cell, values in result["errors"].items():
        before, after, random = values[f"before {share:g}"], values[f"after {share:g}"], values["random"]
        out.append(f"| {cell} | {result['pool_change'][cell]:+.2f} | {random:.2f} | {before:.2f} | {after:.2f} | "
                   f"{before / random:.2f}× | {after / random:.2f}× |")
    out += ["", "| labels | arm | cells | losing | gaining ≥ +1.0 | false use | power | mean applied Δ |",
            "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in sorted(power_rows(result), key=lambda r: (r["size"], ARMS.index(r["arm"]))):
        out.append(f"| {row['size']} | {row['arm']} | {row['cells']} | {row['losing']} | {row['gaining']} | "
                   f"{100 * row['false_use']:.0f} % | {100 * row['power']:.0f} % | {row['applied']:+.2f} |")
    out += ["", "Judged by the last model's Δ over the whole pool (read after the rule):", "",
            "| labels | arm | gaining ≥ +1.0 | losing | false use | power |", "|---:|---|---:|---:|---:|---:|"]
    for row in sorted(pool_oracle_rows(result), key=lambda r: r["size"]):
        out.append(f"| {row['size']} | {row['arm']} | {row['gaining']} | {row['losing']} | "
                   f"{100 * row['false_use']:.0f} % | {100 * row['power']:.0f} % |")
    out += ["", "| design | " + " | ".join(f"{size} labels" for size in result["sizes"]) + " |",
            "|---|" + "---:|" * len(result["sizes"])]
    covered = coverage_rows(result)
    for design in DESIGNS:
        cells = [row for row in covered if row["design"] == design]
        out.append(f"| {design} | " + " | ".join(f"{100 * row['coverage']:.1f} %" for row in cells) + " |")
    return out


def main() -> None:
    stored_study_main(__doc__, RESULTS, STUDY, lambda args: study(args.results, args.resamples), lines)


if __name__ == "__main__":
    main()
