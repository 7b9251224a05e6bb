"""One pass over the sentence sample: per-layer random-pair cosines (Ethayarajh 2019) and the model's vectors.

Per layer ℓ = 0 … L: the mean cosine of random *sentence* pairs (mean pooling of layer ℓ) and of random
*token* pairs taken from different sentences (special tokens left out: they are not words in context). Both
are exact averages over all such pairs (see `CrossGroupCosine`), not a sampled estimate. The model's own
sentence vectors (its pooling and head) come out of the same pass for isotropy, spectrum and uniformity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from sentadapt.diagnostics import DIAGNOSE_BATCH_SIZE
from sentadapt.diagnostics.metrics import CrossGroupCosine
from sentadapt.diagnostics.states import hidden_state_batches, special_token_ids
from sentadapt.model.encoder import Encoder
from sentadapt.model.pooling import pool_tokens


@dataclass
class SamplePass:
    embeddings: torch.Tensor  # (N, D) the model's own sentence vectors, float32, rows in `sentences` order
    sentence_cosine_per_layer: list[float]  # mean-pooled layer ℓ, random sentence pairs
    token_cosine_per_layer: list[float]  # random token pairs from different sentences


def sample_pass(
    encoder: Encoder,
    sentences: Sequence[str],
    batch_size: int = DIAGNOSE_BATCH_SIZE,
    max_length: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> SamplePass:
    """`sentences` must be unique (a sentence paired with itself would count as two random sentences)."""
    special = torch.as_tensor(special_token_ids(encoder), dtype=torch.long)
    sentence_pairs, token_pairs = CrossGroupCosine(), CrossGroupCosine()
    embeddings = torch.empty((len(sentences), encoder.embedding_dim))
    for batch in hidden_state_batches(encoder, sentences, batch_size, max_length, progress):
        layers = torch.stack(batch.hidden_states)  # (L + 1, B, T, D)
        mask = batch.attention_mask.to(layers.device)
        per_layer = pool_tokens(layers.flatten(0, 1), mask.repeat(len(layers), 1), "mean").view(*layers.shape[:2], -1)
        sentence_pairs.add(per_layer.unsqueeze(-2), torch.ones(len(batch.rows), 1, device=layers.device))
        words = batch.attention_mask.bool() & ~torch.isin(batch.input_ids, special)
        token_pairs.add(layers, words.to(layers.device))
        with torch.no_grad():
            pooled = encoder.pooling(batch.last_hidden_state, mask, batch.hidden_states)
            embeddings[batch.rows] = encoder.apply_head(pooled).float().cpu()
    return SamplePass(embeddings, sentence_pairs.mean().tolist(), token_pairs.mean().tolist())
