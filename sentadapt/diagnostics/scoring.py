"""Spearman × 100 of cosine for one set of labelled pairs, from vectors of its unique sentences (sts.py's scorer)."""

from __future__ import annotations

import warnings

import torch

from sentadapt.data.pair_files import ScoredPairs
from sentadapt.diagnostics.states import unique_texts
from sentadapt.evaluation.sts import cosine_scores, spearman100


class PairScorer:
    """Holds the pairs' unique sentences (encode those, in that order) and scores any matrix of their vectors."""

    def __init__(self, name: str, pairs: ScoredPairs) -> None:
        pairs.check_usable()
        self.name = name
        self.pairs = pairs
        self.sentences = unique_texts([*pairs.sentence1, *pairs.sentence2])
        row_of = {sentence: row for row, sentence in enumerate(self.sentences)}
        self.left = torch.as_tensor([row_of[s] for s in pairs.sentence1])
        self.right = torch.as_tensor([row_of[s] for s in pairs.sentence2])

    def __call__(self, vectors: torch.Tensor) -> float:
        """NaN when every cosine is equal (e.g. [CLS] of the embedding layer, identical for every sentence)."""
        cosines = cosine_scores(vectors[self.left].float(), vectors[self.right].float())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's ConstantInputWarning: the NaN says it
            return spearman100(cosines, self.pairs.scores)
