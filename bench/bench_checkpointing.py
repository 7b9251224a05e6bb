"""Benchmark: `adapt --grad-checkpointing` and `adapt --lora` against the same run without them — peak memory and
speed.

    python -m bench.bench_checkpointing --model ../shared/models/all-minilm-l6-v2 --corpus runs/sts-corpus.txt
    python -m bench.bench_checkpointing --variants plain,lora,lora+checkpointed   # LoRA r 16 on attention

Both runs train ConSERT on the same model, sentences, batch, max length and steps, each in a fresh subprocess so
its peak RSS is its own (on a GPU: peak allocated CUDA memory too). Checkpointing keeps only each layer's input
in the forward pass and recomputes the layer in backward, so it trades one more forward pass for the layers'
activations; the peak memory it saves grows with batch × length × layers, while the model, optimizer and
framework memory stay. LoRA (r 16, alpha 32, attention projections) trains ~1 % of the weights: no gradients and
no AdamW moments for the rest (2 × 4 bytes per frozen weight), but every activation is still kept for the
adapters' gradients. Reported: trained parameters, training sentences/s (the loop alone), peak memory, and the
ratios to the first variant. Writes bench/out/checkpointing.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

VARIANTS = ["plain", "checkpointed", "lora", "lora+checkpointed"]


def worker(args: argparse.Namespace) -> None:
    import torch

    from bench.timed_training import timed_run

    parts = args.worker.split("+")
    flags = {"batch_size": args.batch_size, "max_length": args.max_length, "max_steps": args.steps, "lr": 5e-5,
             "eval_every": 0, "checkpoint_every": 0, "gradient_checkpointing": "checkpointed" in parts,
             **({"lora_r": 16, "lora_alpha": 32.0} if "lora" in parts else {})}
    run = timed_run("consert", flags, base=args.model, corpus=[args.corpus],
                    output=f"bench/out/gc-{args.worker.replace('+', '-')}")
    trained = sum(p.numel() for p in run.inputs.encoder.parameters() if p.requires_grad)  # ConSERT: no heads
    result = {"trained_parameters": trained, "sentences_per_s": args.batch_size * args.steps / run.train_seconds,
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
    parser.add_argument("--variants", default="plain,checkpointed",
                        help=f"comma-separated, the first is the reference: {', '.join(VARIANTS)}")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    results = {}
    variants = args.variants.split(",")
    if unknown := [name for name in variants if name not in VARIANTS]:
        sys.exit(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    for name in variants:
        command = [sys.executable, "-m", "bench.bench_checkpointing", "--worker", name, "--model", args.model,
                   "--corpus", args.corpus, "--batch-size", str(args.batch_size), "--max-length",
                   str(args.max_length), "--steps", str(args.steps)]
        done = subprocess.run(command, capture_output=True, text=True)
        line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        if done.returncode or not line:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        results[name] = json.loads(line[0][len("RESULT "):])
    first = results[variants[0]]
    print(f"\nConSERT on {args.model}, batch {args.batch_size}, max length {args.max_length}, {args.steps} steps")
    print(f"{'run':<28} {'trained':>12} {'sentences/s':>12} {'peak RSS MB':>12}"
          + (" peak CUDA MB" if "peak_cuda_mb" in first else ""))
    for name, result in results.items():
        cuda = f" {result['peak_cuda_mb']:12.0f}" if "peak_cuda_mb" in result else ""
        print(f"{name:<28} {result['trained_parameters']:12,} {result['sentences_per_s']:12.1f} "
              f"{result['peak_rss_mb']:12.0f}{cuda}")
    for name in variants[1:]:
        result = results[name]
        print(f"{name} / {variants[0]}: speed {result['sentences_per_s'] / first['sentences_per_s']:.2f}x, "
              f"peak RSS {result['peak_rss_mb'] / first['peak_rss_mb']:.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
