"""Distillation toward the frozen base model, for every recipe (`--set distill=W`, TrainConfig.distill*).

The recipe supplies, for a batch's sentences, the adapted vectors as the model is exported (with the
gradient) and the frozen base's vectors (`Recipe.distillation_views`); this adds W · D(adapted, base) to the
recipe's loss (D: `distillation_loss`, kl or mse) and logs it as the `distill` part. Off (W = 0): nothing
is built and no pass runs.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from sentadapt.config import TrainConfig
from sentadapt.recipes.base import LossOutput, RecipeBase
from sentadapt.recipes.losses import distillation_loss, world_size


class Distillation:
    def __init__(self, weight: float, kind: str, temperature: float) -> None:
        self.weight, self.kind, self.temperature = weight, kind, temperature

    def term(self, recipe: RecipeBase, encoder: Any, heads: nn.ModuleDict, batch: dict[str, Tensor]) -> Tensor:
        """D(adapted, base) on this process's sentences, unweighted."""
        adapted, base = recipe.distillation_views(encoder, heads, batch)
        return distillation_loss(self.kind, adapted, base, self.temperature)

    def add_to(self, output: LossOutput, recipe: RecipeBase, encoder: Any, heads: nn.ModuleDict,
               batch: dict[str, Tensor]) -> LossOutput:
        weighted = self.weight * self.term(recipe, encoder, heads, batch)
        # A mean over this process's sentences only (no gather). The loop multiplies the loss by the process
        # count P before backward (right for gathered contrastive terms) and DDP averages gradients, so the
        # local term is divided by P, as SG-OPT does with its regulariser: the gradient is then that of the
        # mean of the P local terms. The logged total shows it / P; the `distill` part is this rank's W · D.
        return LossOutput(output.total + weighted / world_size(), {**output.parts, "distill": weighted.detach()})


def build_distillation(config: TrainConfig, recipe: RecipeBase, encoder: Any) -> Distillation | None:
    """None when distill = 0; else let the recipe keep its frozen base (before any step or resumed weights)."""
    if config.distill == 0:
        return None
    recipe.prepare_distillation(encoder)
    return Distillation(config.distill, config.distill_kind, config.distill_temperature)
