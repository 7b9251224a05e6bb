"""SG-OPT's Figure 1: STS Spearman for every hidden layer × pooling, from one forward pass per sentence.

Hidden state 0 is the embedding layer, L the last transformer layer. Every variant is an ordinary `Pooling`
(cls/mean/max of one layer, last2avg, firstlast, and the model's own pooling) applied to the same hidden
states, followed by the model's Dense head if it has one — so the cell for the model's own pooling equals
what `sentadapt eval` reports on the same pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from sentadapt.data.pair_files import ScoredPairs
from sentadapt.diagnostics import LAYER_MIXES, LAYERS_BATCH_SIZE
from sentadapt.diagnostics.scoring import PairScorer
from sentadapt.diagnostics.states import hidden_state_batches
from sentadapt.model.encoder import Encoder
from sentadapt.model.pooling import Pooling

MODEL_POOLING = "model"
# SG-OPT's Figure 1: first token, mean and max of each layer (the last token is a decoder's pooling, not swept)
SWEPT_POOLINGS = ("cls", "mean", "max")


def cell_name(token: str, layer: int) -> str:
    return f"{token}@{layer}"


def sweep_poolings(num_layers: int) -> dict[str, Pooling]:
    """cls@0 … max@L, last2avg, firstlast: 3 (L + 1) + 2 poolings."""
    poolings = {cell_name(token, layer): Pooling(token, (layer,), (1.0,))
                for layer in range(num_layers + 1) for token in SWEPT_POOLINGS}
    poolings.update({name: Pooling.from_name(name, num_layers) for name in LAYER_MIXES})
    return poolings


@dataclass
class LayerSweep:
    source: str
    num_layers: int
    scores: dict[str, float]  # cell name ("mean@3"), last2avg, firstlast → Spearman × 100 (NaN: constant)
    model_pooling: str
    model_score: float
    token_poolings: tuple[str, ...] = field(default=SWEPT_POOLINGS)

    def grid(self) -> list[list[float]]:
        """[layer][token pooling] as in SG-OPT's Figure 1."""
        return [[self.scores[cell_name(token, layer)] for token in self.token_poolings]
                for layer in range(self.num_layers + 1)]

    @property
    def best(self) -> tuple[str, float]:
        finite = {name: score for name, score in self.scores.items() if not math.isnan(score)}
        name = max(finite, key=finite.__getitem__)
        return name, finite[name]

    def to_dict(self) -> dict[str, object]:
        best_name, best_score = self.best
        return {
            "source": self.source, "layers": list(range(self.num_layers + 1)),
            "token_poolings": list(self.token_poolings), "grid": self.grid(),
            "named": {name: self.scores[name] for name in LAYER_MIXES},
            "best": {"pooling": best_name, "spearman": best_score},
            "model_pooling": {"pooling": self.model_pooling, "spearman": self.model_score},
        }


def layer_sweep(
    encoder: Encoder,
    pairs: ScoredPairs,
    source: str,
    batch_size: int = LAYERS_BATCH_SIZE,
    max_length: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> LayerSweep:
    scorer = PairScorer(source, pairs)
    poolings = {**sweep_poolings(encoder.num_layers), MODEL_POOLING: encoder.pooling}
    vectors = {name: torch.empty((len(scorer.sentences), encoder.embedding_dim)) for name in poolings}
    for batch in hidden_state_batches(encoder, scorer.sentences, batch_size, max_length, progress):
        mask = batch.attention_mask.to(batch.last_hidden_state.device)
        with torch.no_grad():
            for name, pooling in poolings.items():
                pooled = pooling(batch.last_hidden_state, mask, batch.hidden_states)
                vectors[name][batch.rows] = encoder.apply_head(pooled).float().cpu()
    scores = {name: scorer(matrix) for name, matrix in vectors.items()}
    model_score = scores.pop(MODEL_POOLING)
    return LayerSweep(source, encoder.num_layers, scores, encoder.pooling_name, model_score)
