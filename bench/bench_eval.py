"""Benchmark: `sentadapt eval` vs a plain sentence-transformers + scipy reference, same process, same data.

    python -m bench.bench_eval --model ../shared/models/all-minilm-l6-v2 --data-dir ../shared/data/sts

Prints wall time of each, the ratio, and the largest score difference; writes bench/out/eval.json.
Ours is the public `sentadapt.evaluate` (what `sentadapt eval` runs, 1,000-resample bootstrap CIs included).
The reference is what a user would write by hand: `SentenceTransformer.encode` of both sides of every
task (no de-duplication), cosine, `scipy.stats.spearmanr`. Both timings include loading the model (well
under a second for these models) and reading the files.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr

import sentadapt

# the 7 STS test sets `sentadapt eval` scores by default, in its report order
STS_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def read_pairs(path: Path) -> tuple[list[str], list[str], list[float]]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows]


def reference(
    model_dir: str, data_dir: Path, tasks: list[str], batch_size: int
) -> tuple[dict[str, float], float]:
    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    model = SentenceTransformer(model_dir, device="cpu")
    scores = {}
    for task in tasks:
        first, second, gold = read_pairs(data_dir / f"{task}.test.jsonl")
        left = model.encode(first, batch_size=batch_size, convert_to_tensor=True)
        right = model.encode(second, batch_size=batch_size, convert_to_tensor=True)
        cosines = torch.nn.functional.cosine_similarity(left, right).numpy()
        scores[task] = float(spearmanr(cosines, gold).statistic) * 100
    return scores, time.perf_counter() - started


def ours(
    model_dir: str, data_dir: Path, tasks: list[str], batch_size: int, dtype: str
) -> tuple[dict[str, float], float]:
    started = time.perf_counter()
    result = sentadapt.evaluate(model_dir, sts=",".join(tasks), data_dir=data_dir, batch_size=batch_size,
                                dtype=dtype, device="cpu")
    seconds = time.perf_counter() - started
    return {t.task: t.metrics["spearman"] for t in result.reports[0][0].tasks}, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="../shared/models/all-minilm-l6-v2")
    default_data = os.environ.get("SENTADAPT_DATA_DIR", "../shared/data/sts")
    parser.add_argument("--data-dir", type=Path, default=Path(default_data))
    parser.add_argument("--tasks", default="all", help="comma list or 'all'")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="same for both (sentence-transformers' default is 32)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/eval.json"))
    args = parser.parse_args()
    tasks = list(STS_TASKS) if args.tasks == "all" else args.tasks.split(",")

    ref_scores, ref_time = reference(args.model, args.data_dir, tasks, args.batch_size)
    runs = {"reference (sentence-transformers + scipy, fp32)": (ref_scores, ref_time)}
    for dtype in ("fp32", "bf16"):
        runs[f"sentadapt eval ({dtype})"] = ours(args.model, args.data_dir, tasks, args.batch_size, dtype)

    print(f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, model {args.model}, batch {args.batch_size}")
    print(f"{'run':<50} {'seconds':>8} {'speed-up':>9} {'avg':>7} {'max |Δ| vs ref':>15}")
    results = {}
    for name, (scores, seconds) in runs.items():
        diff = max(abs(scores[t] - ref_scores[t]) for t in tasks)
        average = sum(scores.values()) / len(scores)
        print(f"{name:<50} {seconds:8.1f} {ref_time / seconds:8.2f}x {average:7.2f} {diff:15.4f}")
        results[name] = {"seconds": seconds, "speedup": ref_time / seconds, "scores": scores, "max_abs_diff": diff}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
