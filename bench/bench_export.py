"""Benchmark: encode throughput of the ONNX export (fp32 and dynamic int8) vs torch, same sentences, on CPU.

    python -m bench.bench_export --model ../shared/models/all-minilm-l6-v2 --data-dir ../shared/data/sts

Exports the model with `sentadapt export --format onnx --quantize int8` (into a temporary folder), then
encodes the same sentences — the first --sentences unique sentences of STS-B test — with sentadapt's
torch encoder and with onnxruntime on both graphs, with the same tokenization, batches and thread count.
Prints sentences/s and the ratios measured in this run, plus the int8 drift: vector cosine to torch and the
STS-B test Spearman × 100 of each backend. No assertion on timings; writes bench/out/export.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr

import sentadapt
from sentadapt import Encoder  # the torch side: sentadapt's encoder
from sentadapt.exporting.onnx import INT8_FILE, MODEL_FILE, onnx_encode, session  # sentadapt's ONNX inference path


def read_pairs(path: Path) -> tuple[list[str], list[str], list[float]]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows]


def timed(encode, texts: list[str], repeats: int) -> tuple[torch.Tensor, float]:
    """Best of `repeats` runs (a shared machine adds noise in one direction only)."""
    encode(texts[:64])  # warm-up: first-call allocations and graph optimisation
    best, vectors = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        vectors = encode(texts)
        best = min(best, time.perf_counter() - started)
    return vectors, best


def spearman(vectors: dict[str, torch.Tensor], first: list[str], second: list[str], gold: list[float]) -> float:
    left = torch.stack([vectors[t] for t in first])
    right = torch.stack([vectors[t] for t in second])
    return float(spearmanr(torch.nn.functional.cosine_similarity(left, right).numpy(), gold).statistic) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="../shared/models/all-minilm-l6-v2")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data/sts"))
    parser.add_argument("--sentences", type=int, default=2000, help="Unique STS-B test sentences to time.")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    first, second, gold = read_pairs(args.data_dir / "stsb.test.jsonl")
    unique = list(dict.fromkeys(first + second))
    texts = unique[: args.sentences]
    encoder = Encoder.load(args.model, device="cpu")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "onnx"
        started = time.perf_counter()
        result = sentadapt.export(args.model, out, format="onnx", quantize="int8", sentences=texts[:100])
        export_seconds = time.perf_counter() - started
        backends = {
            "torch": lambda t: encoder.encode(t, batch_size=args.batch_size),
            "onnx fp32": lambda t, s=session(out / MODEL_FILE, args.threads): onnx_encode(s, encoder, t,
                                                                                          args.batch_size),
            "onnx int8": lambda t, s=session(out / INT8_FILE, args.threads): onnx_encode(s, encoder, t,
                                                                                         args.batch_size),
        }
        report: dict[str, dict[str, float]] = {}
        vectors: dict[str, torch.Tensor] = {}
        for name, encode in backends.items():
            vectors[name], seconds = timed(encode, texts, args.repeats)
            all_vectors = dict(zip(unique, encode(unique)))
            report[name] = {"seconds": seconds, "sentences_per_s": len(texts) / seconds,
                            "stsb_test_spearman": spearman(all_vectors, first, second, gold)}
        sizes = {name: (out / file).stat().st_size / 1e6 for name, file in (("fp32", MODEL_FILE), ("int8", INT8_FILE))}
    cos = {name: float(torch.nn.functional.cosine_similarity(vectors["torch"], v).min()) for name, v in vectors.items()}
    print(f"{args.model}: {len(texts)} STS-B test sentences, batch {args.batch_size}, {args.threads} threads, "
          f"best of {args.repeats}; export took {export_seconds:.1f}s; model.onnx {sizes['fp32']:.1f} MB, "
          f"model_int8.onnx {sizes['int8']:.1f} MB")
    for check in result.checks:
        print(f"  export check: {check.label}: min cosine {check.min_cosine:.6f}, max |Δ| {check.max_abs:.2e}")
    for name, row in report.items():
        print(f"  {name:9s} {row['sentences_per_s']:8.1f} sentences/s  ({row['seconds']:.2f}s)  "
              f"×{row['sentences_per_s'] / report['torch']['sentences_per_s']:.2f} vs torch  "
              f"min cosine to torch {cos[name]:.4f}  STS-B test {row['stsb_test_spearman']:.2f}")
    drift = report["onnx int8"]["stsb_test_spearman"] - report["torch"]["stsb_test_spearman"]
    print(f"  int8 STS-B drift: {drift:+.2f} Spearman × 100")
    Path("bench/out").mkdir(parents=True, exist_ok=True)
    Path("bench/out/export.json").write_text(json.dumps({
        "model": args.model, "sentences": len(texts), "batch_size": args.batch_size, "threads": args.threads,
        "machine": platform.processor() or platform.machine(), "export_seconds": export_seconds,
        "sizes_mb": sizes, "backends": report, "min_cosine_to_torch": cos, "int8_stsb_drift": drift,
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
