"""Sentence pooling: which hidden layers to average, then how to pool tokens.

Named poolings (L = number of transformer layers; hidden state 0 is the embedding layer):

| name        | layers averaged        | token pooling | used by                                   |
|-------------|------------------------|---------------|-------------------------------------------|
| `cls`       | L                      | first token   | SG-OPT (no BERT pooler MLP)               |
| `mean`      | L                      | mean          | ConSERT training, CLSR, sentence-transformers |
| `max`       | L                      | max           | SG-OPT guide views                        |
| `last2avg`  | L−1, L                 | mean          | ConSERT evaluation and export             |
| `firstlast` | 1, L                   | mean          | SimCSE's fixed "first-last-avg"           |
| `lasttoken` | L                      | last token    | decoder embedders (Qwen3-Embedding, ...)  |

`firstlast` uses the *first transformer layer* (hidden state 1), as SimCSE does since 2022; BERT-flow
and the ConSERT code used the static embedding layer (hidden state 0) instead. Mean and max ignore
padding; [CLS] and [SEP] are included, as in sentence-transformers. `prompt_length` leading tokens are left out
(a model whose Pooling says `include_prompt: false`), exactly as sentence-transformers' Pooling does: they are
masked out of mean and max, and `cls` takes the first token after them. `lasttoken` takes each row's last real
token (the last 1 of its attention mask, whichever side the padding is on), as sentence-transformers' does: what a
causal model has read the whole sentence into.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError
from sentadapt.registry import unknown_name_message

if TYPE_CHECKING:  # torch is imported when pooling runs, so config validation stays fast
    import torch

POOLING_NAMES = ("cls", "mean", "max", "last2avg", "firstlast", "lasttoken")
TOKEN_POOLINGS = ("cls", "mean", "max", "lasttoken")


@dataclass(frozen=True)
class Pooling:
    """`token` pooling over a weighted average of the hidden states listed in `layers`.

    An empty `layers` means the last layer only (no hidden states needed from the model).
    """

    token: str = "mean"
    layers: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.token not in TOKEN_POOLINGS:
            raise ConfigError(unknown_name_message("token pooling", self.token, list(TOKEN_POOLINGS)))
        if self.weights and len(self.weights) != len(self.layers):
            raise ConfigError(f"pooling: {len(self.layers)} layers but {len(self.weights)} weights")

    @classmethod
    def from_name(cls, name: str, num_layers: int) -> Pooling:
        if name in TOKEN_POOLINGS:
            return cls(token=name)
        if name == "last2avg":
            return cls("mean", (num_layers - 1, num_layers), (1.0, 1.0))
        if name == "firstlast":
            return cls("mean", (1, num_layers), (1.0, 1.0))
        raise ConfigError(unknown_name_message("pooling", name, list(POOLING_NAMES)))

    def name(self, num_layers: int) -> str:
        """The named pooling this equals, or a descriptive string for custom layer mixes."""
        for candidate in POOLING_NAMES:
            if Pooling.from_name(candidate, num_layers).canonical(num_layers) == self.canonical(num_layers):
                return candidate
        mix = "+".join(f"{w:g}*h{layer}" for layer, w in zip(self.layers, self.weights))
        return f"{self.token}({mix})"

    def canonical(self, num_layers: int) -> tuple[str, tuple[tuple[int, float], ...]]:
        """Comparable form: last-layer-only and a one-layer mix of layer L are the same pooling."""
        layers = self.layers or (num_layers,)
        weights = self.weights or (1.0,) * len(layers)
        total = sum(weights)
        pairs = tuple(sorted((layer, w / total) for layer, w in zip(layers, weights) if w != 0))
        return self.token, pairs

    @property
    def needs_hidden_states(self) -> bool:
        return bool(self.layers)

    def __call__(
        self,
        last_hidden_state: torch.Tensor,
        attention_mask: torch.Tensor,
        hidden_states: tuple[torch.Tensor, ...] | None = None,
        prompt_length: int = 0,
    ) -> torch.Tensor:
        tokens = self.mix_layers(last_hidden_state, hidden_states)
        return pool_tokens(tokens, attention_mask, self.token, prompt_length)

    def mix_layers(
        self, last_hidden_state: torch.Tensor, hidden_states: tuple[torch.Tensor, ...] | None
    ) -> torch.Tensor:
        if not self.layers:
            return last_hidden_state
        if hidden_states is None:
            raise ValueError("this pooling averages hidden layers: run the model with output_hidden_states")
        weights = self.weights or (1.0,) * len(self.layers)
        total = sum(weights)
        mixed = hidden_states[self.layers[0]] * (weights[0] / total)
        for layer, weight in zip(self.layers[1:], weights[1:]):
            mixed = mixed + hidden_states[layer] * (weight / total)
        return mixed


def pool_tokens(tokens: torch.Tensor, attention_mask: torch.Tensor, mode: str, prompt_length: int = 0,
                ) -> torch.Tensor:
    """Pool (batch, seq, dim) token vectors into (batch, dim), ignoring padding and the first `prompt_length`
    tokens (right-padded batches, as the Encoder makes them)."""
    import torch

    if prompt_length:  # sentence-transformers' Pooling._exclude_prompt_from_mask, on a copy
        attention_mask = attention_mask.clone()
        attention_mask[:, :prompt_length] = 0
    if mode == "cls":
        if prompt_length:  # the first token still pooled, as sentence-transformers picks it (argmax of the mask)
            first = attention_mask.to(torch.int).argmax(dim=1)
            return tokens[torch.arange(tokens.shape[0], device=tokens.device), first]
        return tokens[:, 0]
    mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
    if mode == "mean":
        # clamp: an all-padding row (never produced by a tokenizer) would otherwise divide by zero
        return (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    if mode == "max":
        return tokens.masked_fill(mask == 0, torch.finfo(tokens.dtype).min).amax(dim=1)
    if mode == "lasttoken":  # the last 1 of each row's mask: argmax of the flipped mask finds its first 1
        last = attention_mask.shape[1] - 1 - attention_mask.to(torch.int).flip(1).argmax(dim=1)
        return tokens[torch.arange(tokens.shape[0], device=tokens.device), last]
    raise ConfigError(unknown_name_message("token pooling", mode, list(TOKEN_POOLINGS)))


def resolve_export_pooling(setting: str, encoder: Any, paper: str) -> str:
    """`export_pooling: auto` → the base model's own pooling when its folder declares one (sentence-transformers
    modules.json), else the paper's `paper` pooling; any other setting is a pooling name, kept as is."""
    if setting != "auto":
        return setting
    declared = getattr(encoder, "pooling_source", "default") == "modules.json"
    return encoder.pooling_name if declared else paper
