"""The recipe contract: a recipe supplies views and a loss; the training loop owns everything else.

A recipe never calls backward, steps an optimizer or touches accelerate. It declares what data it
needs, builds its extra trainable heads, computes a loss for a batch, and says how the trained
encoder is exported (pooling, heads kept or dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from sentadapt.registry import Registry

if TYPE_CHECKING:  # recipes import torch where they compute, so `adapt` validates options in well under a second
    from torch import Tensor, nn

    from sentadapt.encoder import Encoder

# What a recipe trains on; the loop reads and batches the data accordingly.
#   sentences: unlabeled text, one sentence per example      → input_ids, attention_mask
#   nli:       premise/hypothesis/label triples              → a_*, b_*, labels
#   pairs:     positive sentence pairs                       → a_*, b_*
DATA_KINDS = ("sentences", "nli", "pairs")


@dataclass
class LossOutput:
    """The loss to back-propagate and its named parts, for the progress line and train.log.

    The parts are detached 0-dim tensors on the loss's device, never Python floats: reading a value back
    (`.item()`) waits for the GPU to finish the step, so the loop reads them once per `log_every` steps."""

    total: Tensor
    parts: dict[str, Tensor] = field(default_factory=dict)


class Recipe(Protocol):
    name: ClassVar[str]
    Config: ClassVar[type]
    trains_on: ClassVar[str]  # "text" (sentences) | "pairs" (labelled pairs files): --recipe auto's candidates
    train_defaults: ClassVar[dict[str, Any]]  # the paper's training settings, below YAML and flags
    # What replaces them when the base is already sentence-tuned (presets.py): training or recipe fields,
    # routed like `--set` keys; above train_defaults, below YAML and flags
    tuned_base_defaults: ClassVar[dict[str, Any]]

    def __init__(self, config: Any, encoder: Encoder) -> None: ...

    @property
    def needs(self) -> str:
        """One of DATA_KINDS (may depend on the config, e.g. a supervised mode needs NLI)."""
        ...

    @staticmethod
    def stages_for(config: Any) -> tuple[str, ...]:
        """Names of the training stages run one after the other (most recipes: one)."""
        ...

    def use_stage(self, stage: str) -> None:
        """Switch to a stage (changes `needs` and the loss)."""
        ...

    def trainable_heads(self) -> nn.ModuleDict:
        """Extra modules trained with the encoder (projection heads, classifiers); may be empty."""
        ...

    def compute_loss(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor]) -> LossOutput: ...

    def prepare_export(self, encoder: Encoder, heads: nn.ModuleDict) -> Encoder:
        """The encoder as it will be evaluated and saved (pooling set; training-only heads left out)."""
        ...

    # Optional (every built-in recipe has them): distillation toward the frozen base, `--set distill=W`.
    # The loop (sentadapt/train/distill.py) calls `prepare_distillation` once, after `prepare_export` and
    # before any step or resumed checkpoint, then adds distill × D(adapted, base) to every batch's loss.

    def prepare_distillation(self, encoder: Encoder) -> None:
        """Keep what the base model's embeddings come from (a FrozenBase, or a frozen part the recipe has)."""
        ...

    def distillation_views(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor],
                           ) -> tuple[Tensor, Tensor]:
        """(adapted, base): the batch's sentences as the model is exported (export pooling and head, no
        dropout) WITH gradient, and the frozen base's vectors for the same sentences, without; shape (N, D)."""
        ...


RECIPES: Registry[type[Recipe]] = Registry("recipe")


def resolve_export_pooling(setting: str, encoder: Encoder, paper: str) -> str:
    """`export_pooling: auto` → the base model's own pooling when its folder declares one (sentence-transformers
    modules.json), else the paper's `paper` pooling; any other setting is a pooling name, kept as is."""
    if setting != "auto":
        return setting
    declared = getattr(encoder, "pooling_source", "default") == "modules.json"
    return encoder.pooling_name if declared else paper


def register_recipe(name: str) -> Any:
    return RECIPES.register(name)
