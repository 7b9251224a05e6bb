"""ConSERT's training pooling on a base that declares [CLS]: train the mean (the paper's, today's default) or the
pooling the user gets? The rule was written before the runs (research/findings.md, "ConSERT's training pooling on a
base that declares [CLS]").

    python -m research.experiments.pooling_probe --bases    # runs/pooling/bases/{l3,l6}-cls: the shared MiniLMs pooled by [CLS]
    python -m research.experiments.pooling_probe --train    # 2 bases × 4 domains × 2 arms of `sentadapt adapt` (~25 min, 2 cores)
    python -m research.experiments.pooling_probe --score    # the base and each run on test.jsonl → research/results/pooling/
    python -m research.experiments.pooling_probe            # the study and its verdict, from research/results/pooling/ alone

The domains are research/experiments/domain_data.py's (`--out runs/domain-data`, seed 0). `--train` skips a run whose
metrics.json exists. `--score` stores, per base × domain, the cosine of every test pair (6 decimals) under the base
and each arm, with each arm's decision and dev Δ from its metrics.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from research.experiments.domain_data import DOMAINS
from research.experiments.results_suite import sentadapt
from research.experiments.stored_runs import computed_or_stored

SHARED = Path("../shared/models")
BASES = {"l3-cls": SHARED / "paraphrase-minilm-l3-v2", "l6-cls": SHARED / "all-minilm-l6-v2"}
ARMS = ("mean", "cls")
DATA = Path("runs/domain-data")
WORK = Path("runs/pooling")
RESULTS = Path("research/results/pooling")
FOUR = tuple(domain for domain in DOMAINS if domain != "social")


def build_bases(work: Path) -> None:
    """Each shared model copied with its sentence-transformers Pooling module set to [CLS]."""
    for name, source in BASES.items():
        target = work / "bases" / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        pooling = target / "1_Pooling" / "config.json"
        config = json.loads(pooling.read_text())
        config.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
        pooling.write_text(json.dumps(config, indent=2) + "\n")
        print(f"{target}: pooled by [CLS]", flush=True)


def run_folder(work: Path, base: str, domain: str, arm: str) -> Path:
    return work / "runs" / base / domain / arm


def train(work: Path, data: Path) -> None:
    for base in BASES:
        for domain in FOUR:
            for arm in ARMS:
                output = run_folder(work, base, domain, arm)
                if (output / "metrics.json").exists():
                    continue
                command = sentadapt("adapt", str(data / domain / "corpus.txt"), "--base", str(work / "bases" / base),
                                    "--dev", str(data / domain / "dev.jsonl"), "--output", str(output),
                                    "--overwrite", "--set", f"train_pooling={arm}")
                print(" ".join(command[2:]), flush=True)
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def cosines(folder: Path, first: list[str], second: list[str]) -> list[float]:
    """The cosine of each pair as the library encodes it (the folder's own pooling: [CLS] for every model here)."""
    import torch
    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(str(folder), device="cpu")
    texts = sorted({*first, *second})
    vectors = torch.nn.functional.normalize(encoder.encode(texts, batch_size=128).float(), dim=1)
    index = {text: row for row, text in enumerate(texts)}
    values = (vectors[[index[t] for t in first]] * vectors[[index[t] for t in second]]).sum(dim=1)
    return np.round(values.double().numpy(), 6).tolist()


def score(work: Path, data: Path, results: Path) -> None:
    from research.experiments.distill_probe import read_pairs  # loads torch: the study needs none

    for base in BASES:
        for domain in FOUR:
            first, second, gold = read_pairs(data / domain / "test.jsonl")
            cell: dict[str, Any] = {"base": base, "domain": domain, "gold": gold.tolist(),
                                    "cosines": {"base": cosines(work / "bases" / base, first, second)}, "runs": {}}
            for arm in ARMS:
                folder = run_folder(work, base, domain, arm)
                metrics = json.loads((folder / "metrics.json").read_text())
                assert metrics["pooling"] == "cls", f"{folder}: exported with {metrics['pooling']}, not [CLS]"
                cell["cosines"][arm] = cosines(folder, first, second)
                cell["runs"][arm] = {key: metrics[key] for key in ("decision", "dev_change", "best_step", "steps")}
            results.mkdir(parents=True, exist_ok=True)
            with gzip.open(results / f"{base}-{domain}.json.gz", "wt", encoding="utf-8") as handle:
                json.dump(cell, handle)
            print(f"{base} {domain}: scored", flush=True)


def spearman(gold: list[float], values: list[float]) -> float:
    return float(100 * spearmanr(gold, values).statistic)


def study(results: Path) -> dict[str, Any]:
    cells = []
    for base in BASES:
        for domain in FOUR:
            with gzip.open(results / f"{base}-{domain}.json.gz", "rt", encoding="utf-8") as handle:
                cell = json.load(handle)
            base_score = spearman(cell["gold"], cell["cosines"]["base"])
            arms = {}
            for arm in ARMS:
                raw = spearman(cell["gold"], cell["cosines"][arm]) - base_score
                used = cell["runs"][arm]["decision"] == "use-adapted"
                arms[arm] = {"raw": raw, "applied": raw if used else 0.0, **cell["runs"][arm]}
            cells.append({"base": base, "domain": domain, "base_score": base_score, "arms": arms})
    return {"cells": cells, "verdict": verdict(cells)}


def verdict(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule written first: `auto` (train [CLS] here) iff its mean raw Δ ≥ mean's + 0.10, its mean applied Δ ≥
    mean's, and no cell's raw Δ more than 0.50 below mean's in the same cell."""
    means = {arm: {kind: float(np.mean([c["arms"][arm][kind] for c in cells])) for kind in ("raw", "applied")}
             for arm in ARMS}
    worst = min(c["arms"]["cls"]["raw"] - c["arms"]["mean"]["raw"] for c in cells)
    conditions = {"raw": means["cls"]["raw"] >= means["mean"]["raw"] + 0.10,
                  "applied": means["cls"]["applied"] >= means["mean"]["applied"],
                  "cells": worst >= -0.50}
    return {"means": means, "worst_cell": worst, "conditions": conditions, "adopt_auto": all(conditions.values())}


def lines(result: dict[str, Any]) -> list[str]:
    out = ["| base | domain | base test | mean: raw Δ | decision | cls: raw Δ | decision |",
           "|---|---|---:|---:|---|---:|---|"]
    for c in result["cells"]:
        arms = c["arms"]
        out.append(f"| {c['base']} | {c['domain']} | {c['base_score']:.2f} | " + " | ".join(
            f"{arms[arm]['raw']:+.2f} | {arms[arm]['decision']}" for arm in ARMS) + " |")
    v = result["verdict"]
    out += ["", "| arm | mean raw Δ | mean applied Δ |", "|---|---:|---:|"]
    out += [f"| {arm} | {v['means'][arm]['raw']:+.2f} | {v['means'][arm]['applied']:+.2f} |" for arm in ARMS]
    met = ", ".join(f"{name} {'met' if ok else 'not met'}" for name, ok in v["conditions"].items())
    out += ["", f"Worst cell (cls − mean, raw): {v['worst_cell']:+.2f}. Conditions: {met}; "
            f"`train_pooling: auto` becomes the default: {'yes' if v['adopt_auto'] else 'no'}."]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bases", action="store_true", help="build the [CLS]-pooled copies of the shared models")
    parser.add_argument("--train", action="store_true", help="train every base × domain × arm")
    parser.add_argument("--score", action="store_true", help="score the bases and runs on the test pairs")
    parser.add_argument("--study", action="store_true", help="recompute the study from research/results/pooling")
    args = parser.parse_args()
    if args.bases:
        build_bases(WORK)
    if args.train:
        train(WORK, DATA)
    if args.score:
        score(WORK, DATA, RESULTS)
    if args.bases or args.train:
        return
    compute = (lambda: study(RESULTS)) if args.score or args.study else None
    print("\n".join(lines(computed_or_stored(RESULTS / "study.json", compute))))


if __name__ == "__main__":
    main()
