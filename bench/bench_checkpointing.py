"""Benchmark: `adapt --grad-checkpointing` against the same run without it — peak memory and speed.

    python -m bench.bench_checkpointing --model ../shared/models/all-minilm-l6-v2 --corpus runs/sts-corpus.txt

Both runs train ConSERT on the same model, sentences, batch, max length and steps, each in a fresh subprocess so
its peak RSS is its own (on a GPU: peak allocated CUDA memory too). Checkpointing keeps only each layer's input
in the forward pass and recomputes the layer in backward, so it trades one more forward pass for the layers'
activations; the peak memory it saves grows with batch × length × layers, while the model, optimizer and
framework memory stay. Reported: training sentences/s (the loop alone), peak memory, and the ratios
checkpointed / plain. Writes bench/out/checkpointing.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path


def worker(args: argparse.Namespace) -> None:
    import torch

    from bench.timed_training import timed_run

    flags = {"batch_size": args.batch_size, "max_length": args.max_length, "max_steps": args.steps, "lr": 5e-5,
             "eval_every": 0, "checkpoint_every": 0, "gradient_checkpointing": args.worker == "checkpointed"}
    run = timed_run("consert", flags, base=args.model, corpus=[args.corpus], output=f"bench/out/gc-{args.worker}")
    result = {"sentences_per_s": args.batch_size * args.steps / run.train_seconds,
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if torch.cuda.is_available():
        result["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="../shared/models/all-minilm-l6-v2")
    parser.add_argument("--corpus", default="runs/sts-corpus.txt")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("bench/out/checkpointing.json"))
    parser.add_argument("--worker", choices=["plain", "checkpointed"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    results = {}
    for name in ("plain", "checkpointed"):
        command = [sys.executable, "-m", "bench.bench_checkpointing", "--worker", name, "--model", args.model,
                   "--corpus", args.corpus, "--batch-size", str(args.batch_size), "--max-length",
                   str(args.max_length), "--steps", str(args.steps)]
        done = subprocess.run(command, capture_output=True, text=True)
        line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        if done.returncode or not line:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        results[name] = json.loads(line[0][len("RESULT "):])
    plain, checked = results["plain"], results["checkpointed"]
    print(f"\nConSERT on {args.model}, batch {args.batch_size}, max length {args.max_length}, {args.steps} steps")
    print(f"{'run':<28} {'sentences/s':>12} {'peak RSS MB':>12}" + (" peak CUDA MB" if "peak_cuda_mb" in plain else ""))
    for name, result in results.items():
        cuda = f" {result['peak_cuda_mb']:12.0f}" if "peak_cuda_mb" in result else ""
        print(f"{name:<28} {result['sentences_per_s']:12.1f} {result['peak_rss_mb']:12.0f}{cuda}")
    print(f"checkpointed / plain: speed {checked['sentences_per_s'] / plain['sentences_per_s']:.2f}x, "
          f"peak RSS {checked['peak_rss_mb'] / plain['peak_rss_mb']:.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
