"""Geometry of an embedding space, as pure functions of vectors (torch, never below float32).

Every function takes an (N, D) matrix (numpy or torch) and L2-normalises rows where the metric is about
directions — cosine is what STS and retrieval see, and it makes models with different vector norms comparable.
Reductions that sum many terms (Gram sums, eigen-decompositions, log-sum-exp) run in float64.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from sentadapt.diagnostics import SAMPLE_SEED

KNN_NEIGHBOURS = 3
FREQUENCY_BUCKET_EDGES = (10, 100, 1_000, 10_000)  # frequency ranks 1–10, 11–100, 101–1000, 1001–10000, >10000


def as_matrix(vectors: torch.Tensor | np.ndarray) -> torch.Tensor:
    """(N, D) float64 tensor on the CPU (fp16/bf16 inputs are widened, never the other way)."""
    matrix = torch.as_tensor(vectors).detach().cpu().to(torch.float64)
    if matrix.ndim != 2:
        raise ValueError(f"expected an (N, D) matrix, got shape {tuple(matrix.shape)}")
    return matrix


def unit_rows(vectors: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Rows scaled to length 1; an all-zero row stays zero (its cosine with anything counts as 0)."""
    return torch.nn.functional.normalize(as_matrix(vectors), dim=-1)


# ------------------------------------------------------------------ random-pair cosine (Ethayarajh 2019)


class CrossGroupCosine:
    """Mean cosine over all pairs of vectors that belong to different groups, accumulated batch by batch.

    With unit vectors u and group sums s_g = Σ_{i∈g} u_i, the ordered pairs from different groups sum to
    |Σ_g s_g|² − Σ_g |s_g|², and there are M² − Σ_g m_g² of them (M vectors, m_g per group), so no N×N matrix
    is ever built. This is the exact expectation over uniformly random pairs, with no sampling noise.
    Groups are sentences: one vector per group gives sentence pairs, a sentence's tokens give token pairs
    from different sentences. Leading dimensions (e.g. one per layer) are carried through.
    """

    def __init__(self) -> None:
        self.total: torch.Tensor | None = None  # (..., D): Σ of all unit vectors
        self.within: torch.Tensor | float = 0.0  # (...): Σ_g |s_g|²
        self.count = 0  # M
        self.within_pairs = 0  # Σ_g m_g²

    def add(self, vectors: torch.Tensor, mask: torch.Tensor) -> None:
        """`vectors` (..., G, T, D): T candidate vectors in each of G groups; `mask` (G, T) marks the real ones."""
        unit = torch.nn.functional.normalize(vectors.to(torch.float64), dim=-1)
        weights = mask.to(torch.float64).unsqueeze(-1)
        group_sums = (unit * weights).sum(dim=-2)  # (..., G, D)
        batch_total = group_sums.sum(dim=-2)
        self.total = batch_total if self.total is None else self.total + batch_total
        self.within = self.within + group_sums.pow(2).sum(dim=(-1, -2))
        sizes = mask.to(torch.int64).sum(dim=-1)
        self.count += int(sizes.sum())
        self.within_pairs += int(sizes.pow(2).sum())

    def mean(self) -> torch.Tensor:
        pairs = self.count**2 - self.within_pairs
        if self.total is None or pairs == 0:
            raise ValueError("need at least two vectors in different groups")
        return (self.total.pow(2).sum(dim=-1) - self.within) / pairs


def mean_pair_cosine(vectors: torch.Tensor | np.ndarray) -> float:
    """Average cos(x_i, x_j) over all pairs i ≠ j: ≈0 isotropic, →1 every vector points the same way."""
    matrix = as_matrix(vectors)
    cosine = CrossGroupCosine()
    cosine.add(matrix.unsqueeze(1), torch.ones(len(matrix), 1))
    return float(cosine.mean())


# ------------------------------------------------------------------ isotropy (Mu & Viswanath 2018)


def isotropy(vectors: torch.Tensor | np.ndarray) -> float:
    """I(W) = min_c Z(c) / max_c Z(c), Z(c) = Σ_i exp(cᵀ w_i), c over the eigenvectors of WᵀW; 1 = isotropic.

    Rows are L2-normalised first, so cᵀw ∈ [−1, 1] and Z(c) ∈ [N/e, N·e]: the floor is e⁻² ≈ 0.135 (every
    vector identical). An eigenvector's sign is arbitrary, so both c and −c are tried; the mean direction of a
    collapsed space then gives the largest Z and its opposite the smallest. Computed in log space.
    """
    unit = unit_rows(vectors)
    _, eigenvectors = torch.linalg.eigh(unit.T @ unit)
    directions = torch.cat([eigenvectors, -eigenvectors], dim=1)
    log_z = torch.logsumexp(unit @ directions, dim=0)
    return float(torch.exp(log_z.min() - log_z.max()))


# ------------------------------------------------------------------ spectrum (BERT-whitening's Σ)


@dataclass
class Spectrum:
    """Variance shares σ_i² / Σσ² of the centred (unit-row) embeddings, largest first."""

    variance_shares: list[float]
    top1_share: float
    top10_share: float
    effective_rank: float  # exp(Shannon entropy of the variance shares): 1 for rank 1, D for isotropic

    def to_dict(self, keep: int = 50) -> dict[str, object]:
        return {"top1_share": self.top1_share, "top10_share": self.top10_share,
                "effective_rank": self.effective_rank, "variance_shares": self.variance_shares[:keep]}


def spectrum(vectors: torch.Tensor | np.ndarray, normalize: bool = True) -> Spectrum:
    """Singular values of the mean-centred matrix → variance shares, top-1/top-10 share, effective rank.

    Effective rank = exp(−Σ p_i log p_i) with p_i = σ_i²/Σσ_j² (shares of variance; Roy & Vetterli 2007 use
    σ_i/Σσ_j instead, which reads higher). It counts how many directions the variance is really spread over.
    """
    matrix = unit_rows(vectors) if normalize else as_matrix(vectors)
    centred = matrix - matrix.mean(dim=0, keepdim=True)
    variance = torch.linalg.svdvals(centred).pow(2)
    total = variance.sum()
    if total <= 0:
        nan = float("nan")
        return Spectrum([], nan, nan, nan)
    shares = variance / total
    positive = shares[shares > 0]
    entropy = -(positive * positive.log()).sum()
    return Spectrum(shares.tolist(), float(shares[0]), float(shares[:10].sum()), float(entropy.exp()))


# ------------------------------------------------------------------ alignment & uniformity (Wang & Isola 2020)


def alignment(left: torch.Tensor | np.ndarray, right: torch.Tensor | np.ndarray, alpha: float = 2.0) -> float:
    """E ‖f(x) − f(y)‖^α over positive pairs (rows of `left` and `right`), unit vectors; lower is better (0–4)."""
    return float((unit_rows(left) - unit_rows(right)).norm(dim=-1).pow(alpha).mean())


def uniformity(vectors: torch.Tensor | np.ndarray, t: float = 2.0) -> float:
    """log E exp(−t ‖f(x) − f(y)‖²) over all pairs i < j, unit vectors; lower is better (−4 … 0 for t = 2)."""
    squared = torch.pdist(unit_rows(vectors)).pow(2)
    if squared.numel() == 0:
        raise ValueError("uniformity needs at least two vectors")
    return float(torch.logsumexp(-t * squared, dim=0) - math.log(squared.numel()))


# ------------------------------------------------------------------ frequency bias (BERT-flow, Li et al. 2020)


@dataclass
class FrequencyBucket:
    ranks: str  # "1–10"
    tokens: int
    mean_norm: float
    mean_knn_distance: float  # mean L2 distance to the KNN_NEIGHBOURS nearest other vocabulary embeddings


def frequency_buckets(
    counts: torch.Tensor,
    embeddings: torch.Tensor,
    exclude_ids: tuple[int, ...] = (),
    edges: tuple[int, ...] = FREQUENCY_BUCKET_EDGES,
    knn_queries: int = 100,
    seed: int = SAMPLE_SEED,
) -> tuple[list[FrequencyBucket], float]:
    """Token-embedding norm and k-NN distance per frequency-rank bucket, and Spearman(rank, norm).

    `counts` (V,) holds how often each token id occurs; only tokens that occur (and are not in `exclude_ids`,
    i.e. special tokens) are ranked, most frequent = rank 1 (buckets break ties by id; the correlation averages
    tied ranks). BERT-flow's finding: frequent tokens sit near the origin (small norm) and rare ones are spread
    out (large neighbour distance), so a positive rank–norm correlation is the frequency bias. k-NN distances
    use up to `knn_queries` random tokens per bucket against the whole vocabulary
    (100 × 5 buckets × 30k × 384 ≈ 6 GFLOP, a few seconds on a CPU).
    """
    from scipy.stats import spearmanr

    counts = counts.clone().to(torch.float64)
    if exclude_ids:
        counts[list(exclude_ids)] = 0
    occurring = torch.nonzero(counts > 0).flatten()
    ids = occurring[torch.argsort(-counts[occurring], stable=True)]  # ties: lower id first, deterministic
    table = as_matrix(embeddings)
    norms = table[ids].norm(dim=-1)
    generator = torch.Generator().manual_seed(seed)
    buckets = []
    bounds = [0, *[edge for edge in edges if edge < len(ids)], len(ids)]
    for start, stop in itertools.pairwise(bounds):
        bucket_ids = ids[start:stop]
        queries = bucket_ids[torch.randperm(len(bucket_ids), generator=generator)[:knn_queries]]
        buckets.append(FrequencyBucket(f"{start + 1}–{stop}", len(bucket_ids), float(norms[start:stop].mean()),
                                       _mean_knn_distance(table, queries)))
    # rank with ties averaged = −count (many tokens share a count of 1; their order by id would be noise)
    correlation = float(spearmanr(-counts[ids].numpy(), norms.numpy()).statistic) if len(ids) > 2 else float("nan")
    return buckets, correlation


def _mean_knn_distance(table: torch.Tensor, queries: torch.Tensor, neighbours: int = KNN_NEIGHBOURS) -> float:
    squared = (table[queries].pow(2).sum(-1, keepdim=True) + table.pow(2).sum(-1) - 2 * table[queries] @ table.T)
    squared[torch.arange(len(queries)), queries] = float("inf")  # a token is not its own neighbour
    nearest = squared.topk(min(neighbours, table.shape[0] - 1), dim=-1, largest=False).values
    return float(nearest.clamp(min=0).sqrt().mean())
