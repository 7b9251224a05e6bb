"""The decision study: what each use/keep rule hands the user on the domain suite, and the power of a dev set.

    python -m research.experiments.decision_runs                    # the runs (per-pair outputs of every evaluated step)
    python -m research.experiments.decision_study --store           # their outputs → research/results/decision (tracked)
    python -m research.experiments.decision_study                   # re-draw, decide, score (research/results/decision/study.json);
                                                           # render research/results.md and docs/evaluation.md
    python -m research.experiments.decision_study --render          # only re-render from research/results/decision/study.json

**What is tracked** (issue 41, item 6): per run, research/results/decision/runs/MODEL/DOMAIN/RECIPE/ holds dev_outputs.json
(the pool's cosines at every evaluated step, rounded: research/experiments/stored_runs.py), metrics.json and job.json; the
pools are research/results/distill/data's (the same split, research/experiments/domain_data.py --seed 0; `--store` refuses runs made
on another). The study and both sections follow from those files alone.

**Re-drawn splits.** For each domain the pool is the 1,000-odd pairs no run trained on (dev-200 + test of
research/experiments/domain_data.py --seed 0); every run of research/experiments/decision_runs.py scored the whole pool at steps 0
(the base model), 25, 50, 75 and 100. A split seed draws DEV pairs (100 or 200) at random from the pool; the test pairs
are the rest of the pool minus every pair sharing a sentence with a dev pair. On that draw, exactly as `adapt
--dev DEV` would: each run keeps the step with the best dev score (the first of equals), and each rule decides
from the dev outputs with the library's own functions (`decide`, `dev_evidence`; for `auto`, `weigh_candidates`
and `choose` over the three recipes' runs). The chosen model's test Δ (Spearman × 100 against the base model,
on the drawn test pairs) is what the run would have delivered; "verdict applied" counts 0 when the rule keeps
the base model. False use: used, and the test Δ ≤ 0.

**Power.** For n dev pairs and a true gain Δ: P(use) of each rule (a) in closed form under the normal model
Δ̂ ~ N(Δ, σ²/n), with σ (the per-pair spread of a paired Spearman Δ) measured on the runs' pools, and (b) by
resampling: every evaluated model of every run, its pool Δ as the truth, dev sets of n pairs drawn with
replacement from the pool.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sentadapt.data.pair_files import ScoredPairs
from sentadapt.decision.rule import POSITIVE, RISK, STRICT, DecisionRule, decide
from sentadapt.decision.selection import choose, weigh_candidates
from sentadapt.evaluation.evaluator import Evaluator, dev_evidence
from sentadapt.evaluation.sts import ScoredPairsTask, spearman100
from tools.doc_sections import write_atomically, write_section

from research.experiments.domain_data import DOMAINS, key
from research.experiments.results_suite import REPO, machine_summary
from research.experiments.stored_runs import check_pools, job_record, store_run

RESULTS = Path("research/results/decision")  # the stored runs and the study (tracked)
POOLS = Path("research/results/distill/data")  # each domain's pool.jsonl (tracked; the decision runs' split)
STUDY = "study.json"
SECTION, POWER_SECTION = "decision-study", "dev-set-power"  # of research/results.md and docs/evaluation.md
COMMAND = "python -m research.experiments.decision_study"
MODELS = ("all-minilm-l6-v2", "paraphrase-minilm-l3-v2")
RECIPES = ("consert", "sg-opt", "clsr")
PEERS = ("simcse", "ct", "tsdae")  # research/experiments/peer_runs.py (stored for the domain-suite section; no decision study)
AUTO = "auto"
DEV_SIZES = (100, 200)
DEV_NAME = "dev.jsonl"
# the rules compared; the first is the default `adapt` uses (decision/rule.py)
RULES: dict[str, DecisionRule] = {
    "risk ≤ 0.20 (default)": DecisionRule(RISK, 0.2),
    "risk ≤ 0.10": DecisionRule(RISK, 0.1),
    "risk ≤ 0.25": DecisionRule(RISK, 0.25),
    "risk ≤ 0.30": DecisionRule(RISK, 0.3),
    "risk ≤ 0.40": DecisionRule(RISK, 0.4),
    "strict (95 % CI excludes 0)": DecisionRule(STRICT),
    "positive (any dev Δ > 0)": DecisionRule(POSITIVE),
}
UNPAID = "risk ≤ 0.20, choice of checkpoint not paid"  # the default rule weighing the selected step alone
POOLED = "risk ≤ 0.20, max-T over every checkpoint of every candidate, largest Δ"  # auto's alternative
SHIFTED = {"risk ≤ 0.20, optimism subtracted": 0.2, "risk ≤ 0.25, optimism subtracted": 0.25,
           "risk ≤ 0.30, optimism subtracted": 0.3}
POWER_SIZES = (25, 50, 100, 200, 400, 1000)
POWER_GAINS = (-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0)


@dataclass
class Run:
    """One run's per-pair cosines on its domain's pool: the base model's and each evaluated step's."""

    model: str
    domain: str
    recipe: str
    base: np.ndarray
    steps: dict[int, np.ndarray]


@dataclass
class Pool:
    gold: np.ndarray
    first: list[str]
    second: list[str]

    def __len__(self) -> int:
        return len(self.gold)


def load_pool(path: Path) -> Pool:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return Pool(np.array([row["score"] for row in rows], dtype=np.float64), [row["sentence1"] for row in rows],
                [row["sentence2"] for row in rows])


def load_run(folder: Path, model: str, domain: str, recipe: str) -> Run | None:
    path = folder / "dev_outputs.json"
    if not path.is_file():
        return None
    saved = json.loads(path.read_text(encoding="utf-8"))
    (task,) = saved["base"]  # one task: the pool file

    def cosines(outputs: dict[str, Any]) -> np.ndarray:
        return np.asarray(outputs[task]["cosine"], dtype=np.float64)

    return Run(model, domain, recipe, cosines(saved["base"]),
               {int(step): cosines(outputs) for step, outputs in saved["evaluations"].items()})


def draw(pool: Pool, size: int, seed: int, domain: str) -> tuple[np.ndarray, np.ndarray]:
    """(dev, test) indices: `size` random dev pairs; test = the others sharing no sentence with a dev pair."""
    rng = np.random.default_rng([seed, zlib.crc32(domain.encode())])
    order = rng.permutation(len(pool))
    dev = np.sort(order[:size])
    seen = {key(text) for index in dev for text in (pool.first[index], pool.second[index])}
    test = np.array(sorted(int(i) for i in order[size:]
                           if key(pool.first[i]) not in seen and key(pool.second[i]) not in seen))
    return dev, test


class DevSet:
    """The evaluator `adapt --dev` would build for the drawn pairs, and the outputs of a run on them."""

    def __init__(self, pool: Pool, dev: np.ndarray, resamples: int, name: str = DEV_NAME,
                 weights: np.ndarray | None = None) -> None:
        # the name keys the bootstrap's resamples (bootstrap.task_seed): "test.jsonl" gives `sentadapt eval`'s CIs
        pairs = ScoredPairs(source=name)
        for index in dev:
            pairs.append(pool.first[index], pool.second[index], float(pool.gold[index]))
        if weights is not None:  # a chosen dev set's design weights (pairs/design.py), as its 'weight' column
            pairs.weights = [float(weight) for weight in weights]
            pairs.design = True  # with its .design.json beside it: the weights are 1/π (evaluation/variance.py)
        self.rows, self.name = dev, name
        self.evaluator = Evaluator([ScoredPairsTask(name, pairs)], resamples=resamples)

    def outputs(self, cosines: np.ndarray) -> dict[str, dict[str, list[float]]]:
        return {self.name: {"cosine": cosines[self.rows].tolist()}}

    def score(self, cosines: np.ndarray) -> float:
        return self.evaluator.from_outputs(self.outputs(cosines)).average


def selected_step(run: Run, dev: DevSet) -> int:
    """The step `adapt` keeps: the best dev score, the first of equals (the loop's strict '>')."""
    scores = {step: dev.score(cosines) for step, cosines in run.steps.items()}
    best = max(scores.values())
    return next(step for step, value in scores.items() if value == best)


def test_change(pool: Pool, test: np.ndarray, base: np.ndarray, adapted: np.ndarray) -> float:
    return spearman100(adapted[test], pool.gold[test]) - spearman100(base[test], pool.gold[test])


def shifted_risk(dev: DevSet, base: dict[str, Any], options: list[dict[str, Any]], chosen: int) -> float:
    """The alternative to max-T measured beside it: subtract the bootstrap estimate of the best-of-K optimism
    (Tibshirani & Tibshirani 2009: mean over resamples of the resample-best option's Δ on the resample minus its Δ
    on the dev set), then the one-sided bootstrap risk of the chosen option's shifted Δ."""
    base_value, base_replicates = dev.evaluator.average_replicates(base)
    scored = [dev.evaluator.average_replicates(outputs) for outputs in options]
    deltas = np.stack([replicates - base_replicates for _, replicates in scored])
    changes = np.array([value - base_value for value, _ in scored])
    winners = deltas.argmax(axis=0)
    optimism = float(np.mean(deltas[winners, np.arange(deltas.shape[1])] - changes[winners]))
    own = deltas[chosen] - changes[chosen]
    return float(np.mean(own >= changes[chosen] - optimism))


def single_run(run: Run, pool: Pool, dev: DevSet, test: np.ndarray) -> dict[str, Any]:
    """A run's checkpoint choice on the drawn dev pairs and every rule's decision, as `adapt` makes them."""
    step = selected_step(run, dev)
    base, steps = dev.outputs(run.base), list(run.steps)
    best = dev.outputs(run.steps[step])
    delta = dev.evaluator.compare_outputs(base, best)
    evidence = dev_evidence(dev.evaluator, base, [dev.outputs(run.steps[s]) for s in steps], steps.index(step))
    unpaid = dev_evidence(dev.evaluator, base, [best], 0)
    decisions = {label: decide(delta.value, delta.interval, DEV_NAME, evidence, rule).decision
                 for label, rule in RULES.items()}
    decisions[UNPAID] = decide(delta.value, delta.interval, DEV_NAME, unpaid, RULES["risk ≤ 0.20 (default)"]).decision
    shifted = shifted_risk(dev, base, [dev.outputs(run.steps[s]) for s in steps], steps.index(step))
    for label, limit in SHIFTED.items():
        decisions[label] = "use-adapted" if delta.value > 0 and shifted <= limit else "keep-base"
    return {"step": step, "dev_change": delta.value, "risk": evidence.risk if evidence else None,
            "test_change": test_change(pool, test, run.base, run.steps[step]), "decisions": decisions}


def auto_run(runs: Sequence[Run], pool: Pool, dev: DevSet, test: np.ndarray) -> dict[str, Any]:
    """`adapt --recipe auto` over the runs as its candidates (in RECIPES order): each keeps its best step, then each
    rule chooses as `adapt` does; plus the measured alternatives (every checkpoint of every candidate weighed
    together by max-T, or with the optimism subtracted), which choose the largest dev Δ."""
    base = dev.outputs(runs[0].base)
    chosen_steps = {run.recipe: selected_step(run, dev) for run in runs}
    candidates = [(run.recipe, dev.outputs(run.steps[chosen_steps[run.recipe]]),
                   [dev.outputs(cosines) for cosines in run.steps.values()]) for run in runs]
    scores, evidence = weigh_candidates(dev.evaluator, base, candidates)
    by_recipe = {run.recipe: run for run in runs}

    def delivered(recipe: str | None) -> float:
        return 0.0 if recipe is None else test_change(pool, test, runs[0].base,
                                                      by_recipe[recipe].steps[chosen_steps[recipe]])

    decisions, chosen, applied = {}, {}, {}
    for label, rule in RULES.items():
        choice = choose(scores, DEV_NAME, rule, evidence)
        decisions[label], chosen[label], applied[label] = choice.decision, choice.chosen, delivered(choice.chosen)
    best = max(scores, key=lambda score: score.change)
    options = [outputs for _, _, evaluations in candidates for outputs in evaluations]
    index = [run.recipe for run in runs].index(best.name)
    offset = sum(len(run.steps) for run in runs[:index]) + list(by_recipe[best.name].steps).index(
        chosen_steps[best.name])
    pooled = dev_evidence(dev.evaluator, base, options, offset)
    alternatives = {POOLED: pooled.risk if pooled else 1.0,
                    **{label: shifted_risk(dev, base, options, offset) for label in SHIFTED}}
    for label, risk in alternatives.items():
        limit = 0.2 if label == POOLED else SHIFTED[label]
        use = best.change > 0 and risk <= limit
        decisions[label] = "use-adapted" if use else "keep-base"
        chosen[label] = best.name if use else None
        applied[label] = delivered(chosen[label])
    return {"best": best.name, "dev_change": best.change, "risk": evidence[index].risk if evidence[index] else None,
            "test_change": delivered(best.name), "applied": applied, "decisions": decisions, "chosen": chosen}


def stored_runs(results: Path, model: str, domain: str) -> list[Run]:
    """The model × domain's runs stored in `results`, in RECIPES order (a missing one left out)."""
    return [run for recipe in RECIPES
            if (run := load_run(results / "runs" / model / domain / recipe, model, domain, recipe)) is not None]


def study(results: Path, seeds: int, resamples: int, pools: Path = POOLS) -> dict[str, Any]:
    cells: list[dict[str, Any]] = []
    for model in MODELS:
        for domain in DOMAINS:
            pool = load_pool(pools / domain / "pool.jsonl")
            runs = stored_runs(results, model, domain)
            if not runs:
                continue
            for size in DEV_SIZES:
                for seed in range(seeds):
                    dev_rows, test = draw(pool, size, seed, domain)
                    dev = DevSet(pool, dev_rows, resamples)
                    where = {"model": model, "domain": domain, "dev_size": size, "seed": seed, "test_pairs": len(test)}
                    for run in runs:
                        cells.append({**where, "recipe": run.recipe, **single_run(run, pool, dev, test)})
                    if len(runs) == len(RECIPES):
                        cells.append({**where, "recipe": AUTO, **auto_run(runs, pool, dev, test)})
            print(f"{model} {domain}: {len(runs)} runs", flush=True)
    return {"cells": cells}


def selections(results: Path, seeds: int, pools: Path = POOLS) -> list[dict[str, Any]]:
    """Each recipe cell's kept step and test Δ, as `study` draws and chooses them but without a bootstrap (neither
    depends on one): what the staleness test re-derives from the stored outputs in seconds."""
    cells = []
    for model in MODELS:
        for domain in DOMAINS:
            pool = load_pool(pools / domain / "pool.jsonl")
            runs = stored_runs(results, model, domain)
            for size in DEV_SIZES:
                for seed in range(seeds):
                    dev_rows, test = draw(pool, size, seed, domain)
                    dev = DevSet(pool, dev_rows, resamples=0)
                    for run in runs:
                        step = selected_step(run, dev)
                        cells.append({"model": model, "domain": domain, "dev_size": size, "seed": seed,
                                      "recipe": run.recipe, "step": step,
                                      "test_change": test_change(pool, test, run.base, run.steps[step])})
    return cells


# ---------------------------------------------------------------- power
def pool_spread(results: Path, resamples: int, pools: Path = POOLS) -> list[dict[str, Any]]:
    """σ of each evaluated model's paired Δ on its pool (SE × √n): the per-pair spread the power model uses."""
    rows = []
    for model in MODELS:
        for domain in DOMAINS:
            pool = load_pool(pools / domain / "pool.jsonl")
            everything = DevSet(pool, np.arange(len(pool)), resamples)
            for run in stored_runs(results, model, domain):
                recipe = run.recipe
                base = everything.outputs(run.base)
                for step, cosines in run.steps.items():
                    value, replicates = everything.evaluator.change_replicates(base, everything.outputs(cosines))[1:]
                    sigma = float(np.std(replicates, ddof=1) * math.sqrt(len(pool)))
                    rows.append({"model": model, "domain": domain, "recipe": recipe, "step": step,
                                 "pool_change": value, "sigma": sigma})
    return rows


def normal_power(gain: float, size: int, sigma: float, rule: DecisionRule) -> float:
    """P(use) of one comparison under Δ̂ ~ N(gain, σ²/n): use when Δ̂ > z·σ/√n (z = 0 for positive)."""
    z = {POSITIVE: 0.0, STRICT: 1.959964}.get(rule.name)
    if z is None:
        z = statistics.NormalDist().inv_cdf(1 - rule.risk)
    spread = sigma / math.sqrt(size)
    return 1 - statistics.NormalDist(gain, spread).cdf(z * spread)


def resampled_power(results: Path, sizes: Sequence[int], draws: int, resamples: int,
                    pools: Path = POOLS) -> list[dict[str, Any]]:
    """P(use) by resampling real outputs: each evaluated model vs its base, dev sets drawn with replacement from
    the pool (whose Δ is the truth), one comparison (no checkpoint choice)."""
    rows = []
    rules = {label: RULES[label] for label in ("risk ≤ 0.20 (default)", "strict (95 % CI excludes 0)",
                                               "positive (any dev Δ > 0)")}
    for model in MODELS:
        for domain in DOMAINS:
            pool = load_pool(pools / domain / "pool.jsonl")
            for run in stored_runs(results, model, domain):
                for step in (25, 100):
                    if step not in run.steps:
                        continue
                    truth = test_change(pool, np.arange(len(pool)), run.base, run.steps[step])
                    for size in sizes:
                        rng = np.random.default_rng([size, step, zlib.crc32(f"{model}{domain}{run.recipe}".encode())])
                        used = dict.fromkeys(rules, 0)
                        for _ in range(draws):
                            dev = DevSet(pool, rng.integers(0, len(pool), size), resamples)
                            base, other = dev.outputs(run.base), dev.outputs(run.steps[step])
                            delta = dev.evaluator.compare_outputs(base, other)
                            evidence = dev_evidence(dev.evaluator, base, [other], 0)
                            for label, rule in rules.items():
                                used[label] += decide(delta.value, delta.interval, DEV_NAME, evidence,
                                                      rule).decision == "use-adapted"
                        rows.append({"model": model, "domain": domain, "recipe": run.recipe, "step": step,
                                     "size": size, "truth": truth, **{label: used[label] / draws for label in rules}})
    return rows


def selection_cost_simulation(trials: int = 2000, resamples: int = 1000) -> list[dict[str, Any]]:
    """P(use) at risk ≤ 0.20 when a run picks the best of K = 4 checkpoints whose Δs are correlated (ρ) and whose
    true gains are all 0 — the case where choosing the best is pure luck — with the choice paid for (max-T,
    `weigh` as `adapt` calls it) and not paid for (the chosen one weighed alone). Δs in SE units; the bootstrap
    replicates are drawn around the observed Δs with the same correlation."""
    from sentadapt.evaluation.evidence import weigh

    rows = []
    for rho in (0.5, 0.8, 0.95):
        correlation = np.full((4, 4), rho) + np.eye(4) * (1 - rho)
        root = np.linalg.cholesky(correlation)
        rng = np.random.default_rng(int(rho * 100))
        paid = unpaid = 0
        for _ in range(trials):
            observed = root @ rng.normal(size=4)
            replicates = observed[:, None] + root @ rng.normal(size=(4, resamples))
            chosen = int(np.argmax(observed))
            if observed[chosen] <= 0:
                continue
            both = weigh(np.zeros(resamples), list(replicates), 0.0, list(observed), chosen, 100)
            alone = weigh(np.zeros(resamples), [replicates[chosen]], 0.0, [observed[chosen]], 0, 100)
            paid += both is not None and both.risk <= 0.2
            unpaid += alone is not None and alone.risk <= 0.2
        rows.append({"rho": rho, "paid": paid / trials, "unpaid": unpaid / trials, "trials": trials})
    return rows


# ---------------------------------------------------------------- rendering
def summarize(cells: list[dict[str, Any]], model: str, recipe: str, size: int, label: str,
              seeds: int | None = None) -> dict[str, Any]:
    chosen = [c for c in cells if c["model"] == model and c["recipe"] == recipe and c["dev_size"] == size
              and (seeds is None or c["seed"] < seeds)]
    if not chosen:
        return {}
    applied = [c["applied"][label] if "applied" in c else c["test_change"] if c["decisions"][label] == "use-adapted"
               else 0.0 for c in chosen]
    available = [max(c["test_change"], 0.0) for c in chosen]
    used = [c["decisions"][label] == "use-adapted" for c in chosen]
    false = [u and value <= 0 for u, value in zip(used, applied)]
    worst = min(range(len(chosen)), key=lambda i: applied[i])
    return {"cells": len(chosen), "applied": float(np.mean(applied)), "raw": float(np.mean([c["test_change"]
                                                                                           for c in chosen])),
            "kept": sum(applied) / sum(available) if sum(available) > 0 else float("nan"),
            "used": sum(used), "false_use": sum(false), "worst": applied[worst],
            "worst_cell": f"{chosen[worst]['domain']} seed {chosen[worst]['seed']}"}


def _signed(value: float) -> str:
    return f"{value:+.2f}"


def render_results(data: dict[str, Any], command: str) -> str:
    cells, meta = data["cells"], data["meta"]
    seeds = meta["seeds"]
    lines = [
        "## The decision: what each rule hands the user",
        "",
        f"Generated by `{command}`, finished {meta['finished']} ({meta['machine']}), from the per-pair outputs "
        "in `research/results/decision/` (`--render` redraws it from them); the runs by "
        "`python -m research.experiments.decision_runs` (both shared models × 4 domains × ConSERT, SG-OPT, CLSR, 100 steps, "
        "dev every 25 — the domain suite's settings, each recipe's defaults).",
        "",
        "How: every run scored all the pairs no run trains on (a domain's dev-200 + test pool) at every evaluated "
        "step. Each split seed re-draws a dev set (100 or 200 pairs) from that pool and keeps the rest, minus the "
        "pairs sharing a sentence with the dev pairs, as test; on each draw the run's checkpoint is chosen on the "
        "dev pairs and each rule decides, with the same library functions `adapt` uses "
        "(research/experiments/decision_study.py's docstring). *Verdict applied*: the test Δ the user ends with (0 when the "
        "rule keeps the base). *Kept*: verdict applied ÷ the positive part of the recipe's test Δ (the gain there was "
        "to keep). *False use*: used while the test Δ ≤ 0. *Worst*: the lowest verdict-applied cell. `auto` is "
        "`adapt --recipe auto` over the three runs as candidates (its risk pays for every checkpoint of every "
        "candidate; strict is Bonferroni's rule).",
        "",
        "The domain-suite sections above are these runs on one draw, the suite's own dev.jsonl (the pool's first 100 "
        "pairs), decided by the default rule; the rows here re-draw dev many times and decide by each rule. The "
        "alternatives measured beside the default: the "
        "choice of checkpoint not paid for (the chosen step weighed alone), the optimism of the best of K "
        "subtracted instead of max-T (Tibshirani & Tibshirani 2009), and for `auto`, max-T over every checkpoint "
        "of every candidate instead of the fixed sequence.",
        "",
    ]
    lines += choice_of_default(cells)
    for recipe in ("consert", AUTO, "sg-opt", "clsr"):
        for size in DEV_SIZES:
            lines += [f"### {recipe if recipe != AUTO else '--recipe auto'}, {size} dev pairs", "",
                      "| rule | model | cells | used | verdict applied (seeds 0-2) | verdict applied (all seeds) | "
                      "raw test Δ | kept | false use (seeds 0-2) | false use (all) | worst (all) |",
                      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
            for label in [*RULES, *([UNPAID] if recipe != AUTO else [POOLED]), *SHIFTED]:
                for model in MODELS:
                    every = summarize(cells, model, recipe, size, label)
                    first = summarize(cells, model, recipe, size, label, 3)
                    if not every:
                        continue
                    lines.append(
                        f"| {label} | {model} | {every['cells']} | {every['used']} | {_signed(first['applied'])} | "
                        f"{_signed(every['applied'])} | {_signed(every['raw'])} | {100 * every['kept']:.0f} % | "
                        f"{first['false_use']} of {first['cells']} | {every['false_use']} of {every['cells']} | "
                        f"{_signed(every['worst'])} ({every['worst_cell']}) |")
            lines.append("")
    lines += [f"Split seeds: {seeds} per dev size (cells = 4 domains × seeds); bootstrap "
              f"{meta['resamples']} paired resamples per decision, as `adapt`.", ""]
    lines += per_cell_table(cells, "consert", 100, 3)
    return "\n".join(lines)


SAFETY_WORST = -0.30  # no verdict-applied cell of any recipe below this
SAFETY_FALSE_USE = 1 / 12  # ConSERT and auto: at most one false use in twelve cells


def choice_of_default(cells: list[dict[str, Any]]) -> list[str]:
    """How the default limit was chosen: the largest risk limit at which no recipe (nor auto) ends a cell below
    SAFETY_WORST and ConSERT and auto use a model no better than the base in at most SAFETY_FALSE_USE of their
    cells, at 100 and 200 dev pairs, on both models — then what it keeps."""
    limits = [label for label, rule in RULES.items() if rule.name == RISK]
    lines = ["Choosing the default limit: the largest risk limit at which no recipe, nor `auto`, ends any cell below "
             f"{SAFETY_WORST:+.2f} and ConSERT and `auto` have false use in at most 1 of 12 cells, at 100 and 200 "
             "dev pairs on both models (all seeds):", "",
             "| limit | worst cell, any recipe | false use, ConSERT / auto (worst rate) | safe | ConSERT verdict "
             "applied, 100 pairs (L6 / L3) | auto, 100 pairs (L6 / L3) |", "|---|---:|---:|---|---:|---:|"]
    chosen = None
    for label in sorted(limits, key=lambda name: RULES[name].risk):
        summaries = [summarize(cells, model, recipe, size, label) for recipe in (*RECIPES, AUTO) for model in MODELS
                     for size in DEV_SIZES]
        worst = min(summary["worst"] for summary in summaries if summary)
        rates = [summary["false_use"] / summary["cells"] for recipe in ("consert", AUTO) for model in MODELS
                 for size in DEV_SIZES if (summary := summarize(cells, model, recipe, size, label))]
        safe = worst >= SAFETY_WORST and max(rates) <= SAFETY_FALSE_USE
        chosen = label if safe else chosen
        applied = {(recipe, model): summarize(cells, model, recipe, 100, label)["applied"]
                   for recipe in ("consert", AUTO) for model in MODELS}
        lines.append(f"| {RULES[label].risk:.2f} | {_signed(worst)} | {100 * max(rates):.1f} % | "
                     f"{'yes' if safe else 'no'} | {_signed(applied[('consert', MODELS[0])])} / "
                     f"{_signed(applied[('consert', MODELS[1])])} | {_signed(applied[(AUTO, MODELS[0])])} / "
                     f"{_signed(applied[(AUTO, MODELS[1])])} |")
    lines += ["", f"Largest safe limit: **{RULES[chosen].risk:.2f}**" if chosen else "No limit is safe.", ""]
    return lines


def per_cell_table(cells: list[dict[str, Any]], recipe: str, size: int, seeds: int) -> list[str]:
    label = next(iter(RULES))
    lines = [f"Per cell, {recipe}, {size} dev pairs, seeds 0-{seeds - 1}, default rule (dev Δ → risk → decision; "
             "test Δ; verdict applied):", "",
             "| model | domain | seed | dev Δ | risk | decision | test Δ | verdict applied |",
             "|---|---|---:|---:|---:|---|---:|---:|"]
    for cell in cells:
        if cell["recipe"] != recipe or cell["dev_size"] != size or cell["seed"] >= seeds:
            continue
        used = cell["decisions"][label] == "use-adapted"
        risk = "–" if cell["risk"] is None else f"{cell['risk']:.2f}"
        lines.append(f"| {cell['model']} | {cell['domain']} | {cell['seed']} | {_signed(cell['dev_change'])} | "
                     f"{risk} | {'use' if used else 'keep'} | {_signed(cell['test_change'])} | "
                     f"{_signed(cell['test_change'] if used else 0.0)} |")
    return [*lines, ""]


def render_power(data: dict[str, Any], command: str) -> str:
    by_kind: dict[tuple[str, str], list[float]] = {}
    for row in data["spread"]:
        by_kind.setdefault((row["recipe"], row["model"]), []).append(row["sigma"])
    reference = float(np.median(by_kind[("consert", MODELS[0])]))  # the default recipe on the stronger base
    sigmas = (3.0, 6.0, 9.0)
    rules = {"risk ≤ 0.20": DecisionRule(RISK, 0.2), "strict": DecisionRule(STRICT),
             "positive": DecisionRule(POSITIVE)}
    lines = [
        "## How many dev pairs do I need?",
        "",
        f"Generated by `{command}` (finished {data['meta']['finished']}). The dev set decides whether the adapted "
        "model is used, so its size sets which gains can be kept. A paired Spearman Δ over n pairs has a standard "
        "error of about σ/√n, where σ grows with how far the adapted model moved from the base. Measured on the "
        "domain suite's runs (every evaluated step, on the domain's whole pool of unseen pairs):",
        "",
        "| recipe | model | σ median | σ range |", "|---|---|---:|---:|",
    ]
    for (recipe, model), values in sorted(by_kind.items()):
        lines.append(f"| {recipe} | {model} | {np.median(values):.1f} | {min(values):.1f}-{max(values):.1f} |")
    lines += ["", "Smallest dev Δ each rule calls a gain, for a small move (σ 3: CLSR, ConSERT on "
              "paraphrase-MiniLM-L3-v2), a larger one (σ 6: ConSERT on all-MiniLM-L6-v2) and a large one (σ 9: SG-OPT "
              "on all-MiniLM-L6-v2); one comparison (paying for the choice among a run's checkpoints adds a little):",
              "", "| dev pairs | " + " | ".join(f"risk ≤ 0.20, σ {s:.0f} | strict, σ {s:.0f}" for s in sigmas) + " |",
              "|---:|" + "---:|" * (2 * len(sigmas))]
    z20 = statistics.NormalDist().inv_cdf(0.8)
    for size in POWER_SIZES:
        cells = [f"{z * sigma / math.sqrt(size):.2f}" for sigma in sigmas for z in (z20, 1.959964)]
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    lines += ["", f"P(use) for a true gain Δ at σ {reference:.1f} (ConSERT on all-MiniLM-L6-v2, median; normal model): "
              "a loss or no gain should be kept out, a gain let in:", "",
              "| dev pairs | rule | " + " | ".join(f"Δ {_signed(g)}" for g in POWER_GAINS) + " |",
              "|---:|---|" + "---:|" * len(POWER_GAINS)]
    for size in POWER_SIZES:
        for name, rule in rules.items():
            lines.append(f"| {size} | {name} | " + " | ".join(
                f"{normal_power(g, size, reference, rule):.2f}" for g in POWER_GAINS) + " |")
    loss = normal_power(-0.5, 100, reference, DecisionRule(RISK, 0.2))
    at100 = {name: statistics.NormalDist().inv_cdf(0.8 if name == "risk" else 0.975) * reference / 10
             for name in ("risk", "strict")}
    strict_loss = normal_power(-0.5, 100, reference, DecisionRule(STRICT))
    read = (f"Read: at σ {reference:.1f} a 100-pair dev set's 95 % CI is ±{at100['strict']:.2f}, so the strict "
            f"rule confirms only gains above ~{at100['strict']:.1f} — more than adaptation usually gains on a "
            f"sentence-tuned base — while the risk rule at 0.20 (one look at the default limit, as a look of 400 "
            f"labels is held; a smaller first look is held to a share of it: docs/decision.md) calls "
            f"Δ ≥ {at100['risk']:.2f} a gain and uses "
            f"a true loss of −0.5 in {100 * loss:.0f} % of runs (strict: {100 * strict_loss:.1f} %). Four times "
            "the pairs halve every threshold; `sentadapt pairs` proposes pairs worth labelling.")
    lines += ["", "The same by resampling the suite's real per-pair outputs (each evaluated model at steps 25 and "
              "100 against its base, dev sets of n pairs drawn with replacement from its domain's pool, whose Δ is "
              f"the truth; {data['meta']['power_draws']} draws each), P(use) averaged within bins of the true Δ:", "",
              "| dev pairs | true Δ bin | models | risk ≤ 0.20 | strict | positive |", "|---:|---|---:|---:|---:|---:|"]
    bins = [(-math.inf, -0.5), (-0.5, 0.0), (0.0, 0.5), (0.5, 1.0), (1.0, math.inf)]
    for size in sorted({row["size"] for row in data["power"]}):
        for low_edge, high_edge in bins:
            rows = [r for r in data["power"] if r["size"] == size and low_edge <= r["truth"] < high_edge]
            if not rows:
                continue
            name = (f"< {high_edge:+.1f}" if low_edge == -math.inf else f"≥ {low_edge:+.1f}" if high_edge == math.inf
                    else f"[{low_edge:+.1f}, {high_edge:+.1f})")
            means = [np.mean([r[label] for r in rows]) for label in ("risk ≤ 0.20 (default)",
                                                                     "strict (95 % CI excludes 0)",
                                                                     "positive (any dev Δ > 0)")]
            lines.append(f"| {size} | {name} | {len(rows)} | " + " | ".join(f"{m:.2f}" for m in means) + " |")
    lines += ["", "What paying for the checkpoint choice does (research/experiments/decision_study.py "
              "`selection_cost_simulation`): P(use) at risk ≤ 0.20 when a run keeps the best of 4 checkpoints "
              "whose true gains are all 0, their Δs correlated ρ (normal model):", "",
              "| ρ | paid for (max-T, the default) | not paid for (the chosen one weighed alone) |", "|---:|---:|---:|"]
    for row in data["selection_cost"]:
        lines.append(f"| {row['rho']:.2f} | {row['paid']:.3f} | {row['unpaid']:.3f} |")
    lines += ["", read]
    return "\n".join(lines)


def store(work: Path, results: Path, pools: Path = POOLS) -> None:
    """Copy the decision runs' per-pair outputs from `work` (research/experiments/decision_runs.py) into `results`."""
    check_pools(work, pools, DOMAINS)
    stored = 0
    for model in MODELS:
        for domain in DOMAINS:
            for recipe in RECIPES:
                target = results / "runs" / model / domain / recipe
                if store_run(work / "runs" / model / domain / recipe, target):
                    stored += 1
                    job_record(work / "jobs" / f"adapt-{model}-{domain}-{recipe}.json", target / "job.json")
            for peer in PEERS:  # research/experiments/peer_runs.py: job.json is written last, beside the outputs
                stored += store_run(work / "runs" / model / domain / peer, results / "runs" / model / domain / peer,
                                    finished="job.json")
    if (work / "data" / "manifest.json").is_file():
        shutil.copy(work / "data" / "manifest.json", results / "manifest.json")
    print(f"stored {stored} runs in {results}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("runs/decision"),
                        help="where research.experiments.decision_runs trained (read by --store only)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"the stored runs and study (default {RESULTS})")
    parser.add_argument("--store", action="store_true", help="copy the runs' per-pair outputs from WORK to RESULTS")
    parser.add_argument("--seeds", type=int, default=10, help="split seeds per dev size (default 10)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per decision (as adapt)")
    parser.add_argument("--power-draws", type=int, default=40, help="dev sets drawn per model and size (power)")
    parser.add_argument("--power-sizes", default="50,100,200,400")
    parser.add_argument("--render", action="store_true", help=f"only re-render from RESULTS/{STUDY}")
    parser.add_argument("--doc", type=Path, default=Path("research/results.md"))
    parser.add_argument("--power-doc", type=Path, default=Path("docs/evaluation.md"))
    args = parser.parse_args()
    os.chdir(REPO)
    if args.store:
        store(args.work, args.results)
        return
    out = args.results / STUDY
    if not args.render:
        started = time.perf_counter()
        data = study(args.results, args.seeds, args.resamples)
        data["spread"] = pool_spread(args.results, args.resamples)
        sizes = [int(size) for size in args.power_sizes.split(",")]
        data["selection_cost"] = selection_cost_simulation()
        data["power"] = resampled_power(args.results, sizes, args.power_draws, min(args.resamples, 500))
        data["meta"] = {"seeds": args.seeds, "resamples": args.resamples, "power_draws": args.power_draws,
                        "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine_summary(),
                        "seconds": time.perf_counter() - started}
        write_atomically(out, json.dumps(data) + "\n")
    data = json.loads(out.read_text(encoding="utf-8"))
    write_section(args.doc, SECTION, render_results(data, COMMAND))
    write_section(args.power_doc, POWER_SECTION, render_power(data, COMMAND))
    print(f"wrote {args.doc} and {args.power_doc}")


if __name__ == "__main__":
    main()
