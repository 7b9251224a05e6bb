"""GPU training throughput: sentences/s, tokens/s and model-FLOPs utilisation (MFU) for fp16 and bf16.

    python bench/bench_gpu.py --model ../shared/models/all-minilm-l6-v2 --corpus runs/sts-corpus.txt
    python bench/bench_gpu.py ... --processes 2     # also the `accelerate launch` multi-process path
    python bench/bench_gpu.py ... --allow-cpu       # check the script itself on a CPU (bf16 only)

Without a CUDA device it prints why and exits 0, so it can sit in any pipeline. MFU is measured, not
looked up: the peak is the best of a few large square matmuls in the same precision on the same card,
and the model's arithmetic per real (non-padding) token is 6 × N FLOPs per view for forward + backward
(N = non-embedding parameters; Kaplan et al.'s 2N forward + 4N backward) plus the attention scores,
12 × layers × hidden × length per token, with ConSERT's two views per sentence. Padding tokens are
computed by the GPU but not counted, so MFU here is the useful fraction. Writes bench/out/gpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

PRECISIONS = {"fp16": torch.float16, "bf16": torch.bfloat16}


def matmul_peak_flops(device: str, dtype: torch.dtype, size: int = 8192, repeats: int = 10) -> float:
    """Best measured FLOP/s of a size × size matmul (2·size³ FLOPs each) in `dtype` on `device`."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(repeats):
        _synchronize(device)
        started = time.perf_counter()
        a @ b
        _synchronize(device)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def flops_per_token(encoder: Any, mean_length: float, views: int = 2) -> float:
    parameters = sum(p.numel() for name, p in encoder.named_parameters() if "embeddings" not in name)
    config = encoder.backbone.config
    attention = 12 * config.num_hidden_layers * config.hidden_size * mean_length
    return views * (6 * parameters + attention)


def train_once(args: argparse.Namespace, precision: str) -> dict[str, float]:
    """ConSERT for args.steps steps in `precision`; the loop alone is timed (loading excluded)."""
    from timed_training import timed_run  # bench/ is on sys.path when this file runs as a script

    flags = {"batch_size": args.batch_size, "max_length": args.max_length, "max_steps": args.steps,
             "eval_every": 0, "checkpoint_every": 0, "mixed_precision": precision}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    run = timed_run("consert", flags, base=args.model, corpus=[args.corpus], output=f"bench/out/gpu-{precision}",
                    device=device)
    lengths = [min(n, args.max_length) for n in run.inputs.examples.lengths()]
    mean_length = sum(lengths) / len(lengths)
    seconds = run.train_seconds
    world = int(os.environ.get("WORLD_SIZE", "1"))
    sentences = args.batch_size * args.steps  # the global batch: all processes together
    tokens = sentences * mean_length
    return {"seconds": seconds, "sentences_per_s": sentences / seconds, "tokens_per_s": tokens / seconds,
            "flops_per_token": flops_per_token(run.inputs.encoder, mean_length), "mean_tokens": mean_length,
            "processes": world}


def measure(args: argparse.Namespace, device: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for precision in args.precisions.split(","):
        if precision == "fp16" and device == "cpu":
            continue  # sentadapt refuses fp16 autocast on CPU (it would silently run fp32)
        peak = matmul_peak_flops(device, PRECISIONS[precision], size=args.matmul_size)
        run = train_once(args, precision)
        achieved = run["tokens_per_s"] * run["flops_per_token"] / run["processes"]  # per device
        results[precision] = {**run, "peak_tflops": peak / 1e12, "achieved_tflops": achieved / 1e12,
                              "mfu": achieved / peak}
    return results


def launch_processes(args: argparse.Namespace, device: str) -> dict[str, Any]:
    """The same measurement under `accelerate launch --num_processes N` (one process per GPU)."""
    out = Path("bench/out/gpu-multi.json")
    cpu = ["--cpu"] if device == "cpu" else []  # --allow-cpu: gloo processes, to check the launch path
    command = [sys.executable, "-m", "accelerate.commands.launch", *cpu, "--num_processes", str(args.processes),
               __file__, "--worker", "--model", args.model, "--corpus", args.corpus, "--steps", str(args.steps),
               "--batch-size", str(args.batch_size), "--max-length", str(args.max_length), "--precisions",
               args.precisions, "--matmul-size", str(args.matmul_size), "--out", str(out),
               *(["--allow-cpu"] if device == "cpu" else [])]
    subprocess.run(command, check=True)
    return json.loads(out.read_text())


def report(label: str, results: dict[str, Any]) -> None:
    print(f"\n{label}")
    print(f"{'precision':<10} {'sentences/s':>12} {'tokens/s':>10} {'TFLOP/s':>8} {'peak':>8} {'MFU':>6}")
    for precision, row in results.items():
        print(f"{precision:<10} {row['sentences_per_s']:12.1f} {row['tokens_per_s']:10.0f} "
              f"{row['achieved_tflops']:8.2f} {row['peak_tflops']:8.1f} {row['mfu']:6.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="../shared/models/all-minilm-l6-v2")
    parser.add_argument("--corpus", default="runs/sts-corpus.txt")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--precisions", default="fp16,bf16")
    parser.add_argument("--processes", type=int, default=1, help="> 1: also run under accelerate launch")
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--allow-cpu", action="store_true", help="run on CPU to check the script (bf16 only)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/gpu.json"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.allow_cpu:
        print("no CUDA device: skipping the GPU benchmark (use --allow-cpu to check the script on a CPU)")
        return
    results = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
               "single": measure(args, device)}
    if args.worker:
        if int(os.environ.get("RANK", "0")) == 0:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results["single"], indent=2) + "\n")
        return
    report(f"{results['device']}: one process, global batch {args.batch_size}", results["single"])
    if args.processes > 1:
        if device == "cuda" and torch.cuda.device_count() < args.processes:
            print(f"\nskipping --processes {args.processes}: only {torch.cuda.device_count()} GPU(s)")
        else:
            results["multi"] = launch_processes(args, device)
            report(f"accelerate launch, {args.processes} processes, global batch {args.batch_size}",
                   results["multi"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
