"""A teacher's lead kept by the student (issue 33): `adapt --teacher` on the four suite domains, measured over
re-drawn dev/test splits with adapt's default decision applied.

    python -m research.experiments.distill_suite --train                  # both pairings × 4 domains (--pairs, --domains)
    python -m research.experiments.distill_suite --study [--seeds 5]      # re-draw splits, decide, score: WORK/study-V.json
    python -m research.experiments.distill_suite --grid k1,k3             # variants compared on dev-200 alone
    python -m research.experiments.distill_suite --select k3,k3x,k3xn --pairs l6-mpnet --work research/results/distill
                                                # the default: the dev rule written first, then the test confirmation
    python -m research.experiments.distill_suite --variant k3h --store-from runs/distill --work research/results/distill
    python -m research.experiments.distill_suite --share-rule --work research/results/distill   # the neighbour share the rule names
    python -m research.experiments.distill_suite --batch-rule --work research/results/distill   # the batch size the rule names
                                                # a variant's finished runs → its tracked per-pair outputs
    python -m research.experiments.teacher_evidence --store --render      # per-pair outputs → research/results/distill → research/results.md

Pairings: all-MiniLM-L6-v2 ← all-mpnet-base-v2 (`../shared/tools/get-all-mpnet-base-v2.sh` installs it) and
paraphrase-MiniLM-L3-v2 ← all-MiniLM-L6-v2. Data: research/experiments/domain_data.py --seed 0 (WORK/data). As
research/experiments/decision_runs.py does, each run gets its domain's pool (dev-200.jsonl + test.jsonl: pairs whose
sentences no corpus holds) as `--dev`, so its dev_outputs.json holds a cosine per pool pair for the base and every
evaluated step; `--set teacher_check=off` and `--set patience=0` let every run go its whole length (the study
applies both itself, per drawn dev set). Everything else is adapt's default for a teacher run: what is measured is
what a user gets with `sentadapt adapt CORPUS --base STUDENT --teacher TEACHER --dev DEV`.

The study re-draws, per domain and seed, `size` dev pairs from the pool (100 or 200) and takes as test the other
pool pairs that share no sentence with them (decision_study.draw), then does what adapt does with that dev set:
weighs the teacher against the base (paired CI; a teacher whose CI is below 0 stops the run: Δ 0), keeps the best
evaluated step, decides with the default rule (risk ≤ 0.20, the choice among the evaluations paid), and scores
the kept step on the drawn test pairs: Δ raw (the kept step against the base, decision ignored) and Δ applied
(keep-base → 0). The teacher's lead and the share of it closed are on the same test pairs. Seeds are split seeds;
training ran once per domain (its dev set does not steer training when patience is off).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from research.experiments.decision_runs import pool_file
from research.experiments.decision_study import DevSet, Pool, Run, draw, load_pool, load_run, selected_step, test_change
from research.experiments.domain_data import ALL_DOMAINS, DOMAINS
from research.experiments.domain_stored import typeset
from research.experiments.results_suite import machine_summary, sentadapt, short
from research.experiments.stored_runs import store_run

SHARED = Path("../shared")
MPNET = Path(os.environ.get("SENTADAPT_CACHE", Path.home() / ".cache/sentadapt")) / "models/all-mpnet-base-v2"
L6, L3 = str(SHARED / "models/all-minilm-l6-v2"), str(SHARED / "models/paraphrase-minilm-l3-v2")
PAIRINGS = {"l6-mpnet": (L6, str(MPNET)), "l3-l6": (L3, L6)}
# a third pairing, trained only to check the teacher-led decision (research/findings.md, "The teacher-led decision on a
# third pairing"); the studies above iterate PAIRINGS alone, so their stored verdicts do not change
CHECK_PAIRINGS = {"l3-mpnet": (L3, str(MPNET))}
ALL_PAIRINGS = {**PAIRINGS, **CHECK_PAIRINGS}
WORK = Path("runs/distill")
SIZES = (100, 200)
DEV_200 = 200  # the pool's first rows: dev-200.jsonl, where the defaults were chosen
PATIENCE = 2  # a teacher run's default patience (presets.TEACHER_DEFAULTS)


def run_folder(work: Path, pairing: str, domain: str, variant: str) -> Path:
    return work / "runs" / variant / pairing / domain


@dataclass(frozen=True)
class StoredRun:
    """A stored teacher run with what the studies read beside it: its domain's pool and the teacher's pool cosines."""

    pairing: str
    domain: str
    folder: Path
    run: Run
    pool: Pool
    teacher: np.ndarray


def stored_runs(work: Path, runs: Iterable[tuple[str, str]], domains: Iterable[str],
                required: bool = False) -> Iterator[StoredRun]:
    """Every (pairing, variant) of `runs` × `domains` stored under WORK, in that order; a missing run is skipped, or
    with `required` stops the study naming its folder."""
    for pairing, variant in runs:
        for domain in domains:
            folder = run_folder(work, pairing, domain, variant)
            run = load_run(folder, pairing, domain, variant)
            if run is None:
                if required:
                    raise SystemExit(f"{folder}: no stored run")
                continue
            pool = load_pool(pool_file(work / "data", domain))
            yield StoredRun(pairing, domain, folder, run, pool, teacher_cosines(work, pairing, domain, pool))


def train(work: Path, pairing: str, domain: str, variant: str, extra: list[str], reuse: bool) -> None:
    student, teacher = ALL_PAIRINGS[pairing]
    folder = run_folder(work, pairing, domain, variant)
    if reuse and (folder / "metrics.json").is_file():
        print(f"{variant} {pairing} {domain}: done earlier", flush=True)
        return
    data = work / "data"
    argv = sentadapt("adapt", str(data / domain / "corpus.txt"), "--base", student, "--teacher", teacher,
                     "--dev", str(pool_file(data, domain)), "--output", str(folder), "--overwrite",
                     "--set", "teacher_check=off", "--set", "patience=0", *extra)
    run_job(argv, folder, work, f"{variant} {pairing} {domain}")


def store_variant(work: Path, results: Path, variant: str, pairings: list[str], domains: tuple[str, ...]) -> None:
    """Each finished run of `variant` in WORK into RESULTS (stored_runs.store_run: the per-pair outputs, rounded);
    a run not finished is said and skipped."""
    for pairing in pairings:
        for domain in domains:
            source = run_folder(work, pairing, domain, variant)
            stored = store_run(source, run_folder(results, pairing, domain, variant))
            print(f"{variant} {pairing} {domain}: {'stored' if stored else 'not finished, skipped'}", flush=True)


def run_job(argv: list[str], folder: Path, work: Path, label: str) -> None:
    """One `sentadapt adapt` run into `folder`, its output in FOLDER/../DOMAIN.log, offline, with WORK's cache;
    a failure stops the suite naming the log; a success writes FOLDER/job.json (its argv and seconds)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    log = folder.parent / f"{folder.name}.log"
    with log.open("w") as handle:
        code = subprocess.call(argv, stdout=handle, stderr=subprocess.STDOUT,
                               env={**os.environ, "SENTADAPT_CACHE": str(work / "cache"), "HF_HUB_OFFLINE": "1"})
    seconds = time.perf_counter() - started
    if code:
        sys.exit(f"{label}: adapt exited {code}; see {log}")
    (folder / "job.json").write_text(json.dumps({"argv": argv[1:], "seconds": seconds}))
    print(f"{label}: {seconds:.0f} s", flush=True)


def teacher_cosines(work: Path, pairing: str, domain: str, pool: Pool) -> np.ndarray:
    """The teacher's cosine of every pool pair (cached in WORK/teacher-cosines/)."""
    return pool_cosines(work / "teacher-cosines", ALL_PAIRINGS[pairing][1], f"{pairing}-{domain}", pool)


def base_cosines(work: Path, pairing: str, domain: str, pool: Pool) -> np.ndarray:
    """The student base's cosine of every pool pair (cached in WORK/base-cosines/), as the teacher's are."""
    return pool_cosines(work / "base-cosines", ALL_PAIRINGS[pairing][0], f"{pairing}-{domain}", pool)


def pool_cosines(folder: Path, model: str, name: str, pool: Pool) -> np.ndarray:
    """`model`'s cosine of every pool pair, computed once into FOLDER/NAME.npy."""
    path = folder / f"{name}.npy"
    if path.is_file():
        return np.load(path)
    import torch
    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(model, device="cpu")
    first, second = encoder.encode(pool.first, max_length=128), encoder.encode(pool.second, max_length=128)
    cosines = torch.nn.functional.cosine_similarity(first, second).double().numpy()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, cosines)
    return cosines


def dev_blend(work: Path, pairing: str, domain: str, resamples: int) -> tuple[float, dict[str, float]]:
    """teacher_blend=auto's α (teacher/blend.choose_blend: the rule of docs/teacher.md, in code) on dev-200.jsonl
    alone, the pool's first DEV_200 rows: no test pair is read."""
    from sentadapt.teacher.table import choose_blend

    pool = load_pool(pool_file(work / "data", domain))
    dev = DevSet(pool, np.arange(DEV_200), resamples)
    return choose_blend(dev.evaluator, dev.outputs(base_cosines(work, pairing, domain, pool)),
                        dev.outputs(teacher_cosines(work, pairing, domain, pool)))


def train_blend(work: Path, pairing: str, domain: str, variant: str, alone: str, extra: list[str], reuse: bool,
                resamples: int) -> None:
    """The blend variant of a domain: trained with the α dev-200 picks; an α of 1 is the teacher-alone run
    `alone`, copied (its target is the same)."""
    import shutil

    alpha, scores = dev_blend(work, pairing, domain, resamples)
    print(f"{variant} {pairing} {domain}: α {alpha:g} on dev-200 ({scores})", flush=True)
    folder = run_folder(work, pairing, domain, variant)
    if alpha == 1.0:
        if not (reuse and (folder / "metrics.json").is_file()):
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(run_folder(work, pairing, domain, alone), folder)
        return
    train(work, pairing, domain, variant, [*extra, "--set", f"teacher_blend={alpha:g}"], reuse)


def steps_until_patience(run: Any, dev: DevSet, patience: int) -> list[int]:
    """The evaluated steps a run with this dev set would have reached: it stops after `patience` evaluations in a
    row without a new best (0: never), as the loop does."""
    steps, best, since = [], -np.inf, 0
    for step in sorted(run.steps):
        steps.append(step)
        score = dev.score(run.steps[step])
        best, since = (score, 0) if score > best else (best, since + 1)
        if patience and since >= patience:
            break
    return steps


@dataclass
class Kept:
    """What adapt does with one drawn dev set before it decides: the teacher weighed against the base (a teacher
    whose CI is below 0 stops the run), the evaluations it reaches under patience, the best of them kept, its Δ
    and the selection-aware evidence."""

    lead: Any  # Delta: teacher − base on dev
    step: int
    delta: Any  # Delta: the kept step − base on dev
    evidence: Any  # Evidence | None

    @property
    def stopped(self) -> bool:  # teacher_check=on
        return self.lead.interval is not None and self.lead.interval[1] < 0

    def decide(self, rule: Any) -> Any:
        from sentadapt.decision.rule import decide

        return decide(self.delta.value, self.delta.interval, "dev", self.evidence, rule)

    def used(self, rule: Any) -> bool:
        """Whether the library ships the kept step under `rule` (a stopped run ships nothing)."""
        from sentadapt.decision.rule import USE_ADAPTED

        return self.decide(rule).decision == USE_ADAPTED and not self.stopped


def kept_on_dev(run: Any, teacher: np.ndarray, pool: Pool, dev_rows: np.ndarray, resamples: int,
                patience: int, weights: np.ndarray | None = None) -> Kept:
    from sentadapt.evaluation.evaluator import dev_evidence

    dev = DevSet(pool, dev_rows, resamples, weights=weights)
    base = dev.outputs(run.base)
    lead = dev.evaluator.compare_outputs(base, dev.outputs(teacher))
    steps = steps_until_patience(run, dev, patience)
    step = selected_step(Run(run.model, run.domain, run.recipe, run.base, {s: run.steps[s] for s in steps}), dev)
    delta = dev.evaluator.compare_outputs(base, dev.outputs(run.steps[step]))
    evidence = dev_evidence(dev.evaluator, base, [dev.outputs(run.steps[s]) for s in steps], steps.index(step))
    return Kept(lead, step, delta, evidence)


def drawn_splits(pool: Pool, domain: str, seeds: int) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """(size, seed, dev rows, test rows) of every cell of a domain's study, in the studies' order."""
    for size in SIZES:
        for seed in range(seeds):
            dev_rows, test = draw(pool, size, seed, domain)
            # test pairs only from test.jsonl: the defaults were chosen on dev-200.jsonl (the pool's first DEV_200
            # rows), which may still be drawn as dev
            yield size, seed, dev_rows, test[test >= DEV_200]


def cell(run: Any, teacher: np.ndarray, pool: Pool, dev_rows: np.ndarray, test: np.ndarray,
         resamples: int, patience: int, agreed: dict[str, Any] | None = None) -> dict[str, Any]:
    """What adapt does with one drawn dev set, scored on the drawn test pairs; with `agreed` (the run's held-out
    agreement record, --set teacher_evidence=on) also what the decision with the teacher's evidence does."""
    from sentadapt.decision.rule import DecisionRule

    from research.experiments.teacher_led import agreement, with_teacher_evidence

    kept = kept_on_dev(run, teacher, pool, dev_rows, resamples, patience)
    lead, stopped, step, delta = kept.lead, kept.stopped, kept.step, kept.delta
    decided = kept.decide(DecisionRule())
    decision = decided.decision
    scored = len(test) > 0  # the grid reads no test pair
    raw = test_change(pool, test, run.base, run.steps[step]) if scored else float("nan")
    used = decision == "use-adapted" and not stopped
    result = {"step": step, "dev_change": delta.value, "teacher_dev_lead": lead.value, "stopped": stopped,
              "decision": decision, "raw": raw, "applied": raw if used else 0.0,
              "teacher_lead": test_change(pool, test, run.base, teacher) if scored else float("nan")}
    if agreed is not None:  # the kept step's agreement with the teacher on the held-out corpus pairs
        found = agreement(agreed["teacher"], agreed["evaluations"]["base"], agreed["evaluations"][str(step)],
                          resamples)
        with_evidence = with_teacher_evidence(decided, delta.interval, lead, found, DecisionRule()).decision
        used_with = with_evidence == "use-adapted" and not stopped
        result.update({"agreement": found.to_dict(), "decision_evidence": with_evidence,
                       "applied_evidence": raw if used_with else 0.0, "used_evidence": used_with, "used": used})
    return result


def study_path(work: Path, variant: str, domains: tuple[str, ...] = tuple(DOMAINS)) -> Path:
    """WORK/study-VARIANT.json for the four earlier domains; WORK/study-VARIANT-D1-D2.json for others (`social`)."""
    suffix = "" if tuple(domains) == tuple(DOMAINS) else "-" + "-".join(domains)
    return work / f"study-{variant}{suffix}.json"


def study(work: Path, variant: str, seeds: int, resamples: int,
          domains: tuple[str, ...] = tuple(DOMAINS)) -> dict[str, Any]:
    cells = []
    for stored in stored_runs(work, [(pairing, variant) for pairing in PAIRINGS], domains):
        folder, domain = stored.folder, stored.domain
        metrics = json.loads((folder / "metrics.json").read_text())
        job = json.loads((folder / "job.json").read_text())
        agreed = json.loads((folder / "dev_outputs.json").read_text()).get("agreement")
        for size, seed, dev_rows, test in drawn_splits(stored.pool, domain, seeds):
            cells.append({"pairing": stored.pairing, "domain": domain, "size": size, "seed": seed,
                          **cell(stored.run, stored.teacher, stored.pool, dev_rows, test, resamples, PATIENCE,
                                 agreed)})
        print(f"{stored.pairing} {domain}: {metrics['steps']} steps, {job['seconds']:.0f} s", flush=True)
    result = {"variant": variant, "seeds": seeds, "cells": cells, "runs": run_records(work, variant, domains),
              "teacher_evidence": evidence_verdict(cells),
              "command": "python -m research.experiments.distill_suite " + " ".join(sys.argv[1:]),
              "machine": machine_summary(),
              "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    study_path(work, variant, domains).write_text(json.dumps(result, indent=1))
    return result


def evidence_verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The pre-registered rule of research/findings.md ("The teacher's evidence and blend targets"), applied in code
    to the study's cells: teacher_evidence becomes the default iff false use ≤ 5 % and the mean applied Δ does not fall."""
    weighed = [c for c in cells if "used_evidence" in c]
    losing = [c for c in weighed if c["raw"] < 0]
    gaining = [c for c in weighed if c["raw"] >= 1.0]
    false_use = sum(c["used_evidence"] for c in losing) / len(losing) if losing else 0.0
    without = float(np.mean([c["applied"] for c in weighed])) if weighed else float("nan")
    with_ = float(np.mean([c["applied_evidence"] for c in weighed])) if weighed else float("nan")
    changed = sum(c["used_evidence"] != c["used"] for c in weighed)
    return {"cells": len(weighed), "losing_cells": len(losing), "false_use": false_use, "changed": changed,
            "false_use_without": sum(c["used"] for c in losing) / len(losing) if losing else 0.0,
            "gaining_cells": len(gaining),
            "power": sum(c["used_evidence"] for c in gaining) / len(gaining) if gaining else float("nan"),
            "power_without": sum(c["used"] for c in gaining) / len(gaining) if gaining else float("nan"),
            "applied_without": without, "applied_with": with_,
            # the amendment of docs/decision.md: a rule met only by changing no decision keeps the default off
            "default_on": bool(weighed) and changed > 0 and false_use <= 0.05 and with_ >= without}


def run_records(work: Path, variant: str, domains: tuple[str, ...] = tuple(DOMAINS)) -> dict[str, Any]:
    records = {}
    for pairing in PAIRINGS:
        for domain in domains:
            folder = run_folder(work, pairing, domain, variant)
            if not (folder / "metrics.json").is_file():
                continue
            metrics = json.loads((folder / "metrics.json").read_text())
            job = json.loads((folder / "job.json").read_text())
            records[f"{pairing}/{domain}"] = {
                "steps": metrics["steps"], "examples": metrics.get("examples"), "seconds": job["seconds"],
                "batch": metrics["environment"]["global_batch"], "argv": job["argv"],
                "teacher": metrics.get("teacher"), "distill_loss": metrics.get("distill_loss")}
    return records


def table(result: dict[str, Any]) -> list[str]:
    """Per pairing and domain: means over seeds at each dev size."""
    lines = []
    for pairing in PAIRINGS:
        rows = [c for c in result["cells"] if c["pairing"] == pairing]
        if not rows:
            continue
        student, teacher = (short(m) for m in PAIRINGS[pairing])
        lines += ["", f"**{student} ← {teacher}** (means over {result['seeds']} split seeds; Δ in Spearman × 100 on "
                      "the drawn test pairs)", "",
                  "| domain | teacher's lead | Δ raw | share raw | Δ applied @100 | Δ applied @200 | used @100 | "
                  "used @200 | worst applied | passes | train time |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        means: dict[str, list[float]] = {"lead": [], "raw": [], "a100": [], "a200": []}
        for domain in ALL_DOMAINS:
            cells = [c for c in rows if c["domain"] == domain]
            if not cells:
                continue
            record = result["runs"][f"{pairing}/{domain}"]
            at = {size: [c for c in cells if c["size"] == size] for size in SIZES}
            lead = float(np.mean([c["teacher_lead"] for c in at[200]]))
            raw = float(np.mean([c["raw"] for c in at[200]]))
            applied = {size: float(np.mean([c["applied"] for c in at[size]])) for size in SIZES}
            used = {size: sum(c["applied"] != 0 for c in at[size]) for size in SIZES}
            worst = min(c["applied"] for c in cells)
            passes = record["steps"] * record["batch"] / record["examples"] if record["examples"] else float("nan")
            share = f"{100 * raw / lead:.0f} %" if lead > 0 else "–"
            lines.append(f"| {domain} | {lead:+.2f} | {raw:+.2f} | {share} | {applied[100]:+.2f} | "
                         f"{applied[200]:+.2f} | {used[100]}/{len(at[100])} | {used[200]}/{len(at[200])} | "
                         f"{worst:+.2f} | {passes:.1f} | {record['seconds'] / 60:.1f} min |")
            for key, value in (("lead", lead), ("raw", raw), ("a100", applied[100]), ("a200", applied[200])):
                means[key].append(value)
        lines.append(f"| **average** | {np.mean(means['lead']):+.2f} | {np.mean(means['raw']):+.2f} | | "
                     f"{np.mean(means['a100']):+.2f} | {np.mean(means['a200']):+.2f} | | | | | |")
    return lines


def headline(result: dict[str, Any], pairing: str) -> dict[str, float]:
    """The figures README.md and docs/teacher.md quote of a study, per pairing: the averages over the four earlier
    domains (the teacher's lead and Δ raw at 200 dev pairs, Δ applied at 100 and 200) and news' (a test keeps the
    quotes equal to these)."""
    cells = [c for c in result["cells"] if c["pairing"] == pairing and c["domain"] in DOMAINS]

    def mean(key: str, size: int, domain: str | None = None) -> float:
        chosen = [c for c in cells if c["size"] == size and (domain is None or c["domain"] == domain)]
        by_domain = [float(np.mean([c[key] for c in chosen if c["domain"] == d])) for d in DOMAINS
                     if any(c["domain"] == d for c in chosen)]
        return float(np.mean(by_domain))

    news = [c for c in cells if c["domain"] == "news"]
    return {"lead": mean("teacher_lead", 200), "raw": mean("raw", 200), "applied_100": mean("applied", 100),
            "applied_200": mean("applied", 200), "news_lead": mean("teacher_lead", 200, "news"),
            "news_raw": mean("raw", 200, "news"), "news_used": sum(c["applied"] != 0 for c in news),
            "news_cells": len(news)}


def domain_raw(cells: list[dict[str, Any]], pairing: str, domain: str) -> float:
    """A domain's mean raw test Δ over a study's cells at 200 dev pairs (nan when it has none): the per-domain figure
    the findings tables and the variants section print beside headline()'s means."""
    chosen = [c["raw"] for c in cells if c["pairing"] == pairing and c["domain"] == domain and c["size"] == 200]
    return float(np.mean(chosen)) if chosen else float("nan")


def dev_200(work: Path, variant: str, pairing: str, resamples: int) -> list[dict[str, Any] | None]:
    """Per domain, what a run with dev-200.jsonl (the pool's first DEV_200 rows) as its dev set keeps and decides —
    `cell` with no test pair; None where the variant has no finished run."""
    results: list[dict[str, Any] | None] = []
    for domain in DOMAINS:
        run = load_run(run_folder(work, pairing, domain, variant), pairing, domain, variant)
        if run is None:
            results.append(None)
            continue
        pool = load_pool(pool_file(work / "data", domain))
        teacher = teacher_cosines(work, pairing, domain, pool)
        result = cell(run, teacher, pool, np.arange(DEV_200), np.arange(0), resamples, PATIENCE)
        result["used"] = result["decision"] == "use-adapted" and not result["stopped"]
        results.append(result)
    return results


def applied_average(results: list[dict[str, Any]]) -> float:
    """The mean dev Δ with the decision applied (keep-base → 0): what the grid's last column and the rule read."""
    return float(np.mean([r["dev_change"] if r["used"] else 0.0 for r in results]))


def grid(work: Path, variants: list[str], pairing: str, resamples: int) -> list[str]:
    """The variants compared on dev alone: per domain, the dev Δ of the kept step and adapt's decision, and the
    average with the decision applied (keep-base → 0). No test pair is read."""
    lines = [f"| variant | {' | '.join(DOMAINS)} | average dev Δ | average, decision applied |",
             "|---|" + "---:|" * (len(DOMAINS) + 2)]
    for variant in variants:
        results = dev_200(work, variant, pairing, resamples)
        done = [r for r in results if r is not None]
        if not done:  # a variant not run for this pairing has no row
            continue
        cells = ["–" if r is None else f"{r['dev_change']:+.2f} {'use' if r['used'] else 'keep'} (s{r['step']})"
                 for r in results]
        raw = np.mean([r["dev_change"] for r in done])
        lines.append(f"| {variant} | {' | '.join(cells)} | {raw:+.2f} | {applied_average(done):+.2f} |")
    return lines


# research/findings.md, "Objectives together" (the dev rule committed before the runs): the variants it chooses among,
# each with the distill_kind it trains; the incumbent stays unless a challenger's dev-200 average with the decision
# applied beats it by more than SELECTION_MARGIN — and then its test study must confirm it (`confirmed`)
SELECTION = {"k3": "kl", "k3x": "kl:1,sim-mse:100,cosine:5", "k3xn": "kl:0.38,sim-mse:38,cosine:1.9"}
INCUMBENT = "k3"
SELECTION_MARGIN = 0.05
SELECTION_PAIRING = "l6-mpnet"


def select(work: Path, variants: list[str], pairing: str, resamples: int) -> tuple[str, dict[str, float]]:
    """(the default the rule names, each finished variant's dev-200 average with the decision applied). A variant
    is in the choice only with a finished run in every domain."""
    scores = {}
    for variant in variants:
        results = [r for r in dev_200(work, variant, pairing, resamples) if r is not None]
        if len(results) == len(DOMAINS):
            scores[variant] = applied_average(results)
    if INCUMBENT not in scores:
        raise SystemExit(f"select: the incumbent {INCUMBENT} has no finished runs in {work}")
    return chosen_variant(scores), scores


CONFIRMED_ON = ("raw", "applied_100", "applied_200")  # headline()'s means over the four domains


def confirmed(work: Path, chosen: str, pairing: str) -> tuple[str, dict[str, dict[str, float]]]:
    """(the default, each compared variant's test figures). The confirmation, written after the first grid's test
    study showed its dev choice behind the incumbent (research/findings.md, "Objectives together"): the variant the dev
    rule names replaces the incumbent only if its test study (study-VARIANT.json, read after the choice) is not below
    the incumbent's on any of CONFIRMED_ON. It can only keep the incumbent, never pick another challenger."""
    if chosen == INCUMBENT:
        return chosen, {}
    return confirmation(work, INCUMBENT, chosen, [pairing])


def confirmation(work: Path, incumbent: str, chosen: str, pairings: list[str],
                 ) -> tuple[str, dict[str, dict[str, float]]]:
    """(the default, each variant's CONFIRMED_ON test figures, means over `pairings` of headline()): `chosen` stays
    only if it is below the incumbent on none of them."""
    figures = {variant: {key: float(np.mean([headline(study, p)[key] for p in pairings])) for key in CONFIRMED_ON}
               for variant in (incumbent, chosen)
               for study in [json.loads(study_path(work, variant).read_text())]}
    behind = any(figures[chosen][key] < figures[incumbent][key] for key in CONFIRMED_ON)
    return (incumbent if behind else chosen), figures


def chosen_variant(scores: dict[str, float]) -> str:
    """The rule on the scores: the best challenger if it beats the incumbent by more than SELECTION_MARGIN (the
    first listed among equal challengers), else the incumbent."""
    challengers = {v: score for v, score in scores.items() if v != INCUMBENT}
    best = max(challengers, key=lambda v: challengers[v], default=None)
    return best if best is not None and challengers[best] > scores[INCUMBENT] + SELECTION_MARGIN else INCUMBENT


@dataclass(frozen=True)
class DevRule:
    """A lever's adoption rule as research/findings.md wrote it before its runs ("The share of neighbours in a batch",
    "Larger batches for a teacher run"): the challenger replaces the incumbent only if its dev-200 average with the
    decision applied — the mean over the pairings whose four runs both variants have finished — beats the
    incumbent's by more than `margin`, and then its test study confirms it on those pairings (`CONFIRMED_ON`)."""

    key: str  # the TrainConfig key the two variants differ in
    variants: dict[str, Any]  # variant → its value of `key`, the incumbent first
    margin: float = 0.25
    pairings: tuple[str, ...] = ("l6-mpnet", "l3-l6")


DEV_RULES = {"share": DevRule("distill_neighbour_share", {"k3": 1.0, "k3h": 0.5}),
             "batch": DevRule("batch_size", {"k3": 64, "k3b": 128})}


def rule_verdict(work: Path, rule: DevRule, resamples: int) -> dict[str, Any]:
    """The rule's steps and the value it names: the pairings it read, each variant's metric, the dev choice, and the
    confirmation's test figures when the dev step names the challenger (read only then)."""
    incumbent, challenger = rule.variants
    per_pairing = {pairing: {variant: [r for r in dev_200(work, variant, pairing, resamples) if r is not None]
                             for variant in rule.variants} for pairing in rule.pairings}
    pairings = [p for p, runs in per_pairing.items() if all(len(r) == len(DOMAINS) for r in runs.values())]
    if not pairings:
        raise SystemExit(f"{rule.key} rule: no pairing has all four runs of {', '.join(rule.variants)} in {work}")
    scores = {variant: float(np.mean([applied_average(per_pairing[p][variant]) for p in pairings]))
              for variant in rule.variants}
    chosen = challenger if scores[challenger] > scores[incumbent] + rule.margin else incumbent
    verdict: dict[str, Any] = {"pairings": pairings, "dev_200_applied": scores, "dev_choice": chosen}
    if chosen != incumbent:
        chosen, verdict["test"] = confirmation(work, incumbent, chosen, pairings)
    verdict["default"] = chosen
    verdict[rule.key] = rule.variants[chosen]
    return verdict


PAIRING_NAMES = {"l6-mpnet": "all-MiniLM-L6-v2 ← all-mpnet-base-v2",
                 "l3-l6": "paraphrase-MiniLM-L3-v2 ← all-MiniLM-L6-v2"}


def rule_tables(work: Path, rule: DevRule, resamples: int) -> list[str]:
    """research/findings.md's two tables of a rule's section, from the stored runs and studies: dev-200 (the rule's
    data: the kept pass's dev Δ and decision per domain), then the test study read after the verdict (raw Δ at 200
    dev pairs per domain, and headline()'s means)."""
    lines = ["| pairing | variant | " + " | ".join(DOMAINS) + " | average dev Δ | average, decision applied |",
             "|---|---|" + "---:|" * (len(DOMAINS) + 2)]
    for pairing in rule.pairings:
        for number, variant in enumerate(rule.variants):
            results = [r for r in dev_200(work, variant, pairing, resamples) if r is not None]
            cells = [f"{typeset(r['dev_change'])} {'use' if r['used'] else 'keep'}" for r in results]
            lines.append(f"| {PAIRING_NAMES[pairing] if number == 0 else ''} | {variant} | {' | '.join(cells)} | "
                         f"{typeset(float(np.mean([r['dev_change'] for r in results])))} | "
                         f"{typeset(applied_average(results))} |")
    lines += ["", "| pairing | variant | " + " | ".join(DOMAINS) + " | raw | applied @100 | applied @200 |",
              "|---|---|" + "---:|" * (len(DOMAINS) + 3)]
    for pairing in rule.pairings:
        for number, variant in enumerate(rule.variants):
            study_result = json.loads(study_path(work, variant).read_text())
            raw = [typeset(domain_raw(study_result["cells"], pairing, d)) for d in DOMAINS]
            head = headline(study_result, pairing)
            lines.append(f"| {PAIRING_NAMES[pairing] if number == 0 else ''} | {variant} | {' | '.join(raw)} | "
                         + " | ".join(typeset(head[key]) for key in CONFIRMED_ON) + " |")
    return lines


SECTION = "distillation"


def section(result: dict[str, Any], results: Path) -> str:
    """The `distillation` section of research/results.md from a study of the default's runs (study(), run on the per-pair
    outputs stored in RESULTS: research/experiments/teacher_evidence.py --store / --render). Nothing in it changes from one
    render to the next: no time of day, no command line of the render."""
    speed = []
    for key, record in result["runs"].items():
        timing = (record.get("teacher") or {}).get("dev_encode_seconds")
        if timing and key.endswith("/news"):
            speed.append(f"{key.split('/')[0]}: the student encodes {timing['student_speedup']:.1f}× as fast as the "
                         f"teacher (1,024 news dev sentences, best of 2 each, alternated, same process)")
    argv = next(iter(result["runs"].values()))["argv"]
    work = argv[argv.index("--output") + 1].split("/runs/")[0]
    body = [
        "## Distillation: a teacher's lead kept by the student",
        "",
        f"Generated by `python -m research.experiments.teacher_evidence --render` from the per-pair outputs in `{results}/` "
        f"(variant `{result['variant']}`: each evaluated step's cosines of the pool's pairs), {result['machine']}. "
        "Each pairing × domain trained once (`sentadapt adapt DOMAIN/corpus.txt --base STUDENT --teacher TEACHER`, "
        "the teacher-run defaults, the pool as `--dev` so every evaluated step's cosines are kept); then, per split "
        f"seed ({result['seeds']} seeds) and dev size, dev pairs are drawn from the pool and test pairs from "
        "test.jsonl (sharing no sentence with them), and what adapt does with that dev set is applied: the teacher "
        "weighed (a CI below 0 stops the run: Δ 0), patience 2, the best evaluated pass kept, the default decision "
        "(risk ≤ 0.20, the choice among the passes paid). Δ raw: the kept pass against the base on test, decision "
        "ignored; Δ applied: keep-base → 0. The teacher's lead: teacher − base on the same test pairs; share raw: "
        "Δ raw / lead (domains where the teacher leads); train time: the run's wall time as stored (job.json), on a "
        "machine that was not quiet.",
        *table(result),
        "",
        *[f"Speed, {line}." for line in speed],
        "",
        "```",
        "../shared/tools/get-all-mpnet-base-v2.sh",
        f"python -m research.experiments.distill_suite --train --variant {result['variant']} --extra=...   # the flags below",
        "python -m research.experiments.teacher_evidence --store && python -m research.experiments.teacher_evidence --render",
        "python -m " + " ".join(argv[1:]).replace(work, "WORK"),
        "```",
    ]
    return "\n".join(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--study", action="store_true")
    parser.add_argument("--pairs", default=",".join(PAIRINGS))
    parser.add_argument("--domains", default=",".join(DOMAINS),
                        help=f"comma list of {','.join(ALL_DOMAINS)} (default: the four earlier ones)")
    parser.add_argument("--variant", default="default", help="a name for the runs of these --extra flags")
    parser.add_argument("--extra", action="append", default=[], help="an adapt argument added to every run")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--grid", help="comma list of variants to compare on dev-200 alone, per pairing of --pairs")
    parser.add_argument("--select", help="comma list of variants: the rule of research/findings.md (\"Objectives "
                                         "together\") applied to their dev-200 outputs; prints the default")
    parser.add_argument("--share-rule", action="store_true",
                        help="the rule of research/findings.md (\"The share of neighbours in a batch\") applied to the "
                             "stored dev grid (then test studies, if it names the challenger); prints the share")
    parser.add_argument("--batch-rule", action="store_true",
                        help="the rule of research/findings.md (\"Larger batches for a teacher run\") applied to the "
                             "stored dev grid (then test studies, if it names the challenger); prints the batch size")
    parser.add_argument("--store-from", type=Path, metavar="WORK",
                        help="copy --variant's finished runs of --pairs × --domains from WORK (where --train ran) into "
                             "--work (research/results/distill: the tracked per-pair outputs the studies read)")
    parser.add_argument("--blend-of", help="train --variant with the teacher_blend α that dev-200 picks per domain; "
                                           "a domain whose α is 1 copies this teacher-alone variant's run")
    args = parser.parse_args()
    domains = tuple(args.domains.split(","))
    if args.train:
        missing = [domain for domain in domains if not (args.work / "data" / domain).is_dir()]
        if missing:
            subprocess.check_call([sys.executable, "-m", "research.experiments.domain_data", "--shared", str(SHARED), "--out",
                                   str(args.work / "data"), "--seed", "0", "--domains", ",".join(missing)])
        for pairing in args.pairs.split(","):
            for domain in domains:
                if args.blend_of:
                    train_blend(args.work, pairing, domain, args.variant, args.blend_of, args.extra, args.reuse,
                                args.resamples)
                else:
                    train(args.work, pairing, domain, args.variant, args.extra, args.reuse)
    if args.store_from:
        store_variant(args.store_from, args.work, args.variant, args.pairs.split(","), domains)
    if args.grid:
        lines = []
        for pairing in args.pairs.split(","):
            lines += ["", f"**{pairing}**", "", *grid(args.work, args.grid.split(","), pairing, args.resamples)]
        print("\n".join(lines))
    if args.select:
        pairing = args.pairs.split(",")[0]
        chosen, scores = select(args.work, args.select.split(","), pairing, args.resamples)
        for variant, score in scores.items():
            print(f"{variant}: dev-200 average, decision applied {score:+.2f}")
        print(f"the dev rule names {chosen}")
        default, figures = confirmed(args.work, chosen, pairing)
        for variant, values in figures.items():
            print(f"{variant} on test: " + ", ".join(f"{key} {values[key]:+.2f}" for key in CONFIRMED_ON))
        print(f"default: {default} (distill_kind={SELECTION.get(default, '?')})")
    for name in ("share", "batch"):
        if getattr(args, f"{name}_rule"):
            print(json.dumps(rule_verdict(args.work, DEV_RULES[name], args.resamples), indent=1))
            print("\n".join(rule_tables(args.work, DEV_RULES[name], args.resamples)))
    if args.study:
        result = study(args.work, args.variant, args.seeds, args.resamples, domains)
        print("\n".join(table(result)))
        print(json.dumps(result["teacher_evidence"], indent=1))


if __name__ == "__main__":
    main()
