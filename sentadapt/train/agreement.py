"""`--set teacher_evidence=on`: a few corpus sentences are held out of a teacher run's training, paired, and each
evaluation scores how well the model's cosines on those pairs agree with the teacher's (evaluation/agreement.py
says why and how the decision reads it).

The held-out sentences: `agreement_holdout` of the corpus's examples (at most 10 % of them), drawn with the run's
seed; the batches never hold them (MicroBatches trains on the other rows). The pairs: each held-out sentence with
its NEAREST most similar held-out sentences under the teacher and RANDOM others, so the pairs span close and
unrelated ones as a similarity ranking must (1,000 sentences → about 5,000 distinct pairs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

HOLDOUT_SHARE = 0.1  # at most this share of the corpus is held out of training
NEAREST, RANDOM = 3, 3  # partners per held-out sentence: its closest under the teacher, and random ones
MIN_HELD_OUT = 50  # fewer sentences give too few distinct pairs for a CI worth reading


@dataclass(frozen=True)
class AgreementPairs:
    """The held-out sentences (`rows` of the examples, `texts`), their pairs and the teacher's cosine of each."""

    rows: np.ndarray  # int64, sorted: the examples held out of training
    texts: list[str]
    first: np.ndarray  # int64 index into texts, per pair
    second: np.ndarray
    teacher: np.ndarray  # float64 teacher cosine per pair

    def cosines(self, encoder: Any, batch_size: int, max_length: int) -> list[float]:
        """The model's cosine of every pair (the held-out sentences encoded once)."""
        vectors = torch.nn.functional.normalize(encoder.encode(self.texts, batch_size=batch_size,
                                                               max_length=max_length).float(), dim=1)
        first, second = torch.from_numpy(self.first), torch.from_numpy(self.second)
        return (vectors[first] * vectors[second]).sum(dim=1).double().tolist()

    def record(self) -> dict[str, Any]:
        return {"sentences": len(self.texts), "pairs": len(self.first), "teacher": self.teacher.tolist()}


def holdout_rows(examples: int, wanted: int, seed: int) -> np.ndarray:
    """The rows held out of training: `wanted`, at most HOLDOUT_SHARE of the examples; empty when that leaves fewer
    than MIN_HELD_OUT (a corpus too small to spare them)."""
    count = min(wanted, int(HOLDOUT_SHARE * examples))
    if count < MIN_HELD_OUT:
        return np.empty(0, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(examples, size=count, replace=False)).astype(np.int64)


def agreement_pairs(rows: np.ndarray, texts: list[str], teacher_vectors: np.ndarray, seed: int) -> AgreementPairs:
    """Each held-out sentence with its NEAREST closest and RANDOM other held-out sentences; unordered pairs kept
    once."""
    vectors = torch.nn.functional.normalize(torch.from_numpy(np.asarray(teacher_vectors, dtype=np.float32)), dim=1)
    similarity = vectors @ vectors.T
    count = len(texts)
    similarity.fill_diagonal_(-float("inf"))
    nearest = similarity.topk(min(NEAREST, count - 1), dim=1).indices.numpy()
    generator = np.random.default_rng(seed)
    shifts = generator.integers(1, count, size=(count, RANDOM))  # a shift ≠ 0 mod count: never the sentence itself
    random = (np.arange(count)[:, None] + shifts) % count
    partners = np.concatenate([nearest, random], axis=1)
    anchors = np.repeat(np.arange(count), partners.shape[1])
    low, high = np.minimum(anchors, partners.ravel()), np.maximum(anchors, partners.ravel())
    pairs = np.unique(np.stack([low, high], axis=1), axis=0)
    similarity.fill_diagonal_(1.0)
    teacher = similarity[torch.from_numpy(pairs[:, 0]), torch.from_numpy(pairs[:, 1])].double().numpy()
    return AgreementPairs(rows, texts, pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64), teacher)
