"""Distillation for every recipe: toward the frozen base (`--set distill=W`) or a teacher (`--teacher MODEL`).

One mechanism, the same for every recipe: the student is each example's first text (the sentence, an NLI premise, a
pair's first sentence) as the model is exported — the encoder's pooling and head, dropout off, with the gradient
(`student_vectors`); a target source supplies vectors of the same texts — the frozen base (`BaseTargets`: a
`FrozenBase` copied before any step) or the teacher's vectors cached before training (`TeacherTargets`: the batch's
rows of the table, which the batch builder copied into the batch). A recipe whose examples are rows of a frozen-
vector table (CLSR) gives those rows (`Embedded.frozen_rows`): they are the base's vectors, and its exported ones the
student's. The objective (train/objective.py) adds W · D(student, target) to the recipe's loss and logs it
as the `distill` part. D is `distillation_loss`: kl or sim-mse compare the N × N in-batch similarities (any two
widths); mse or cosine compare each vector with its target, through a training-only projection when a teacher is of
another width; distill_kind may weigh several kinds, and D is then their weighted sum (each kind on the same batch's
vectors). A teacher replaces the base as the target (W = teacher_weight). `recipe_weight` scales the recipe's own
loss (0: the term alone, and the recipe's views are not computed). Off (no teacher and W = 0): nothing is built and
no pass runs.

`FrozenBase` (at the end): the base model as it was before training, frozen, what `--set distill=W` compares against.

A `FrozenBase` is an `Encoder` of the base's backbone and Dense head with `requires_grad` off, in eval
mode, held in a plain list on the recipe (the recipe is not a module): like SG-OPT's guide it is outside
`TrainingModule`, so never in its state_dict, optimizer, DDP or `.train()` calls, and never checkpointed
(resume rebuilds it from the base model before the checkpoint's weights load). It is made only when
distillation is on and moved to the encoder's device on first use."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from sentadapt.config.schema import VECTOR_KINDS, DistillationSettings, DistillMix, TrainConfig
from sentadapt.errors import ConfigError
from sentadapt.recipes.base import RecipeBase, Term
from sentadapt.recipes.losses import blended_cosines, distillation_loss, gather_across_processes
from sentadapt.storage.rowfile import RowFile

if TYPE_CHECKING:
    from sentadapt.model.encoder import Encoder


TEACHER_VECTORS = "teacher_vectors"  # the batch key of the teacher's vectors of the batch's examples
BASE_VECTORS = "base_vectors"  # with a blend target: the base's vectors of the batch's examples


def distilled_tokens(batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """Token ids and mask of each example's first text: the sentence, or the first of a pair (an NLI premise)."""
    prefix = "" if "input_ids" in batch else "a_"
    return batch[f"{prefix}input_ids"], batch[f"{prefix}attention_mask"]


def student_vectors(encoder: Any, batch: dict[str, Tensor]) -> Tensor:
    """Each example's first text as the model is exported, with the gradient, shape (N, D), in the batch's order."""
    return clean_embeddings(encoder, *distilled_tokens(batch))


class BaseTargets:
    """The frozen base's vectors of the batch's first texts: a copy of the base taken before any step (shared with
    the recipe when it keeps one), or the recipe's frozen rows."""

    def __init__(self, frozen: FrozenBase) -> None:
        self.frozen = frozen

    def batch_fields(self, rows: Sequence[int] | np.ndarray) -> dict[str, Tensor]:
        return {}

    def vectors(self, encoder: Any, batch: dict[str, Tensor], frozen_rows: Tensor | None) -> Tensor:
        return frozen_rows if frozen_rows is not None else self.frozen.embed(encoder, *distilled_tokens(batch))


class TeacherTargets:
    """The teacher's cached vectors: row i of `table` belongs to example i. The batch builder (on the prefetch
    thread, on the host) reads the batch's rows from the table's file into the batch (sentadapt/storage/rowfile.py), so
    the table stays on disk and the step reads no value back to find them. A Tensor table (tests) is indexed."""

    def __init__(self, table: RowFile | Tensor, base: RowFile | Tensor | None = None, alpha: float = 1.0) -> None:
        self.table = table
        # a blend target (teacher_blend α < 1): the base's vectors of every example, whose cosines weigh 1 − α
        self.base, self.alpha = base, alpha

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def rows(self, rows: Sequence[int] | np.ndarray) -> Tensor:
        return _rows(self.table, rows)

    def batch_fields(self, rows: Sequence[int] | np.ndarray) -> dict[str, Tensor]:
        fields = {TEACHER_VECTORS: self.rows(rows)}
        if self.base is not None:
            fields[BASE_VECTORS] = _rows(self.base, rows)
        return fields

    def vectors(self, encoder: Any, batch: dict[str, Tensor], frozen_rows: Tensor | None) -> Tensor:
        return batch[TEACHER_VECTORS]


def _rows(table: RowFile | Tensor, rows: Sequence[int] | np.ndarray) -> Tensor:
    index = np.asarray(rows, dtype=np.int64)
    if isinstance(table, Tensor):
        return table[torch.from_numpy(index)]
    return torch.from_numpy(table.take(index))


class Distillation:
    def __init__(self, weight: float, mix: DistillMix, temperature: float, targets: BaseTargets | TeacherTargets,
                 recipe_weight: float = DistillationSettings.recipe_weight,
                 projection: nn.Linear | None = None) -> None:
        self.weight, self.temperature = weight, temperature
        self.mix = mix  # (kind, weight) terms: D is their weighted sum
        self.targets = targets
        self.recipe_weight = recipe_weight  # 0: the distillation term alone
        # student width → teacher width, for mse/cosine against a teacher of another width: trained with the
        # student (TrainingModule registers it, so the optimizer, DDP and checkpoints hold it), never exported
        self.projection = projection

    def batch_fields(self, rows: Sequence[int] | np.ndarray) -> dict[str, Tensor]:
        """What the batch of examples `rows` must carry for the target side (the teacher's rows; nothing else)."""
        return self.targets.batch_fields(rows)

    def terms(self, encoder: Any, batch: dict[str, Tensor], exported: Tensor | None = None,
              frozen_rows: Tensor | None = None) -> list[Term]:
        """D(student, target) over the global batch, one Term per kind (the objective weighs and sums them): both
        sides gathered from every process (this rank's student rows keep their gradient), so the in-batch similarity
        structure a kl or sim-mse term compares is the whole batch's, as in one process. `exported`: the student's
        rows when the recipe's own pass already encoded them as exported (Embedded.exported); no pass of the term's
        own then runs. `frozen_rows`: the recipe's frozen vectors of the first texts (Embedded.frozen_rows)."""
        local = exported if exported is not None else student_vectors(encoder, batch)
        target = gather_across_processes(self.targets.vectors(encoder, batch, frozen_rows))
        similarities = None
        if BASE_VECTORS in batch:  # a blend target: α · the teacher's cosines + (1 − α) · the base's
            alpha = self.targets.alpha  # type: ignore[union-attr]
            similarities = blended_cosines(target, gather_across_processes(batch[BASE_VECTORS]), alpha)
        student = gather_across_processes(local) if self.mix.compares_structure else None
        projected = student  # the vector kinds' side: the student's own vectors when no projection is needed
        if self.mix.vector_kind is not None and (self.projection is not None or student is None):
            # projected before the gather: the projection's gradient then comes from this rank's rows alone, as the
            # student's does, which DDP's averaging expects
            projected = gather_across_processes(local if self.projection is None else self.projection(local))
        terms = []
        for kind, weight in self.mix.terms:
            if kind in VECTOR_KINDS:  # each coordinate against the target's: whole vectors (no --matryoshka)
                terms.append(Term(kind, lambda cut, kind=kind: distillation_loss(  # type: ignore[misc]
                    kind, projected, target, self.temperature), factor=weight, sized=False))
            else:  # --matryoshka: a prefix's in-batch similarities against the whole target's
                terms.append(Term(kind, lambda cut, kind=kind: distillation_loss(  # type: ignore[misc]
                    kind, cut(student), target, self.temperature, similarities), factor=weight))
        return terms

    def needs_recipe_loss(self, heads: nn.ModuleDict) -> bool:
        """recipe_weight 0 skips the recipe's views (two encoder passes for ConSERT) unless the recipe trains heads
        of its own: they would get no gradient, and DDP expects every trained parameter to get one."""
        return self.recipe_weight > 0 or any(p.requires_grad for p in heads.parameters())


PROJECTION_SAMPLE = 4096  # examples the projection's starting point is fitted on: 4096 × 384 floats, one encode


def build_distillation(config: TrainConfig, recipe: RecipeBase, encoder: Any,
                       teacher: RowFile | Tensor | None = None,
                       student_sample: Callable[[int], Tensor] | None = None,
                       blend: tuple[RowFile | Tensor, float] | None = None) -> Distillation | None:
    """Toward `teacher` (its vectors of every example) when given; else None when distill = 0; else let the
    base be copied (before any step or resumed weights load). `student_sample(n)`: the student's vectors
    of the first n examples, which a projection is fitted on before training."""
    settings = config.distillation
    if teacher is not None:
        targets = TeacherTargets(teacher) if blend is None else TeacherTargets(teacher, *blend)
        projection = None
        vector_kind = settings.mix.vector_kind
        if vector_kind is not None and targets.dim != encoder.embedding_dim:
            if student_sample is None:
                raise ConfigError(f"distill_kind: {vector_kind} against a teacher of another width "
                                  f"(student {encoder.embedding_dim}, teacher {targets.dim}) needs the student's "
                                  "vectors to fit a projection on; use distill_kind=kl or sim-mse")
            projection = fitted_projection(student_sample, targets, encoder.embedding_dim)
        return Distillation(config.teacher.weight, settings.mix, settings.distill_temperature, targets,
                            settings.recipe_weight, projection)
    if settings.distill == 0:
        return None
    base_targets = BaseTargets(FrozenBase(encoder, backbone=recipe.frozen_backbone(encoder)))
    return Distillation(settings.distill, settings.mix, settings.distill_temperature, base_targets,
                        settings.recipe_weight)


def fitted_projection(student_sample: Callable[[int], Tensor], targets: TeacherTargets, width: int) -> nn.Linear:
    """A linear map student width → teacher width, started at the least-squares fit of the teacher's vectors from
    the student's on up to PROJECTION_SAMPLE examples (ridge 1e-3): a random start would pull the student toward
    random directions for the first steps; this one starts the loss where the student already is."""
    student = student_sample(PROJECTION_SAMPLE).double()
    target = targets.rows(np.arange(len(student))).double()
    gram = student.T @ student + 1e-3 * torch.eye(width, dtype=torch.float64)
    weight = torch.linalg.solve(gram, student.T @ target)  # (width, teacher width)
    projection = nn.Linear(width, targets.dim, bias=False)
    with torch.no_grad():
        projection.weight.copy_(weight.T.float())
    return projection


# ------------------------------------------------------------------------------------- the frozen base


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
        frozen.configure(encoder.pooling, encoder.normalize, train_prompt_length=encoder.train_prompt_length)  # in step
        with torch.no_grad():
            return frozen(input_ids, attention_mask)


def clean_embeddings(encoder: Encoder, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """The trained encoder's sentence vectors as evaluated and exported (its pooling and head) with the gradient,
    internal dropout off for this pass (as ConSERT encodes its views), so at step 0 they equal the base's."""
    with encoder.dropout(False):  # (layers that checkpoint still do)
        return encoder(input_ids, attention_mask)
