"""How much of each training batch is padding, with and without length grouping (`length_grouping`).

    python -m bench.bench_padding                       # the STS corpus of ../shared, batches 64, 96, 512
    python -m bench.bench_padding --corpus my.txt --batch-sizes 32,256

A batch is padded to its longest sentence (dynamic padding), so a random batch computes B × max(n) token
positions for Σ n real ones. Grouping (sentadapt.data.batching.plan_epoch: each window of 50 random
batches sorted by length, then the batches shuffled) makes the longest closer to the rest. The figures
are the epoch's plan exactly as the trainer builds it (seed 42, the default), on the tokenizer's counts
(special tokens included, truncated at --max-length): no timing, so they hold on any machine. What they
mean for speed: the encoder's linear layers cost ∝ token positions, attention ∝ B × max(n)²; the
"useful" columns are real / computed for both. What grouping costs in quality is a different question,
measured by the domain suite (research/results.md, "Length grouping").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from sentadapt.data.batching import plan_epoch

ROOT = Path(__file__).resolve().parent.parent


def sts_sentences(shared: Path) -> list[str]:
    """The unique sentences of ../shared/data/sts/*.jsonl (what bench_gpu.py trains on)."""
    seen: dict[str, None] = {}
    for path in sorted((shared / "data" / "sts").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                seen.setdefault(row["sentence1"], None)
                seen.setdefault(row["sentence2"], None)
    return list(seen)


def token_lengths(sentences: list[str], tokenizer_dir: Path, max_length: int) -> np.ndarray:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    ids = tokenizer(sentences, truncation=True, max_length=max_length, padding=False,
                    return_attention_mask=False, return_token_type_ids=False)["input_ids"]
    return np.asarray([len(row) for row in ids], dtype=np.int64)


def padding_figures(lengths: np.ndarray, batch_size: int, grouped: bool, seed: int = 42) -> dict[str, float]:
    """Real vs computed token positions (linear layers) and squared lengths (attention) over one epoch's plan."""
    batches = plan_epoch(lengths, batch_size, seed, 0, grouped)
    taken = lengths[batches]  # (batches, B)
    longest = taken.max(axis=1)
    real, computed = taken.sum(), (longest * batch_size).sum()
    real_sq, computed_sq = (taken.astype(np.float64) ** 2).sum(), (longest.astype(np.float64) ** 2 * batch_size).sum()
    return {"useful_tokens": real / computed, "useful_attention": real_sq / computed_sq,
            "mean_longest": float(longest.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--corpus", type=Path, help="one sentence per line (default: the STS sentences of --shared)")
    parser.add_argument("--tokenizer", type=Path, help="default: --shared/models/all-minilm-l6-v2")
    parser.add_argument("--batch-sizes", default="64,96,512")
    parser.add_argument("--max-length", type=int, default=64)
    args = parser.parse_args()
    if args.corpus:
        sentences = [line for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        sentences = sts_sentences(args.shared)
    lengths = token_lengths(sentences, args.tokenizer or args.shared / "models" / "all-minilm-l6-v2", args.max_length)
    print(f"{len(lengths)} sentences, {lengths.mean():.1f} tokens on average (max length {args.max_length})\n")
    print("| batch | grouping | useful token positions | useful attention (n²) | mean longest in batch | "
          "linear-layer work vs random |")
    print("|---:|---|---:|---:|---:|---:|")
    for batch_size in (int(value) for value in args.batch_sizes.split(",")):
        random = padding_figures(lengths, batch_size, grouped=False)
        for grouped in (False, True):
            figures = padding_figures(lengths, batch_size, grouped)
            print(f"| {batch_size} | {'on' if grouped else 'off'} | {figures['useful_tokens']:.1%} | "
                  f"{figures['useful_attention']:.1%} | {figures['mean_longest']:.1f} | "
                  f"{random['useful_tokens'] / figures['useful_tokens']:.2f}× |")


if __name__ == "__main__":
    main()
