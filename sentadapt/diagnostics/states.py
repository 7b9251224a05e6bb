"""Run the shared `Encoder`'s backbone once per unique sentence and hand every hidden layer to the reports.

Each report pools what it needs from the same forward pass (all layers × all poolings, masked mean pooling,
token vectors), so nothing is re-encoded per layer or per pooling. Batches are sorted by token length, as in
`Encoder.encode`, and always run in float32 (no autocast: `pdist` and Spearman on fp16 vectors are unsafe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from sentadapt.diagnostics import LAYERS_BATCH_SIZE
from sentadapt.model.encoder import Encoder


@dataclass
class HiddenBatch:
    rows: torch.Tensor  # (B,) index of each sentence in the unique-text list
    input_ids: torch.Tensor  # (B, T) on the CPU
    attention_mask: torch.Tensor  # (B, T) on the CPU
    hidden_states: tuple[torch.Tensor, ...]  # L + 1 tensors (B, T, D), float32, on the encoder's device

    @property
    def last_hidden_state(self) -> torch.Tensor:
        return self.hidden_states[-1]


def unique_texts(texts: Sequence[str]) -> list[str]:
    """First-occurrence order, each text once."""
    return list(dict.fromkeys(texts))


def hidden_state_batches(
    encoder: Encoder,
    texts: Sequence[str],
    batch_size: int = LAYERS_BATCH_SIZE,
    max_length: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[HiddenBatch]:
    """Every hidden state (embedding layer = 0 … L) of every text in `texts` (expected unique), batch by batch."""
    ids = encoder.tokenize_ids(texts, max_length)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
    encoder.eval()
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        batch = encoder.collate([ids[i] for i in chunk])
        with torch.no_grad():  # not inference_mode: consumers may edit these tensors outside it
            device_batch = batch.to(encoder.device)
            outputs = encoder.run_backbone(device_batch.input_ids, device_batch.attention_mask,
                                           output_hidden_states=True)
            hidden = tuple(state.float() for state in outputs.hidden_states)
        yield HiddenBatch(torch.as_tensor(chunk), batch.input_ids, batch.attention_mask, hidden)
        if progress is not None:
            progress(len(chunk))


def special_token_ids(encoder: Encoder) -> tuple[int, ...]:
    """[CLS], [SEP], [PAD], <s>, </s> … — every id the tokenizer adds or pads with."""
    ids = getattr(encoder.tokenizer, "all_special_ids", []) or []
    return tuple(sorted(set(int(i) for i in ids)))
