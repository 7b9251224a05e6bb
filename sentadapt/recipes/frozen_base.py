"""The base model as it was before training, frozen: what distillation (`--set distill=W`) compares against.

A `FrozenBase` is an `Encoder` of the base's backbone and Dense head with `requires_grad` off, in eval
mode, held in a plain list on the recipe (the recipe is not a module): like SG-OPT's guide it is outside
`TrainingModule`, so never in its state_dict, optimizer, DDP or `.train()` calls, and never checkpointed
(resume rebuilds it from the base model before the checkpoint's weights load). It is made only when
distillation is on and moved to the encoder's device on first use.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor, nn

    from sentadapt.model.encoder import Encoder


class FrozenBase:
    def __init__(self, encoder: Encoder, backbone: nn.Module | None = None) -> None:
        """A frozen copy of `encoder`'s backbone and head; pass `backbone` to share an existing frozen copy
        (SG-OPT's guide) instead of holding a second one."""
        from sentadapt.model.encoder import Encoder

        frozen_backbone = backbone if backbone is not None else copy.deepcopy(encoder.backbone)
        frozen = Encoder(frozen_backbone, encoder.tokenizer, encoder.pooling, copy.deepcopy(list(encoder.head)),  # type: ignore[arg-type]
                         encoder.normalize, encoder.max_length, encoder.name, encoder.prompts)
        self._frozen: list[Encoder] = [frozen.requires_grad_(False).eval()]

    @property
    def encoder(self) -> Encoder:
        return self._frozen[0]

    def embed(self, encoder: Encoder, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """The base's sentence vectors, no gradient, with `encoder`'s current (export) pooling and normalisation,
        so the two sides differ only by what training changed in the weights."""
        import torch

        frozen = self._frozen[0]
        if frozen.device != input_ids.device:
            frozen.to(input_ids.device)
        frozen.follow(encoder)  # the same pooling, normalisation and prompt tokens left out of pooling
        with torch.no_grad():
            return frozen(input_ids, attention_mask)


def clean_embeddings(encoder: Encoder, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """The trained encoder's sentence vectors as evaluated and exported (its pooling and head) with the gradient,
    internal dropout off for this pass (as ConSERT encodes its views), so at step 0 they equal the base's."""
    with encoder.dropout(False):  # (layers that checkpoint still do)
        return encoder(input_ids, attention_mask)
