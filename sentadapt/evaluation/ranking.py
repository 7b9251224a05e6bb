"""Per-query ranking metrics on padded (queries, candidates) arrays, vectorised over queries.

Rows are ranked lists, best first; `relevant` is 0/1; `valid` masks the padding of short rows.
Tie handling (see docs/evaluation.md) follows the reference each task is checked against:

- reranking (sentence-transformers' RerankingEvaluator): AP as sklearn's `average_precision_score`
  (a tie group of equal scores counts as one threshold), nDCG as sklearn's `ndcg_score` (gains averaged
  over a tie group, `ignore_ties=False`), MRR by the first relevant position in a stable descending sort
  (ties in file order, positives first);
- retrieval (InformationRetrievalEvaluator): one strict order, ties broken by corpus id, then the usual
  binary-relevance formulas.
"""

from __future__ import annotations

import numpy as np


def discounts(width: int, k: int | None = None) -> np.ndarray:
    """1 / log2(rank + 1) for ranks 1..width, zero beyond k."""
    values = 1.0 / np.log2(np.arange(width) + 2.0)
    if k is not None:
        values[k:] = 0.0
    return values


def reciprocal_rank(relevant: np.ndarray, k: int) -> np.ndarray:
    top = relevant[:, :k] > 0
    first = np.argmax(top, axis=1)
    return np.where(top.any(axis=1), 1.0 / (first + 1), 0.0)


def _tie_group_bounds(scores: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each position, the first and last position of its group of equal scores (rows sorted descending)."""
    queries, width = scores.shape
    positions = np.broadcast_to(np.arange(width), (queries, width))
    new_group = np.ones_like(valid)
    new_group[:, 1:] = scores[:, 1:] != scores[:, :-1]
    ends_group = np.ones_like(valid)
    ends_group[:, :-1] = new_group[:, 1:]
    ends_group |= ~valid
    start = np.maximum.accumulate(np.where(new_group, positions, 0), axis=1)
    end = np.minimum.accumulate(np.where(ends_group, positions, width)[:, ::-1], axis=1)[:, ::-1]
    return start, end


def tie_grouped_average_precision(scores: np.ndarray, relevant: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """sklearn's AP per row: Σ over tie groups of (relevant in group / P) × precision at the group's end."""
    _, end = _tie_group_bounds(scores, valid)
    hits = np.cumsum(relevant, axis=1)
    precision_at_end = np.take_along_axis(hits, end, axis=1) / (end + 1)
    return (relevant * precision_at_end).sum(axis=1) / relevant.sum(axis=1)


def tie_averaged_ndcg(scores: np.ndarray, relevant: np.ndarray, valid: np.ndarray, k: int) -> np.ndarray:
    """sklearn's `ndcg_score(k=k)` per row: each tie group shares its mean gain over its discounted positions."""
    start, end = _tie_group_bounds(scores, valid)
    hits = np.cumsum(relevant, axis=1)
    before = np.where(start > 0, np.take_along_axis(hits, np.maximum(start - 1, 0), axis=1), 0.0)
    mean_gain = (np.take_along_axis(hits, end, axis=1) - before) / (end - start + 1)
    discount = discounts(scores.shape[1], k)
    dcg = (np.where(valid, mean_gain, 0.0) * discount).sum(axis=1)
    return dcg / ideal_dcg(relevant.sum(axis=1), k)


def ideal_dcg(relevant_counts: np.ndarray, k: int) -> np.ndarray:
    """DCG of a ranking with all R relevant items first, cut at k (binary gains)."""
    cumulative = np.r_[0.0, np.cumsum(discounts(k))]
    return cumulative[np.minimum(relevant_counts.astype(np.int64), k)]


def ndcg_at_k(relevant: np.ndarray, relevant_counts: np.ndarray, k: int) -> np.ndarray:
    return (relevant[:, :k] * discounts(min(k, relevant.shape[1]))).sum(axis=1) / ideal_dcg(relevant_counts, k)


def recall_at_k(relevant: np.ndarray, relevant_counts: np.ndarray, k: int) -> np.ndarray:
    return relevant[:, :k].sum(axis=1) / relevant_counts


def average_precision_at_k(relevant: np.ndarray, relevant_counts: np.ndarray, k: int) -> np.ndarray:
    """Σ over relevant hits in the top k of precision at that rank, / min(k, R) (as the IR evaluator)."""
    top = relevant[:, :k]
    precision = np.cumsum(top, axis=1) / np.arange(1, top.shape[1] + 1)
    return (top * precision).sum(axis=1) / np.minimum(k, relevant_counts)
