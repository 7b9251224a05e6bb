"""Benchmark: `sentadapt eval` on pair classification, reranking and retrieval vs sentence-transformers'
evaluators — same files, same model, fp32, same machine, one run; plus bootstrap cost and a 1M-document search.

    python -m bench.bench_eval_tasks --model ../shared/models/all-minilm-l6-v2 --shared ../shared

Builds the tasks with research/experiments/make_eval_tasks.py (into --tasks-dir) when they are missing. Every timed
run is its own child process (`--only NAME`), so each one's peak RSS is its own and no run warms another's caches.
Peers: `BinaryClassificationEvaluator`, `RerankingEvaluator`, `InformationRetrievalEvaluator` with their
defaults (batch size set equal). sentence-transformers' IR evaluator has no `ignore_identical_ids`, so the
parity numbers of retrieval score the self-hits too (`ignore_identical_ids=False`); the headline retrieval
numbers (BEIR/MTEB protocol) skip them — both from one encoding, both in our time. Our timings include
the 1,000-resample bootstrap CIs. Pair classification and reranking run the public `sentadapt.evaluate`; both
sides' timings include loading the model. Retrieval scores the same encoding under both protocols, which the
public call cannot (it scores BEIR's only), so it drives sentadapt's evaluator directly, as `evaluate` does.

The 1M-document search uses precomputed random unit vectors (384-d, float32; encoding 1M texts with a real
model takes hours on this 2-core CPU): it times `exact_search` and the metrics, and its peak RSS, for a corpus
of that size. Writes bench/out/eval_tasks.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# ---------------------------------------------------------------- ours
def ours(kind: str, path: Path, model: str, batch_size: int) -> dict[str, Any]:
    """`sentadapt eval` through the public `sentadapt.evaluate`, bootstrap included (retrieval: `ours_retrieval`)."""
    import sentadapt

    if kind == "retrieval":
        return ours_retrieval(path, model, batch_size)
    started, cpu = time.perf_counter(), time.process_time()
    files = {"pairs": [path], "task": kind} if kind == "pair-classification" else {"rerank": [path]}
    evaluated = sentadapt.evaluate(model, batch_size=batch_size, dtype="fp32", device="cpu", **files)
    seconds = time.perf_counter() - started
    result = evaluated.reports[0][0].tasks[0]
    return {"seconds": seconds, "cpu_seconds": time.process_time() - cpu, "metrics": result.metrics,
            "intervals": result.intervals, "texts": len(evaluated.evaluators[0].sentences), "units": result.units}


def ours_retrieval(path: Path, model: str, batch_size: int) -> dict[str, Any]:
    """Retrieval scored twice from the same embeddings: with the self-hits (what sentence-transformers computes:
    the parity numbers) and without them (BEIR's protocol, the headline numbers); the second search and bootstrap
    count in our time. `sentadapt.evaluate` scores BEIR's protocol only, so this builds its evaluator itself."""
    from sentadapt import Encoder
    from sentadapt.data.beir import read_beir
    from sentadapt.evaluation.evaluator import Evaluator
    from sentadapt.evaluation.retrieval import RetrievalTask

    started, cpu = time.perf_counter(), time.process_time()
    encoder = Encoder.load(model, device="cpu")
    collection = read_beir(path)
    tasks = [RetrievalTask("parity", collection, ignore_identical_ids=False),
             RetrievalTask("beir", collection, ignore_identical_ids=True)]
    evaluator = Evaluator(tasks)
    report = evaluator(encoder, batch_size=batch_size, dtype="fp32")
    seconds = time.perf_counter() - started
    result = report.tasks[0]
    return {"seconds": seconds, "cpu_seconds": time.process_time() - cpu, "metrics": result.metrics,
            "intervals": result.intervals, "texts": len(evaluator.sentences), "units": result.units,
            "beir_protocol": {"metrics": report.tasks[1].metrics, "intervals": report.tasks[1].intervals,
                              "documents": len(collection.corpus_ids)}}


# ---------------------------------------------------------------- sentence-transformers
def peer(kind: str, path: Path, model_dir: str, batch_size: int) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import (
        BinaryClassificationEvaluator,
        InformationRetrievalEvaluator,
        RerankingEvaluator,
    )

    started, cpu = time.perf_counter(), time.process_time()
    model = SentenceTransformer(model_dir, device="cpu")
    if kind == "pair-classification":
        from sentadapt.data.pair_files import read_labelled_pairs

        pairs = read_labelled_pairs(path)
        evaluator = BinaryClassificationEvaluator(pairs.sentence1, pairs.sentence2, pairs.labels,
                                                  batch_size=batch_size, similarity_fn_names=["cosine"])
        scores = evaluator.compute_metrics(model)["cosine"]
        metrics = {"ap": scores["ap"] * 100, "f1": scores["f1"] * 100, "accuracy": scores["accuracy"] * 100}
    elif kind == "reranking":
        samples = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        scores = RerankingEvaluator(samples, batch_size=batch_size).compute_metrics(model)
        metrics = {"map": scores["map"] * 100, "mrr@10": scores["mrr"] * 100, "ndcg@10": scores["ndcg"] * 100}
    else:
        from sentadapt.data.beir import read_beir

        collection = read_beir(path)
        queries = dict(zip(collection.query_ids, collection.query_texts))
        corpus = dict(zip(collection.corpus_ids, collection.corpus_texts))
        relevant = {q: {collection.corpus_ids[row] for row in rows}
                    for q, rows in zip(collection.query_ids, collection.relevant)}
        evaluator = InformationRetrievalEvaluator(queries, corpus, relevant, batch_size=batch_size,
                                                  mrr_at_k=[10], ndcg_at_k=[10], map_at_k=[100],
                                                  precision_recall_at_k=[10, 100], accuracy_at_k=[10])
        scores = evaluator(model)
        prefix = f"{evaluator.name}_" if evaluator.name else ""
        name = model.similarity_fn_name
        metrics = {"ndcg@10": scores[f"{prefix}{name}_ndcg@10"] * 100, "mrr@10": scores[f"{prefix}{name}_mrr@10"] * 100,
                   "recall@10": scores[f"{prefix}{name}_recall@10"] * 100,
                   "recall@100": scores[f"{prefix}{name}_recall@100"] * 100,
                   "map@100": scores[f"{prefix}{name}_map@100"] * 100}
    return {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu, "metrics": metrics}


# ---------------------------------------------------------------- bootstrap and 1M search
def bootstrap_cost(pairs: int = 10_000, resamples: int = 1000) -> dict[str, Any]:
    from sentadapt.data.pair_files import ScoredPairs
    from sentadapt.evaluation import bootstrap
    from sentadapt.evaluation.sts import ScoredPairsTask

    rng = np.random.default_rng(0)
    gold = np.round(rng.uniform(0, 5, pairs), 1)  # STS-like: 51 distinct gold values, many ties
    cosines = gold / 5 + rng.normal(0, 0.3, pairs)
    data = ScoredPairs([f"a{i}" for i in range(pairs)], [f"b{i}" for i in range(pairs)], gold.tolist(),
                       [""] * pairs, "synthetic")
    task = ScoredPairsTask("synthetic", data)
    started = time.perf_counter()
    values = bootstrap.replicate(pairs, resamples, 0, task.resampled({"cosine": cosines}))
    seconds = time.perf_counter() - started
    return {"pairs": pairs, "resamples": resamples, "seconds_spearman_and_pearson": seconds,
            "spearman_ci": bootstrap.interval(values["spearman"])}


def retrieval_search(path: Path, dim: int = 384) -> dict[str, Any]:
    """Search + metrics only, on the real collection with seeded random unit vectors per text (queries near
    one of their relevant documents): ours (exact chunked search, metrics, bootstrap) vs the IR evaluator
    given the same vectors — what is left of retrieval once encoding is out of the picture."""
    import torch
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.util import cos_sim

    from sentadapt.data.beir import read_beir
    from sentadapt.evaluation.contract import EmbeddingTable
    from sentadapt.evaluation.evaluator import Evaluator
    from sentadapt.evaluation.retrieval import RetrievalTask

    collection = read_beir(path)
    task = RetrievalTask("parity", collection, ignore_identical_ids=False)
    texts = list(dict.fromkeys(task.texts()))
    generator = torch.Generator().manual_seed(0)
    vectors = torch.nn.functional.normalize(torch.randn(len(texts), dim, generator=generator), dim=-1)
    table = EmbeddingTable(texts, vectors)
    # make the task findable: each query's first relevant document moves next to the query's vector
    query_rows = table.rows(collection.query_texts)
    targets = table.rows([collection.corpus_texts[rows[0]] for rows in collection.relevant])
    vectors[targets] = torch.nn.functional.normalize(
        vectors[query_rows] + 0.08 * torch.randn(len(query_rows), dim, generator=generator), dim=-1)

    class Fixed:
        similarity_fn_name = "cosine"

        def encode(self, sentences: Any, **_options: Any) -> torch.Tensor:
            return table.of(list(sentences))

        encode_query = encode_document = encode

    started, cpu = time.perf_counter(), time.process_time()
    evaluator = Evaluator([task])
    result = evaluator.report([task.score(table)], "random", "none").tasks[0]
    ours_seconds, ours_cpu = time.perf_counter() - started, time.process_time() - cpu
    queries = dict(zip(collection.query_ids, collection.query_texts))
    corpus = dict(zip(collection.corpus_ids, collection.corpus_texts))
    relevant = {q: {collection.corpus_ids[r] for r in rows} for q, rows in zip(collection.query_ids,
                                                                               collection.relevant)}
    started, cpu = time.perf_counter(), time.process_time()
    peer = InformationRetrievalEvaluator(queries, corpus, relevant, mrr_at_k=[10], ndcg_at_k=[10], map_at_k=[100],
                                         precision_recall_at_k=[10, 100], accuracy_at_k=[10],
                                         score_functions={"cosine": cos_sim})
    theirs = peer.compute_metrices(Fixed())["cosine"]
    peer_seconds, peer_cpu = time.perf_counter() - started, time.process_time() - cpu
    peer_metrics = {"ndcg@10": theirs["ndcg@k"][10], "mrr@10": theirs["mrr@k"][10],
                    "recall@10": theirs["recall@k"][10], "recall@100": theirs["recall@k"][100],
                    "map@100": theirs["map@k"][100]}
    return {"documents": len(collection.corpus_ids), "queries": len(collection.query_ids),
            "ours_seconds_search_metrics_bootstrap": ours_seconds, "st_seconds_search_metrics": peer_seconds,
            "speedup": peer_seconds / ours_seconds, "ours_cpu_seconds": ours_cpu, "st_cpu_seconds": peer_cpu,
            "cpu_speedup": peer_cpu / ours_cpu, "ours": result.metrics,
            "max_abs_metric_diff": max(abs(result.metrics[k] - 100 * v) for k, v in peer_metrics.items())}


def million(documents: int, queries: int, dim: int = 384) -> dict[str, Any]:
    import torch

    from sentadapt.evaluation import ranking
    from sentadapt.evaluation.retrieval import exact_search

    generator = torch.Generator().manual_seed(0)
    corpus = torch.nn.functional.normalize(torch.randn(documents, dim, generator=generator), dim=-1)
    # each query is a noisy copy of a known document, which is its one relevant document
    targets = torch.randint(0, documents, (queries,), generator=generator)
    query_vectors = corpus[targets] + 0.1 * torch.randn(queries, dim, generator=generator)
    rss_before = peak_rss_mb()
    started = time.perf_counter()
    _, rows = exact_search(query_vectors, corpus, 100)
    relevant = (rows == targets.numpy()[:, None]).astype(np.float64)
    ndcg = ranking.ndcg_at_k(relevant, np.ones(queries), 10).mean() * 100
    return {"documents": documents, "queries": queries, "dim": dim, "search_seconds": time.perf_counter() - started,
            "ndcg@10": float(ndcg), "peak_rss_mb_embeddings_only": rss_before, "peak_rss_mb": peak_rss_mb(),
            "embeddings_mb": documents * dim * 4 / 2**20}


# ---------------------------------------------------------------- driver
RUNS = {
    "pairclass-ours": ("ours", "pair-classification", "pairclass/stsb.test.tsv"),
    "pairclass-st": ("peer", "pair-classification", "pairclass/stsb.test.tsv"),
    "rerank-ours": ("ours", "reranking", "rerank/snli.test.jsonl"),
    "rerank-st": ("peer", "reranking", "rerank/snli.test.jsonl"),
    "retrieval-ours": ("ours", "retrieval", "retrieval/sts-nli"),
    "retrieval-st": ("peer", "retrieval", "retrieval/sts-nli"),
}


def run_one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name == "bootstrap":
        result = bootstrap_cost()
    elif name == "retrieval-search":
        result = retrieval_search(args.tasks_dir / "retrieval/sts-nli")
    elif name == "million":
        result = million(args.synthetic_docs, args.synthetic_queries)
    else:
        who, kind, relative = RUNS[name]
        path = args.tasks_dir / relative
        if who == "peer":
            result = peer(kind, path, args.model, args.batch_size)
        else:
            result = ours(kind, path, args.model, args.batch_size)
    result["peak_rss_mb"] = max(result.get("peak_rss_mb", 0.0), peak_rss_mb())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_seconds_process"] = usage.ru_utime + usage.ru_stime  # whole child, model load included
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="../shared/models/all-minilm-l6-v2")
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    parser.add_argument("--tasks-dir", type=Path, default=Path("bench/out/eval-tasks"))
    parser.add_argument("--batch-size", type=int, default=64, help="same for both")
    parser.add_argument("--synthetic-docs", type=int, default=1_000_000)
    parser.add_argument("--synthetic-queries", type=int, default=1_000)
    parser.add_argument("--runs", default=",".join([*RUNS, "bootstrap", "million"]))
    parser.add_argument("--out", type=Path, default=Path("bench/out/eval_tasks.json"))
    parser.add_argument("--reuse", action="store_true", help="keep the runs already in --out (same model)")
    parser.add_argument("--only", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(run_one(args.only, args)))
        return
    if not (args.tasks_dir / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "research.experiments.make_eval_tasks", "--shared", str(args.shared),
                        "--out", str(args.tasks_dir)], check=True)
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.reuse and args.out.is_file() else {}
    results["model"], results["batch_size"] = args.model, args.batch_size
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.runs.split(","):
        if name in results:
            continue
        command = [sys.executable, "-m", "bench.bench_eval_tasks", "--only", name, "--model", args.model,
                   "--tasks-dir", str(args.tasks_dir), "--batch-size", str(args.batch_size), "--synthetic-docs",
                   str(args.synthetic_docs), "--synthetic-queries", str(args.synthetic_queries)]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        if done.returncode:
            sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        results[name]["load_average_after"] = os.getloadavg()[0]  # a shared machine skews both sides
        args.out.write_text(json.dumps(results, indent=2) + "\n")  # every finished run survives an interruption
        print(f"{name}: {json.dumps(results[name])}", flush=True)
    report(results, args)


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    import torch

    print(f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} "
          f"threads, model {args.model}, batch {args.batch_size}, fp32")
    print(f"{'task':<22} {'ST s':>7} {'ours s':>7} {'speed-up':>9} {'max |Δ| metric':>15} {'ST RSS MB':>10} "
          f"{'ours RSS MB':>12}")
    for task, ours_name, peer_name in (("pair classification", "pairclass-ours", "pairclass-st"),
                                       ("reranking", "rerank-ours", "rerank-st"),
                                       ("retrieval (parity)", "retrieval-ours", "retrieval-st")):
        if ours_name not in results or peer_name not in results:
            continue
        a, b = results[ours_name], results[peer_name]
        diff = max(abs(a["metrics"][m] - b["metrics"][m]) for m in b["metrics"])
        ratio = b["seconds"] / a["seconds"]
        results[f"{task} ratio"] = {"speedup": ratio, "max_abs_metric_diff": diff}
        print(f"{task:<22} {b['seconds']:7.1f} {a['seconds']:7.1f} {ratio:8.2f}x {diff:15.2e} "
              f"{b['peak_rss_mb']:10.0f} {a['peak_rss_mb']:12.0f}")
    if "retrieval-ours" in results:
        r = results["retrieval-ours"]
        beir = r["beir_protocol"]
        print(f"retrieval: {beir['documents']} documents, {r['texts']} unique texts, {r['units']} queries, "
              f"{r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB; BEIR protocol (self-hits skipped): "
              + ", ".join(f"{k} {v:.2f} [{beir['intervals'][k][0]:.2f}, {beir['intervals'][k][1]:.2f}]"
                          for k, v in beir["metrics"].items()))
    if "bootstrap" in results:
        b = results["bootstrap"]
        print(f"bootstrap: {b['pairs']} pairs × {b['resamples']} resamples, Spearman + Pearson CIs in "
              f"{b['seconds_spearman_and_pearson']:.2f} s")
    if "million" in results:
        m = results["million"]
        print(f"synthetic search: {m['documents']:,} random {m['dim']}-d documents × {m['queries']:,} queries, "
              f"exact top-100 in {m['search_seconds']:.1f} s, peak RSS {m['peak_rss_mb']:.0f} MB "
              f"(embeddings alone {m['embeddings_mb']:.0f} MB; "
              f"RSS before the search {m['peak_rss_mb_embeddings_only']:.0f} MB)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
