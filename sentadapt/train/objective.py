"""The training objective: the recipe's loss terms, the distillation term, and `--matryoshka` around any term.

A recipe embeds (`Recipe.embed`: its views through the encoder) and names its terms (`Term`: a loss given the cut
applied to the vectors it compares); it never weighs, sums or sizes them. `Objective` does, for every recipe alike:

    total = r · Σ_t f_t · S(t)  +  W · Σ_k w_k · S(D_k)

where S sums a term over the `--matryoshka` prefixes (sentence-transformers' MatryoshkaLoss; the whole vectors when
off), r is `recipe_weight`, f_t a term's factor, and the second sum is the distillation term's kinds
(train/distill.py) with their weights. A term computed from this process's rows alone (`Term.local`) is divided by
the process count: the loop multiplies every loss by it, which is right for terms over gathered rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from torch import Tensor, nn

from sentadapt.recipes.base import Recipe, Term
from sentadapt.recipes.losses import keep_prefix, world_size
from sentadapt.recipes.matryoshka import WHOLE, Matryoshka, whole

if TYPE_CHECKING:
    from collections.abc import Callable

    from sentadapt.config.schema import TrainConfig
    from sentadapt.model.encoder import Encoder
    from sentadapt.teacher.table import TeacherTable
    from sentadapt.train.distill import Distillation


@dataclass
class LossOutput:
    """The loss to back-propagate and its named parts, for the progress line and train.log.

    The parts are detached 0-dim tensors on the loss's device, never Python floats: reading a value back
    (`.item()`) waits for the GPU to finish the step, so the loop reads them once per `log_every` steps. A recipe
    term's part is its value before its factor; the distillation part is W · D."""

    total: Tensor
    parts: dict[str, Tensor] = field(default_factory=dict)


class Objective:
    """What one step minimises: built by the loop from the recipe, `--matryoshka` and the distillation term."""

    def __init__(self, recipe: Recipe, matryoshka: Matryoshka = WHOLE,
                 distillation: Distillation | None = None) -> None:
        self.recipe, self.matryoshka, self.distillation = recipe, matryoshka, distillation

    def __call__(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor]) -> LossOutput:
        distillation = self.distillation
        embedded = None
        if distillation is None or distillation.needs_recipe_loss(heads):
            embedded = self.recipe.embed(encoder, heads, batch, exported=distillation is not None)
        parts: dict[str, Tensor] = {}
        total = self.summed(embedded.terms, parts) if embedded is not None else None
        if distillation is None:
            assert total is not None
            return LossOutput(total, parts)
        exported, frozen_rows = (embedded.exported, embedded.frozen_rows) if embedded is not None else (None, None)
        # The term is the global batch's, gathered like the recipe's contrastive terms: the loop multiplies the loss
        # by the process count P before backward and DDP averages the gradients, which gives each rank's rows their
        # share of the global term's gradient. Every rank logs the same, one process's, value.
        weighted = distillation.weight * self.summed(distillation.terms(encoder, batch, exported, frozen_rows))
        parts["distill"] = weighted.detach()
        if total is None:  # recipe_weight 0: the term alone
            return LossOutput(weighted, parts)
        recipe_weight = distillation.recipe_weight
        return LossOutput((total if recipe_weight == 1 else recipe_weight * total) + weighted, parts)

    def summed(self, terms: Sequence[Term], parts: dict[str, Tensor] | None = None) -> Tensor:
        """Σ_t f_t · S(t) (S: over the Matryoshka sizes for a sized term), each term's S(t) logged in `parts`."""
        total: Tensor | None = None
        for term in terms:
            value = self.sized(term) if term.sized else term.loss(whole)
            if parts is not None:
                parts[term.name] = value.detach()
            if term.local:
                value = value / world_size()
            value = value if term.factor == 1 else term.factor * value
            total = value if total is None else total + value
        assert total is not None, "a recipe or distillation term list is never empty"
        return total

    def sized(self, term: Term) -> Tensor:
        """Σ_k w_k · L(v[:, :d_k]) over the `--matryoshka` sizes (each prefix is itself an embedding); L(v) off."""
        if not self.matryoshka.dims:
            return term.loss(whole)
        total: Tensor | None = None
        for dim, weight in zip(self.matryoshka.dims, self.matryoshka.weights, strict=True):
            value = term.loss(partial(keep_prefix, dim=dim))
            value = value if weight == 1 else weight * value
            total = value if total is None else total + value
        assert total is not None
        return total


def build_objective(config: TrainConfig, recipe: Recipe, encoder: Encoder, table: TeacherTable | None,
                    student_sample: Callable[[int], Tensor]) -> Objective:
    """The run's objective: the recipe's terms, `--matryoshka`'s sizes, and the distillation term toward the teacher's
    `table` (with its blend) or the frozen base, when on. Built before resumed weights load: a frozen base is the
    base. `student_sample(n)`: the student's vectors of the first n examples (a projection to the teacher's width is
    fitted on them)."""
    from sentadapt.train.distill import build_distillation

    teacher = table.vectors if table is not None else None
    # teacher_blend α < 1: the base's table and α
    blend = (table.base_vectors, table.blend) if table is not None and table.base_vectors is not None else None
    distillation = build_distillation(config, recipe, encoder, teacher, student_sample, blend)
    return Objective(recipe, Matryoshka.of(config.dims.matryoshka, config.dims.matryoshka_weights), distillation)
