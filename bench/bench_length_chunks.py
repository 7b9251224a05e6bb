"""Benchmark (issue 70): padding in a teacher run's batches, and what one more encoder pass costs on this CPU.

    python -m bench.bench_length_chunks --padding runs/teacher-run/corpus.txt runs/domain-data/*/corpus.txt
    python -m bench.bench_length_chunks --fit [--isa avx2]

`--padding`: per corpus, the share of the tokens an encoder pass computes that are padding, for the teacher run's
batches (neighbour batches of 64 under paraphrase-MiniLM-L3-v2's vectors of the corpus, all-MiniLM-L6-v2's tokenizer,
max length 64), as one pass per batch (today's peer: the batch padded to its longest row) and as the length chunks
`sentadapt.model.length_chunks.plan_chunks` cuts (the chunks per batch, their padding).

`--fit`: all-MiniLM-L6-v2's forward + backward (dropout off, one whole pass each) on 11 shapes, best of 3 after a
warm-up, fitted as `seconds = a + b · rows · length`: `a / b` is the fixed cost of a pass in tokens, what
PASS_OVERHEAD_TOKENS holds; and the rate of one fp32 matmul of the model's widths (what the kernels reach).
`--isa avx2` re-runs itself with AVX2 kernels alone (PyTorch's, MKL's, oneDNN's: bench.peers.isa_environment).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.peers import isa_environment

SHARED = Path("../shared")
STUDENT = SHARED / "models/all-minilm-l6-v2"
TEACHER = SHARED / "models/paraphrase-minilm-l3-v2"
BATCH, MAX_LENGTH, NEIGHBOURS = 64, 64, 8  # the teacher run's batch, max length and neighbours
SHAPES = [(4, 16), (8, 16), (16, 16), (32, 16), (64, 16), (128, 16), (16, 32), (64, 32), (128, 32), (32, 48),
          (128, 48)]


def padding(corpora: list[Path]) -> None:
    from transformers import AutoTokenizer

    from sentadapt.data.batching import plan_neighbour_epoch, teacher_neighbours
    from sentadapt.model.encoder import Encoder
    from sentadapt.model.length_chunks import plan_chunks

    tokenizer = AutoTokenizer.from_pretrained(str(STUDENT))
    teacher = Encoder.load(str(TEACHER), device="cpu")
    print(f"{'corpus':<40} {'sentences':>9} {'mean tokens':>11} {'padding, one pass':>17} "
          f"{'chunks per batch':>16} {'padding, chunked':>16} {'tokens chunked ÷ one pass':>25}")
    for corpus in corpora:
        texts = list(dict.fromkeys(line.strip() for line in corpus.read_text(encoding="utf-8").splitlines()
                                   if line.strip()))
        lengths = np.array([min(len(ids), MAX_LENGTH) for ids in tokenizer(texts)["input_ids"]])
        neighbours = teacher_neighbours(teacher.encode(texts, max_length=128).numpy(), NEIGHBOURS, 0)
        batches = plan_neighbour_epoch(neighbours, BATCH, 0, 0)
        real = sum(int(lengths[rows].sum()) for rows in batches)
        whole = sum(len(rows) * int(lengths[rows].max()) for rows in batches)
        chunked, chunk_count = 0, 0
        for rows in batches:
            for chunk in plan_chunks(lengths[rows]):
                chunked += len(chunk) * int(lengths[rows][chunk].max())
                chunk_count += 1
        print(f"{corpus!s:<40} {len(texts):9,} {lengths.mean():11.1f} {1 - real / whole:17.0%} "
              f"{chunk_count / len(batches):16.1f} {1 - real / chunked:16.0%} {chunked / whole:24.2f}×")


def fit() -> None:
    import torch

    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(str(STUDENT), device="cpu")
    encoder.train()
    generator = torch.Generator().manual_seed(0)
    tokens, seconds = [], []
    for rows, length in SHAPES:
        ids = torch.randint(1000, 2000, (rows, length), generator=generator)
        mask = torch.ones_like(ids)
        times = []
        for _ in range(4):
            started = time.perf_counter()
            with encoder.dropout(False):
                encoder(ids, mask, whole_batch=True).sum().backward()
            times.append(time.perf_counter() - started)
        tokens.append(rows * length)
        seconds.append(min(times[1:]))
        print(f"{rows:4} rows × {length:3} tokens: {seconds[-1] * 1000:7.1f} ms", flush=True)
    left, right = torch.randn(1024, 384, generator=generator), torch.randn(1536, 384, generator=generator)
    rates = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(20):
            torch.nn.functional.linear(left, right)
        rates.append(20 * 2 * 1024 * 384 * 1536 / (time.perf_counter() - started) / 1e9)
    print(f"fp32 matmul 1024×384 · 384×1536: {max(rates):.0f} GFLOP/s")
    slope, intercept = np.polyfit(tokens, seconds, 1)
    print(f"a = {intercept * 1000:.1f} ms per pass, b = {slope * 1000:.3f} ms per token, a / b = "
          f"{intercept / slope:.0f} tokens (ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'default')})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--padding", type=Path, nargs="+", metavar="CORPUS")
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--isa", choices=["avx2", "avx512", "default"])
    args = parser.parse_args()
    if args.isa and os.environ.get("ATEN_CPU_CAPABILITY") != args.isa:
        argv = [sys.executable, "-m", "bench.bench_length_chunks", *sys.argv[1:]]
        sys.exit(subprocess.call(argv, env={**os.environ, **isa_environment(args.isa)}))
    if args.padding:
        padding(args.padding)
    if args.fit:
        fit()
    if not (args.padding or args.fit):
        parser.error("give --padding CORPUS... or --fit")


if __name__ == "__main__":
    main()
