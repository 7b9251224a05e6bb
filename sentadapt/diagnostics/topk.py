"""ConSERT §5.1 / Figure 4: STS score with the k most frequent tokens left out of mean pooling, k = 0 … K.

Frequencies are counted on the tokenized text exactly as the model sees it, so **[CLS] and [SEP] count**
(one of each per sentence: they are usually ranks 1 and 2, as in ConSERT's figure, whose caption says they
"are the 2 most frequent tokens"); k = 2 is then mean pooling without the special tokens. Padding is never
counted (the pad id's count is forced to 0, even if the text spells "[PAD]"). The model's own layer mix is
mean-pooled whatever its token pooling (a cls or max model gets mean pooling here; the report says so).
A sentence whose every token is removed gets a zero vector, i.e. cosine 0 with everything.

One forward pass per sentence: the pooled sum starts from the never-removed tokens (rank ≥ K) and adds rank
K−1, K−2, … 0 back, scoring after each step (tokens sorted by rank once; each k is one `index_add_`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sentadapt.diagnostics import LAYERS_BATCH_SIZE
from sentadapt.diagnostics.scoring import PairScorer
from sentadapt.diagnostics.states import hidden_state_batches
from sentadapt.events import Progress, progress_step
from sentadapt.model.encoder import Encoder
from sentadapt.model.pooling import Pooling

AVERAGE = "avg"


def token_counts(encoder: Encoder, texts: Sequence[str], max_length: int | None = None) -> torch.Tensor:
    """(V,) occurrences of every token id in `texts`, special tokens included, padding excluded."""
    ids = encoder.tokenize_ids(texts, max_length)
    flat = torch.as_tensor([token for sequence in ids for token in sequence], dtype=torch.long)
    vocabulary = max(len(encoder.tokenizer), encoder.backbone.get_input_embeddings().weight.shape[0])
    counts = torch.bincount(flat, minlength=vocabulary)
    if encoder.tokenizer.pad_token_id is not None:
        counts[encoder.tokenizer.pad_token_id] = 0
    return counts


def frequency_ranks(counts: torch.Tensor, max_k: int) -> torch.Tensor:
    """(V,) 0-based frequency rank of the `max_k` most frequent ids (ties: lower id first); `max_k` for the rest."""
    order = torch.argsort(-counts, stable=True)[:max_k]
    order = order[counts[order] > 0]
    ranks = torch.full_like(counts, max_k)
    ranks[order] = torch.arange(len(order))
    return ranks


@dataclass
class TopKCurve:
    curves: dict[str, list[float]]  # task → Spearman × 100 at k = 0 … K (plus "avg" over tasks when several)
    frequent_tokens: list[str]  # the K most frequent tokens, most frequent first
    frequency_source: str
    pooling: str  # the mean pooling used, e.g. "mean" or "mean(0.5*h5+0.5*h6)"
    special_tokens_counted: bool = True

    @property
    def headline(self) -> str:
        return AVERAGE if AVERAGE in self.curves else next(iter(self.curves))

    @property
    def best_k(self) -> int:
        return int(np.nanargmax(self.curves[self.headline]))

    @property
    def gain(self) -> float:
        curve = self.curves[self.headline]
        return curve[self.best_k] - curve[0]

    def to_dict(self) -> dict[str, object]:
        curve = self.curves[self.headline]
        return {
            "k": list(range(len(curve))), "curves": self.curves, "headline": self.headline,
            "k0": curve[0], "best_k": self.best_k, "best": curve[self.best_k], "gain": self.gain,
            "frequent_tokens": self.frequent_tokens, "frequency_source": self.frequency_source,
            "special_tokens_counted": self.special_tokens_counted, "pooling": self.pooling,
        }


def topk_curve(
    encoder: Encoder,
    tasks: dict[str, PairScorer],
    frequency_texts: Sequence[str],
    frequency_source: str,
    max_k: int,
    batch_size: int = LAYERS_BATCH_SIZE,
    max_length: int | None = None,
    progress: Progress | None = None,
) -> TopKCurve:
    """The curve for every task (and their average)."""
    ranks = frequency_ranks(token_counts(encoder, frequency_texts, max_length), max_k)
    frequent_ids = torch.argsort(ranks, stable=True)[: int((ranks < max_k).sum())]
    pooling = Pooling("mean", encoder.pooling.layers, encoder.pooling.weights)
    curves: dict[str, list[float]] = {}
    for name, scorer in tasks.items():
        with progress_step(progress, f"top-k: encoding {name}", len(scorer.sentences)) as advance:
            tokens, rows, token_ranks = _flat_tokens(encoder, scorer.sentences, pooling, ranks, batch_size,
                                                     max_length, advance)
        curves[name] = _masked_mean_scores(encoder, scorer, tokens, rows, token_ranks, max_k)
    if len(curves) > 1:
        curves[AVERAGE] = np.mean(np.array(list(curves.values())), axis=0).tolist()
    return TopKCurve(curves, encoder.tokenizer.convert_ids_to_tokens(frequent_ids.tolist()), frequency_source,
                     pooling.name(encoder.num_layers))


def _flat_tokens(
    encoder: Encoder, sentences: list[str], pooling: Pooling, ranks: torch.Tensor, batch_size: int,
    max_length: int | None, advance: Callable[[int], None] | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every real token's (layer-mixed) vector, its sentence row and its frequency rank, concatenated."""
    tokens, rows, token_ranks = [], [], []
    for batch in hidden_state_batches(encoder, sentences, batch_size, max_length, advance):
        mixed = pooling.mix_layers(batch.last_hidden_state, batch.hidden_states).float().cpu()
        real = batch.attention_mask.bool()
        tokens.append(mixed[real])
        rows.append(batch.rows.unsqueeze(1).expand_as(real)[real])
        token_ranks.append(ranks[batch.input_ids][real])
    return torch.cat(tokens), torch.cat(rows), torch.cat(token_ranks)


def _masked_mean_scores(
    encoder: Encoder, scorer: PairScorer, tokens: torch.Tensor, rows: torch.Tensor, token_ranks: torch.Tensor,
    max_k: int,
) -> list[float]:
    order = torch.argsort(token_ranks, stable=True)
    tokens, rows, token_ranks = tokens[order], rows[order], token_ranks[order]
    # starts[k] = first position of rank k; ranks run 0 … max_k (max_k = never removed)
    starts = torch.searchsorted(token_ranks, torch.arange(max_k + 2)).tolist()
    sums = torch.zeros((len(scorer.sentences), tokens.shape[1]))
    counts = torch.zeros(len(scorer.sentences))
    scores = [float("nan")] * (max_k + 1)
    for k in range(max_k, -1, -1):  # k = max_k first: only the never-removed tokens
        lo, hi = starts[k], starts[k + 1]
        sums.index_add_(0, rows[lo:hi], tokens[lo:hi])
        counts.index_add_(0, rows[lo:hi], torch.ones(hi - lo))
        with torch.no_grad():
            means = encoder.apply_head((sums / counts.clamp(min=1).unsqueeze(1)).to(encoder.device))
        scores[k] = scorer(means.float().cpu())
    return scores
