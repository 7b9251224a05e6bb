"""Distillation for every recipe: toward the frozen base (`--set distill=W`) or a teacher (`--teacher MODEL`).

One mechanism: the recipe supplies the batch's sentences as the model is exported, with the gradient
(`Recipe.distillation_student`); a target source supplies vectors of the same sentences — the frozen base
(`BaseTargets`: the recipe's `distillation_base`) or the teacher's vectors cached before training
(`TeacherTargets`: the batch's rows of the table, which the batch builder copied into the batch). This adds
W · D(student, target) to the recipe's loss (D: `distillation_loss`, kl or mse) and logs it as the `distill`
part. A teacher replaces the base as the target (W = teacher_weight); kl compares N × N in-batch similarities,
so the two widths may differ. `recipe_weight` scales the recipe's own loss (0: the term alone). Off (no teacher
and W = 0): nothing is built and no pass runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from sentadapt.config import TrainConfig
from sentadapt.errors import ConfigError
from sentadapt.recipes.base import LossOutput, RecipeBase
from sentadapt.recipes.losses import distillation_loss, world_size

TEACHER_VECTORS = "teacher_vectors"  # the batch key of the teacher's vectors of the batch's examples


class BaseTargets:
    """The frozen base's vectors, which the recipe computes from the batch (a FrozenBase, CLSR's table)."""

    def batch_fields(self, rows: Sequence[int] | np.ndarray) -> dict[str, Tensor]:
        return {}

    def vectors(self, recipe: RecipeBase, encoder: Any, heads: nn.ModuleDict, batch: dict[str, Tensor]) -> Tensor:
        return recipe.distillation_base(encoder, heads, batch)


class TeacherTargets:
    """The teacher's cached vectors: row i of `table` belongs to example i. The batch builder (on the prefetch
    thread, on the host) copies the batch's rows into the batch, so the table stays in host memory and the
    step reads no value back to find them."""

    def __init__(self, table: Tensor) -> None:
        self.table = table

    def batch_fields(self, rows: Sequence[int] | np.ndarray) -> dict[str, Tensor]:
        return {TEACHER_VECTORS: self.table[torch.from_numpy(np.asarray(rows, dtype=np.int64))]}

    def vectors(self, recipe: RecipeBase, encoder: Any, heads: nn.ModuleDict, batch: dict[str, Tensor]) -> Tensor:
        return batch[TEACHER_VECTORS]


class Distillation:
    def __init__(self, weight: float, kind: str, temperature: float,
                 targets: BaseTargets | TeacherTargets | None = None, recipe_weight: float = 1.0) -> None:
        self.weight, self.kind, self.temperature = weight, kind, temperature
        self.targets = targets or BaseTargets()
        self.recipe_weight = recipe_weight  # 0: the distillation term alone

    def batch_fields(self, rows: Sequence[int] | np.ndarray) -> dict[str, Tensor]:
        """What the batch of examples `rows` must carry for the target side (the teacher's rows; nothing else)."""
        return self.targets.batch_fields(rows)

    def term(self, recipe: RecipeBase, encoder: Any, heads: nn.ModuleDict, batch: dict[str, Tensor]) -> Tensor:
        """D(student, target) on this process's sentences, unweighted."""
        student = recipe.distillation_student(encoder, heads, batch)
        return distillation_loss(self.kind, student, self.targets.vectors(recipe, encoder, heads, batch),
                                 self.temperature)

    def add_to(self, output: LossOutput, recipe: RecipeBase, encoder: Any, heads: nn.ModuleDict,
               batch: dict[str, Tensor]) -> LossOutput:
        weighted = self.weight * self.term(recipe, encoder, heads, batch)
        # A mean over this process's sentences only (no gather). The loop multiplies the loss by the process
        # count P before backward (right for gathered contrastive terms) and DDP averages gradients, so the
        # local term is divided by P, as SG-OPT does with its regulariser: the gradient is then that of the
        # mean of the P local terms. The logged total shows it / P; the `distill` part is this rank's W · D.
        total = output.total if self.recipe_weight == 1 else self.recipe_weight * output.total
        return LossOutput(total + weighted / world_size(), {**output.parts, "distill": weighted.detach()})


def build_distillation(config: TrainConfig, recipe: RecipeBase, encoder: Any,
                       teacher: Tensor | None = None) -> Distillation | None:
    """Toward `teacher` (its vectors of every example) when given; else None when distill = 0; else let the
    recipe keep its frozen base (before any step or resumed weights)."""
    if teacher is not None:
        if config.distill_kind == "mse" and teacher.shape[1] != encoder.embedding_dim:
            raise ConfigError(f"distill_kind: mse compares each vector with the teacher's, which needs equal widths "
                              f"(student {encoder.embedding_dim}, teacher {teacher.shape[1]}); use distill_kind=kl")
        return Distillation(config.teacher_weight, config.distill_kind, config.distill_temperature,
                            TeacherTargets(teacher), config.recipe_weight)
    if config.distill == 0:
        return None
    recipe.prepare_distillation(encoder)
    return Distillation(config.distill, config.distill_kind, config.distill_temperature, None, config.recipe_weight)
