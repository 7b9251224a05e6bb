"""Reranking (MTEB Reranking, USEB): rank each query's candidates by cosine; MAP (main), MRR@10, nDCG@10.

Per-query values × 100, averaged over queries; the bootstrap resamples queries. Definitions and tie
handling are sentence-transformers' RerankingEvaluator's (see ranking.py and docs/evaluation.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.pair_files import sniff_columns
from sentadapt.data.rerank_files import RerankRows, read_rerank
from sentadapt.evaluation import ranking, weighted_stats
from sentadapt.evaluation.contract import TASK_TYPES, EmbeddingTable, EvalTask, Outputs
from sentadapt.model.prompts import DOCUMENT, QUERY
from sentadapt.options import TEST_SPLIT

AT_K = 10


@TASK_TYPES.register("reranking")
class RerankingTask(EvalTask):
    kind = "reranking"
    title = "reranking"
    metric_names = ("map", f"mrr@{AT_K}", f"ndcg@{AT_K}")
    unit_name = "queries"
    description = 'JSON Lines {"query": ..., "positive": [...], "negative": [...]} (or "candidates" + "positive")'
    detection_rank = 10  # before the pair types: its rows have a query

    def __init__(self, name: str, rows: RerankRows) -> None:
        super().__init__(name, rows.source)
        self.rows = rows
        sizes = np.array([len(c) for c in rows.candidates])
        self.width = int(sizes.max())
        self.valid = np.arange(self.width)[None, :] < sizes[:, None]
        self.relevant = (np.arange(self.width)[None, :] < np.asarray(rows.positives)[:, None]).astype(np.float64)
        self.flat_candidates = [text for candidates in rows.candidates for text in candidates]

    @classmethod
    def sniff(cls, path: Path) -> bool:
        return "query" in sniff_columns(path)

    @classmethod
    def read(cls, path: Path, split: str = TEST_SPLIT) -> RerankingTask:
        return cls(path.name, read_rerank(path))

    @property
    def units(self) -> int:
        return len(self.rows)

    def texts(self) -> list[str]:
        return [*self.rows.queries, *self.flat_candidates]

    def sided_texts(self) -> list[tuple[str, list[str]]]:
        return [(QUERY, self.rows.queries), (DOCUMENT, self.flat_candidates)]

    def outputs(self, table: EmbeddingTable) -> Outputs:
        import torch

        queries = torch.nn.functional.normalize(table.of(self.rows.queries, QUERY), dim=-1)
        candidates = torch.nn.functional.normalize(table.of(self.flat_candidates, DOCUMENT), dim=-1)
        owner = torch.from_numpy(np.repeat(np.arange(len(self.rows)), self.valid.sum(axis=1)))
        flat = (queries[owner] * candidates).sum(dim=-1).double().numpy()
        scores = np.full(self.valid.shape, -np.inf)
        scores[self.valid] = flat
        return self.per_query(scores)

    def per_query(self, scores: np.ndarray) -> Outputs:
        """(queries, width) cosines, -inf padding → per-query MAP, MRR@10, nDCG@10 (fractions)."""
        order = np.argsort(-scores, axis=1, kind="stable")  # ties keep file order: positives first
        ranked = np.take_along_axis(scores, order, axis=1)
        relevant = np.take_along_axis(self.relevant, order, axis=1)
        valid = np.take_along_axis(self.valid, order, axis=1)
        return {
            "map": ranking.tie_grouped_average_precision(ranked, relevant, valid),
            f"mrr@{AT_K}": ranking.reciprocal_rank(relevant, AT_K),
            f"ndcg@{AT_K}": ranking.tie_averaged_ndcg(ranked, relevant, valid, AT_K),
        }

    def metrics(self, outputs: Outputs) -> tuple[dict[str, float], dict[str, Any]]:
        return ({name: 100 * float(np.mean(outputs[name])) for name in self.metric_names},
                {"candidates": int(self.valid.sum())})

    def resampled(self, outputs: Outputs) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
        return {name: (lambda counts, values=outputs[name]: 100 * weighted_stats.weighted_mean(counts, values))  # type: ignore[misc]
                for name in self.metric_names}
