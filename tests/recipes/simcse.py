"""SimCSE, unsupervised (Gao, Yao, Chen, EMNLP 2021), written on the recipe contract alone: a test fixture.

Each sentence is encoded twice with the model's own dropout on (one pass of the batch stacked twice), so its two
vectors differ only by their dropout masks; NT-Xent pulls each sentence's two vectors together against the other
sentences of the (global) batch. It touches no file of the package: issue 85's check that a recipe is its spec, its
views and terms, and its export.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from sentadapt.config.schema import RecipeConfig, check_range, setting
from sentadapt.data.readers import counted_sentences
from sentadapt.recipes.base import TEXT, Embedded, RecipeBase, RecipeSpec, Stage, Term
from sentadapt.recipes.losses import gather_across_processes, nt_xent

if TYPE_CHECKING:
    from torch import Tensor, nn

    from sentadapt.model.encoder import Encoder


@dataclass
class SimcseConfig(RecipeConfig):
    temperature: float = setting(0.05, "NT-Xent's temperature τ (the paper's, §3 and Table D.1).")

    def validate(self) -> None:
        check_range("temperature", self.temperature, 0, None, low_open=True)


class SimcseRecipe(RecipeBase):
    # the paper's unsupervised BERT-base settings (Table D.1): batch 64, lr 3e-5, max length 32
    spec: ClassVar[RecipeSpec] = RecipeSpec("simcse", SimcseConfig, TEXT,
                                            train_defaults={"batch_size": 64, "lr": 3e-5, "max_length": 32},
                                            tuned_base_defaults={})
    config: SimcseConfig

    @classmethod
    def stages(cls, config: Any) -> tuple[Stage, ...]:
        return (Stage("unsup", "sentence", counted_sentences),)

    def embed(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor], exported: bool) -> Embedded:
        import torch

        ids, mask, rows = batch["input_ids"], batch["attention_mask"], len(batch["input_ids"])
        with encoder.dropout(True):  # the batch twice in one pass: each row its own dropout mask, the only view
            both = encoder(torch.cat([ids, ids]), torch.cat([mask, mask]))
        first, second = gather_across_processes(both[:rows]), gather_across_processes(both[rows:])
        temperature = self.config.temperature
        return Embedded([Term("contrastive", lambda cut: nt_xent(cut(first), cut(second), temperature))])

    def prepare_export(self, encoder: Encoder, heads: nn.ModuleDict) -> Encoder:
        return encoder  # trained and exported with the base's own pooling
