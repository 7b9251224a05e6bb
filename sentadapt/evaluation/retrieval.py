"""Retrieval (BEIR / MTEB Retrieval): exact cosine search of every query over the whole corpus.

nDCG@10 (main), MRR@10, Recall@10, Recall@100 and MAP@100, binary relevance, × 100, averaged over
queries; the bootstrap resamples queries. Definitions are sentence-transformers'
InformationRetrievalEvaluator's; a query's hits are ordered by score, ties by corpus id.

Search is exact and chunked: a block of queries × a block of documents is one matmul, of which only
the running top 100 per query is kept, so memory beyond the embeddings is bounded by
QUERY_BLOCK × CORPUS_BLOCK scores (1,024 × 16,384 × 4 bytes = 64 MiB), never queries × corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sentadapt.data.beir import BeirCollection, is_beir_folder, read_beir
from sentadapt.evaluation import ranking, weighted_stats
from sentadapt.evaluation.contract import TASK_TYPES, EmbeddingTable, EvalTask, Outputs
from sentadapt.model.prompts import DOCUMENT, QUERY
from sentadapt.options import TEST_SPLIT

if TYPE_CHECKING:
    import torch

TOP_K = 100
QUERY_BLOCK = 1024
CORPUS_BLOCK = 16384


def exact_search(queries: torch.Tensor, corpus: torch.Tensor, k: int = TOP_K, query_block: int = QUERY_BLOCK,
                 corpus_block: int = CORPUS_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Top-k cosine neighbours of each query: (scores, corpus rows), each (queries, k), best first,
    equal scores ordered by corpus row. Documents are normalised block by block (no normalised copy)."""
    import torch

    k = min(k, corpus.shape[0])
    queries = torch.nn.functional.normalize(queries.float(), dim=-1)
    all_scores, all_rows = [], []
    for q_start in range(0, queries.shape[0], query_block):
        block = queries[q_start:q_start + query_block]
        best_scores = torch.empty((block.shape[0], 0))
        best_rows = torch.empty((block.shape[0], 0), dtype=torch.long)
        for c_start in range(0, corpus.shape[0], corpus_block):
            documents = torch.nn.functional.normalize(corpus[c_start:c_start + corpus_block].float(), dim=-1)
            scores = block @ documents.T
            top = torch.topk(scores, min(k, scores.shape[1]), dim=1)
            merged_scores = torch.cat([best_scores, top.values], dim=1)
            merged_rows = torch.cat([best_rows, top.indices + c_start], dim=1)
            keep = torch.topk(merged_scores, min(k, merged_scores.shape[1]), dim=1).indices
            best_scores, best_rows = merged_scores.gather(1, keep), merged_rows.gather(1, keep)
        all_scores.append(best_scores.numpy())
        all_rows.append(best_rows.numpy())
    scores, rows = np.concatenate(all_scores), np.concatenate(all_rows)  # type: ignore[assignment]
    order = np.lexsort((rows, -scores), axis=1)  # by score, then by row (= corpus id order)
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(rows, order, axis=1)


def drop_own_document(rows: np.ndarray, self_rows: np.ndarray) -> np.ndarray:
    """Move each query's own corpus row (if retrieved) to the end of its list, keeping the others in order."""
    own = rows == self_rows[:, None]
    order = np.argsort(own, axis=1, kind="stable")
    return np.take_along_axis(rows, order, axis=1)


@TASK_TYPES.register("retrieval")
class RetrievalTask(EvalTask):
    kind = "retrieval"
    title = "retrieval"
    metric_names = ("ndcg@10", "mrr@10", "recall@10", "recall@100", "map@100")
    unit_name = "queries"
    description = "a BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv"
    reads_folders = True

    def __init__(self, name: str, collection: BeirCollection, ignore_identical_ids: bool = True) -> None:
        super().__init__(name, collection.source)
        self.collection = collection
        self.ignore_identical_ids = ignore_identical_ids
        self.self_rows = np.asarray(collection.query_self_rows if ignore_identical_ids else [], dtype=np.int64)
        self.relevant_counts = np.array([len(rows) for rows in collection.relevant], dtype=np.float64)
        documents = len(collection.corpus_ids)
        self.relevant_keys = np.array([query * documents + row for query, rows in enumerate(collection.relevant)
                                       for row in rows], dtype=np.int64)

    @classmethod
    def sniff(cls, path: Path) -> bool:
        return is_beir_folder(path)

    @classmethod
    def read(cls, path: Path, split: str = TEST_SPLIT) -> RetrievalTask:
        return cls(path.name, read_beir(path, split))

    @property
    def units(self) -> int:
        return len(self.collection.query_ids)

    def texts(self) -> list[str]:
        return [*self.collection.corpus_texts, *self.collection.query_texts]

    def sided_texts(self) -> list[tuple[str, list[str]]]:
        return [(DOCUMENT, self.collection.corpus_texts), (QUERY, self.collection.query_texts)]

    def outputs(self, table: EmbeddingTable) -> Outputs:
        skip_self = self.ignore_identical_ids and bool((self.self_rows >= 0).any())
        k = TOP_K + 1 if skip_self else TOP_K  # one spare hit for the query's own document
        queries = table.of(self.collection.query_texts, QUERY)
        _, rows = exact_search(queries, table.of(self.collection.corpus_texts, DOCUMENT), k)
        if skip_self:
            rows = drop_own_document(rows, self.self_rows)[:, :TOP_K]
        return self.per_query(rows)

    def per_query(self, rows: np.ndarray) -> Outputs:
        """Ranked corpus rows (queries, k) → per-query metric values (fractions)."""
        # one membership test for all queries: (query, corpus row) pairs as single integer keys
        documents = len(self.collection.corpus_ids)
        hits = np.arange(rows.shape[0])[:, None] * documents + rows
        relevant = np.isin(hits, self.relevant_keys).astype(np.float64)
        counts = self.relevant_counts
        return {
            "ndcg@10": ranking.ndcg_at_k(relevant, counts, 10),
            "mrr@10": ranking.reciprocal_rank(relevant, 10),
            "recall@10": ranking.recall_at_k(relevant, counts, 10),
            "recall@100": ranking.recall_at_k(relevant, counts, 100),
            "map@100": ranking.average_precision_at_k(relevant, counts, 100),
        }

    def metrics(self, outputs: Outputs) -> tuple[dict[str, float], dict[str, Any]]:
        collection = self.collection
        return ({name: 100 * float(np.mean(outputs[name])) for name in self.metric_names},
                {"documents": len(collection.corpus_ids), "split": collection.split,
                 "qrels": collection.qrels_path, "queries_without_relevant": collection.skipped_queries,
                 "ignore_identical_ids": self.ignore_identical_ids})

    def resampled(self, outputs: Outputs) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
        return {name: (lambda counts, values=outputs[name]: 100 * weighted_stats.weighted_mean(counts, values))  # type: ignore[misc]
                for name in self.metric_names}
