"""Benchmark: sentadapt training throughput (ConSERT, SG-OPT) vs sentence-transformers' unsupervised SimCSE.

    python -m bench.bench_train --model ../shared/models/paraphrase-minilm-l3-v2 --corpus runs/sts-corpus.txt
    python -m bench.bench_train --recipes consert,sg-opt ...   # SG-OPT next to ConSERT, same model and batch

All train the same model on the same sentences with the same global batch, max length and number of
steps. ConSERT and SimCSE do two forward passes per sentence (ConSERT: two augmented views; SimCSE:
MultipleNegativesRankingLoss on (s, s) pairs, dropout as the augmentation); SG-OPT does one forward of
the tuned model and one no-grad forward of the frozen guide, plus its 4096-wide projection head over
L + 2 vectors per sentence. Each run is a fresh subprocess, so peak RSS is its own. Reported: training
sentences/s (model loading excluded, the training loop only), peak RSS, and the ratio sentadapt /
sentence-transformers in the same run. Writes bench/out/train.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path


def run_sentadapt(args: argparse.Namespace) -> dict[str, float]:
    from bench.timed_training import timed_run
    from sentadapt.recipes import RECIPES

    flags = {"batch_size": args.batch_size, "max_length": args.max_length, "max_steps": args.steps,
             "eval_every": 0, "checkpoint_every": 0, "mixed_precision": "bf16" if args.precision == "bf16" else "no",
             "lr": RECIPES.get(args.recipe).spec.train_defaults.get("lr", 2e-5)}
    run = timed_run(args.recipe, flags, base=args.model, corpus=[args.corpus], output=args.output)
    return {"seconds": run.train_seconds}


def run_sentence_transformers(args: argparse.Namespace) -> dict[str, float]:
    from bench.peers import read_sentences, train_peer

    sentences = read_sentences(Path(args.corpus), args.batch_size * args.steps)
    return train_peer("simcse", args.model, sentences, steps=args.steps, batch_size=args.batch_size,
                      max_length=args.max_length, lr=2e-5, bf16=args.precision == "bf16", output=args.output,
                      save=False)


def worker(args: argparse.Namespace) -> None:
    result = run_sentence_transformers(args) if args.worker == "st" else run_sentadapt(args)
    result["sentences_per_s"] = args.batch_size * args.steps / result["seconds"]
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="../shared/models/paraphrase-minilm-l3-v2")
    parser.add_argument("--corpus", default="runs/sts-corpus.txt")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--recipes", default="consert", help="sentadapt recipes to run, e.g. consert,sg-opt")
    parser.add_argument("--out", type=Path, default=Path("bench/out/train.json"))
    parser.add_argument("--worker", choices=["sentadapt", "st"], help=argparse.SUPPRESS)
    parser.add_argument("--recipe", default="consert", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    parser.add_argument("--output", default="bench/out/train-run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    results: dict[str, dict[str, float]] = {}
    for precision in args.precisions.split(","):
        for name in ("st", *args.recipes.split(",")):
            kind = "st" if name == "st" else "sentadapt"
            command = [sys.executable, "-m", "bench.bench_train", "--worker", kind, "--recipe", name,
                       "--precision", precision, "--model", args.model, "--corpus", args.corpus, "--batch-size",
                       str(args.batch_size), "--max-length", str(args.max_length), "--steps", str(args.steps),
                       "--output", f"bench/out/train-{name}"]
            done = subprocess.run(command, capture_output=True, text=True)
            line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
            if done.returncode or not line:
                sys.exit(f"{name} {precision} failed:\n{done.stderr[-3000:]}")
            results[f"{name} {precision}"] = json.loads(line[0][len("RESULT "):])
    print(f"\nmodel {args.model}, batch {args.batch_size}, max length {args.max_length}, {args.steps} steps")
    print(f"{'run':<34} {'sentences/s':>12} {'peak RSS MB':>12} {'vs ST':>7}")
    labels = {"st": "sentence-transformers SimCSE", "consert": "sentadapt ConSERT", "sg-opt": "sentadapt SG-OPT"}
    for key, result in results.items():
        name, precision = key.split()
        ratio = result["sentences_per_s"] / results[f"st {precision}"]["sentences_per_s"]
        label = labels.get(name, f"sentadapt {name}")
        print(f"{label + ' ' + precision:<34} {result['sentences_per_s']:12.1f} {result['peak_rss_mb']:12.0f} "
              f"{ratio:6.2f}x")
        result["ratio_vs_st"] = ratio
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
