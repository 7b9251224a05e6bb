"""Benchmark: CLSR over cached embeddings — cold vs warm cache, and epochs/s of the training itself.

    python -m bench.bench_clsr --model ../shared/models/all-minilm-l6-v2 \
        --pairs ../shared/data/nli/allnli.dev.jsonl.gz ../shared/data/nli/snli.test.jsonl.gz \
                ../shared/data/sts/stsb.train.jsonl

Runs the same short CLSR training twice in fresh processes against an empty cache directory: the
first encodes every unique sentence with the frozen encoder (cold), the second reuses the cache
(warm). Prints the time to prepare the data, the training time, epochs/s and the warm/cold ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def worker(args: argparse.Namespace) -> None:
    from bench.timed_training import timed_run

    flags = {"epochs": args.epochs, "eval_every": 0, "checkpoint_every": 0}
    run = timed_run("clsr", flags, base=args.model, corpus=args.pairs, output=args.output)
    print("RESULT " + json.dumps({"prepare_s": run.prepare_seconds, "train_s": run.train_seconds,
                                  "epochs": args.epochs, "pairs": len(run.inputs.examples)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="../shared/models/all-minilm-l6-v2")
    parser.add_argument("--pairs", nargs="+", default=["../shared/data/nli/allnli.dev.jsonl.gz",
                                                       "../shared/data/nli/snli.test.jsonl.gz",
                                                       "../shared/data/sts/stsb.train.jsonl"])
    parser.add_argument("--epochs", type=float, default=10)
    parser.add_argument("--out", type=Path, default=Path("bench/out/clsr.json"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--output", default="bench/out/clsr-run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    results = {}
    with tempfile.TemporaryDirectory() as cache:
        for label in ("cold", "warm"):
            command = [sys.executable, "-m", "bench.bench_clsr", "--worker", "--model", args.model, "--epochs",
                       str(args.epochs), "--output", f"bench/out/clsr-{label}", "--pairs", *args.pairs]
            env = {**os.environ, "SENTADAPT_CACHE": cache}
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
            if done.returncode or not lines:
                sys.exit(f"{label} run failed:\n{done.stderr[-3000:]}")
            results[label] = json.loads(lines[0][len("RESULT "):])
    print(f"\nCLSR on {args.model}: {results['cold']['pairs']} pairs, {args.epochs:g} epochs, batch 512")
    print(f"{'run':<6} {'prepare s':>10} {'train s':>9} {'epochs/s':>9}")
    for label, result in results.items():
        result["epochs_per_s"] = args.epochs / result["train_s"]
        print(f"{label:<6} {result['prepare_s']:10.1f} {result['train_s']:9.1f} {result['epochs_per_s']:9.2f}")
    ratio = results["cold"]["prepare_s"] / results["warm"]["prepare_s"]
    print(f"warm cache: data preparation {ratio:.1f}x faster than cold (model loading included in both)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
