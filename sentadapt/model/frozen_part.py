"""A model's frozen part and the layers trained on top of it (CLSR): the frozen part's vectors are computed once per
text and remembered, so each dev evaluation runs only the trained layers. The Encoder stays an encoder: what is frozen,
and the memo, belong to the recipe that froze it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from sentadapt.model.encoder import Encoder, each_text_once
from sentadapt.options import ENCODE_BATCH_SIZE, VECTOR_DTYPE


class FrozenPart:
    """The backbone, the pooling and the first `layers` head layers of `encoder`, none of them trained: their output
    per (prompt, text), computed once (float32, CPU)."""

    def __init__(self, encoder: Encoder, layers: int) -> None:
        self.encoder, self.layers = encoder, layers
        self.memo: dict[tuple[str, str], torch.Tensor] = {}

    def vectors(self, texts: Sequence[str], batch_size: int = ENCODE_BATCH_SIZE, max_length: int | None = None,
                dtype: str = VECTOR_DTYPE, progress: Callable[[int], None] | None = None,
                prompt: str = "") -> torch.Tensor:
        """The frozen part's output of each text after `prompt` ("" for none), in order; texts it has not seen are
        encoded, once each."""
        missing = [text for text in dict.fromkeys(texts) if (prompt, text) not in self.memo]
        if missing:
            computed = self.encoder.encode(missing, batch_size, max_length, dtype, progress=progress, prompt=prompt,
                                           head_layers=self.layers)
            self.remember(missing, computed, prompt)
        if not texts:
            return torch.empty((0, self.encoder.embedding_dim))
        return torch.stack([self.memo[(prompt, text)] for text in texts])

    def remember(self, texts: Sequence[str], vectors: torch.Tensor, prompt: str) -> None:
        """Vectors computed elsewhere (the embedding cache's file) of `texts` after `prompt`."""
        self.memo.update(((prompt, text), vector) for text, vector in zip(texts, vectors))


class OnFrozenPart:
    """The encoder as it is evaluated while only the layers after its frozen part train: `encode` runs those layers
    over the remembered frozen vectors; everything else (its name, pooling, prompts, saving) is the encoder's."""

    def __init__(self, frozen: FrozenPart) -> None:
        self.frozen = frozen

    def __getattr__(self, name: str) -> Any:  # only what the view does not define itself
        if name == "frozen":  # not set yet (a copy being built): no lookup through itself
            raise AttributeError(name)
        return getattr(self.frozen.encoder, name)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int = ENCODE_BATCH_SIZE, max_length: int | None = None,
               dtype: str = VECTOR_DTYPE, pooling: Any = None, progress: Callable[[int], None] | None = None,
               prompt: str | None = None, prompt_name: str | None = None) -> torch.Tensor:
        """As `Encoder.encode`; another pooling than the model's is a whole pass (its frozen part is another)."""
        encoder = self.frozen.encoder
        if pooling is not None or not texts:
            return encoder.encode(texts, batch_size, max_length, dtype, pooling, progress, prompt, prompt_name)
        prompt = encoder.prompts.resolve(prompt, prompt_name, encoder.name)
        return each_text_once(texts, lambda unique: self._trained_layers(
            self.frozen.vectors(unique, batch_size, max_length, dtype, progress, prompt)))

    def _trained_layers(self, frozen: torch.Tensor) -> torch.Tensor:
        encoder = self.frozen.encoder
        was_training = encoder.training
        encoder.eval()
        vectors = encoder.apply_head(frozen.to(encoder.device), start=self.frozen.layers).float().cpu()
        encoder.train(was_training)
        return vectors
