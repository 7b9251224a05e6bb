"""The recipe contract: a recipe embeds a batch as its views and names its loss terms; train/objective.py weighs
and sums them (with distillation and `--matryoshka`), and the training loop owns everything else.

A recipe never calls backward, steps an optimizer or touches accelerate. It subclasses `RecipeBase`: eight members,
three required (checked when `@register_recipe` runs, so a forgotten piece fails at import) and five with defaults
that fit a single-stage recipe reading a one-sentence-per-line corpus. The loop and the run call each directly;
nothing probes a recipe for what it has.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from sentadapt.config.schema import RecipeConfig
from sentadapt.data.readers import TrainingData, sentence_examples
from sentadapt.events import Progress
from sentadapt.recipes.matryoshka import Cut
from sentadapt.registry import Registry

if TYPE_CHECKING:  # recipes import torch where they compute, so `adapt` validates options in well under a second
    from torch import Tensor, nn

    from sentadapt.data.batching import RowPairs, TokenizedExamples
    from sentadapt.model.encoder import Encoder
    from sentadapt.model.frozen_part import OnFrozenPart

# What a recipe is given of `adapt`'s inputs (`trains_on`; --recipe auto splits the inputs by it):
# one-sentence-per-line text, or labelled pairs files (NLI, scored or two-column pairs).
TEXT, PAIRS = "text", "pairs"
TRAINS_ON = (TEXT, PAIRS)
EXAMPLE_NOUNS = {TEXT: "sentence", PAIRS: "pair"}  # what an example of each is, as adapt --dry-run's plan counts
# NT-Xent's τ where a recipe's paper sets 0.1: ConSERT (Yan et al. 2021, §4.1) and CLSR
CONTRASTIVE_TEMPERATURE = 0.1


@dataclass(frozen=True)
class Term:
    """One named part of a recipe's loss: `loss(cut)` with `cut` applied to the vectors it compares. The objective
    (train/objective.py) sums the terms, each over the `--matryoshka` sizes when `sized`, and logs each by name."""

    name: str
    loss: Callable[[Cut], Tensor]
    factor: float = 1.0  # what it is multiplied by in the total (the logged part is the term before it)
    # a mean over this process's rows alone, not gathered (ConSERT's classification): divided by the process count,
    # since the loop scales every loss by it (right for gathered terms), or its gradient would be P× too large
    local: bool = False
    sized: bool = True  # False: a term that reads no vectors (SG-OPT's regulariser), taken once


@dataclass
class Embedded:
    """What a recipe's `embed` returns for one (local) batch: its loss terms, and what a distillation term reuses."""

    terms: list[Term]
    # This process's rows of each example's first text as exported (pooling and head, dropout off, with the
    # gradient) when the recipe's own pass encoded them: distillation reads them instead of a pass of its own
    # (bench/README.md, "Where a teacher step's time goes")
    exported: Tensor | None = None
    # Examples that are rows of a frozen-vector table (CLSR): the first texts' rows, the base's vectors
    frozen_rows: Tensor | None = None


def _accept(paths: Sequence[str], config: Any) -> None: ...
def _uncounted(config: Any, progress: Progress) -> int | None: ...


@dataclass(frozen=True)
class RecipeSpec:
    """What a recipe is before any model loads: its name, settings, inputs and defaults (`RecipeBase.spec`)."""

    name: str  # the registered name (`--recipe NAME`)
    settings: type[RecipeConfig]  # a dataclass of the recipe's settings, with the paper's values as defaults
    trains_on: str  # TEXT | PAIRS: what it is given of adapt's inputs (and of --recipe auto's)
    train_defaults: dict[str, Any]  # the paper's training settings, below YAML and flags
    # What replaces them when the base is already sentence-tuned (presets.py): training or recipe fields, routed like
    # `--set` keys; above train_defaults, below YAML and flags
    tuned_base_defaults: dict[str, Any]
    # What a teacher run of this recipe sets above presets.TEACHER_DEFAULTS (presets.with_teacher), each measured on
    # the suite for this recipe alone; below YAML, flags and --set
    teacher_defaults: dict[str, Any] = field(default_factory=dict)
    trains_encoder: bool = True  # False: the encoder stays frozen (CLSR), so `--lora` has nothing to adapt


@dataclass(frozen=True)
class Stage:
    """One training stage (`RecipeBase.stages`), run from the previous stage's model; known before any model loads."""

    name: str  # a stage of several writes to OUTPUT/stage-K-NAME
    noun: str  # what one example is, as `adapt --dry-run`'s plan counts them
    # The examples a RunConfig's stage trains on, counted without a model (`adapt --dry-run` plans the steps from
    # it; Progress: a bar while a large corpus is read); None where unknown before training (a Hub dataset)
    count: Callable[[Any, Progress], int | None] = _uncounted
    # Refuse unusable inputs (adapt's paths, the recipe's settings) before any weights load with a one-line
    # SentadaptError (CLSR: a one-sentence-per-line corpus). Default: accept (the readers check what they read).
    check: Callable[[Sequence[str], Any], None] = _accept


class RecipeBase(abc.ABC):
    """Every registered recipe subclasses this (`@register_recipe(NAME)` checks it).

    Eight members. Required: `spec` (what it is), `embed` (its views and loss terms) and `prepare_export` (the model
    it exports). Defaulted: `stages` (one, uncounted), `load_examples` (the corpus's sentences, tokenized),
    `trainable_heads` (none), `exported_width` (the encoder's), `frozen_backbone` (none to share). The constructor
    takes the settings, the encoder and the stage to train.
    """

    spec: ClassVar[RecipeSpec]
    config: Any  # the recipe's settings (an instance of spec.settings; subclasses narrow the type)

    def __init__(self, config: Any, encoder: Encoder, stage: str | None = None) -> None:
        """`config`: an instance of `spec.settings`, validated; `stage`: one of `stages(config)`'s names (None: the
        first). A recipe builds the stage's heads (and any frozen copies it keeps outside the trained module) here;
        the loop moves the encoder to its device later."""
        self.config = config

    @classmethod
    def stages(cls, config: Any) -> tuple[Stage, ...]:
        """The training stages of these settings, run one after the other, each from the previous one's model.
        Default: one stage, `train`, of what `trains_on` names, uncounted."""
        return (Stage("train", EXAMPLE_NOUNS[cls.spec.trains_on]),)

    def load_examples(self, data: TrainingData, encoder: Encoder, note: Callable[[str], None],
                      progress: Progress) -> TokenizedExamples | RowPairs:
        """The training examples of the stage; `note` reports what reading found, `progress` follows it. Default:
        the inputs as one sentence per line, read and tokenized once into the memory-mapped corpus cache
        (`sentadapt.data.prepare`); ConSERT's NLI stage and CLSR's rows of a frozen-vector table read their own."""
        return sentence_examples(data, encoder.tokenizer, encoder.token_limit(data.max_length), note, progress)

    def trainable_heads(self) -> nn.ModuleDict:
        """Extra modules trained with the encoder (projection heads, classifiers). Default: none."""
        from torch import nn

        return nn.ModuleDict()

    @abc.abstractmethod
    def embed(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor], exported: bool) -> Embedded:
        """One (local) batch through the encoder as the recipe's views, and its loss terms on them (gathered across
        processes where negatives are in-batch). `exported`: a distillation term will compare the examples' first
        texts as exported; a recipe whose pass can encode them too returns them (`Embedded.exported`)."""

    @abc.abstractmethod
    def prepare_export(self, encoder: Encoder, heads: nn.ModuleDict) -> Encoder | OnFrozenPart:
        """Make the encoder the model to save (pooling set; training-only heads left out); return what dev evaluations
        score (it, or CLSR's view of it). Called once the base model has been scored, before any step, and again when
        `export` rebuilds a run's layout."""

    def exported_width(self, encoder: Encoder) -> int:
        """The width of the vectors the model will export (what `--matryoshka` sizes are prefixes of), before
        `prepare_export`. Default: the encoder's; a recipe that adds an output layer (CLSR's MLP) gives that layer's."""
        return encoder.embedding_dim

    def frozen_backbone(self, encoder: Encoder) -> nn.Module | None:
        """A frozen copy of the base's backbone the recipe already keeps (SG-OPT's guide; CLSR never trains its
        backbone), so distillation's base side (train/distill.py) shares it instead of copying the backbone. Called
        once, before any step or resumed weights. Default None: distillation copies it."""
        return None


Recipe = RecipeBase  # the name the loop's type hints use

RECIPES: Registry[type[RecipeBase]] = Registry("recipe")
R = TypeVar("R", bound=type[RecipeBase])


def register_recipe(name: str) -> Callable[[R], R]:
    """Class decorator: register a recipe under `name` once it meets the contract (TypeError naming what misses)."""

    def decorator(recipe_class: R) -> R:
        check_recipe_class(name, recipe_class)
        RECIPES.register(name)(recipe_class)
        return recipe_class

    return decorator


def check_recipe_class(name: str, recipe_class: Any) -> None:
    """Raise TypeError unless `recipe_class` subclasses RecipeBase, defines a `spec` (with `name` equal to the
    registered name, a valid `trains_on`, a RecipeConfig dataclass and dicts of defaults) and implements every
    required method."""
    where = f"recipe '{name}': {recipe_class.__name__ if isinstance(recipe_class, type) else repr(recipe_class)}"
    if not (isinstance(recipe_class, type) and issubclass(recipe_class, RecipeBase)):
        raise TypeError(f"{where} must subclass sentadapt.recipes.base.RecipeBase")
    spec = getattr(recipe_class, "spec", None)
    if not isinstance(spec, RecipeSpec):
        raise TypeError(f"{where} does not define spec, a sentadapt.recipes.base.RecipeSpec")
    if spec.name != name:
        raise TypeError(f"{where}.spec.name is '{spec.name}'; register it under its own name")
    if spec.trains_on not in TRAINS_ON:
        raise TypeError(f"{where}.spec.trains_on is '{spec.trains_on}'; one of {', '.join(TRAINS_ON)}")
    if not (isinstance(spec.settings, type) and issubclass(spec.settings, RecipeConfig)):
        raise TypeError(f"{where}.spec.settings must be a dataclass subclassing sentadapt.config.RecipeConfig")
    for key in ("train_defaults", "tuned_base_defaults", "teacher_defaults"):
        if not isinstance(getattr(spec, key), dict):
            raise TypeError(f"{where}.spec.{key} must be a dict of settings")
    abstract = sorted(recipe_class.__abstractmethods__)
    if abstract:
        raise TypeError(f"{where} does not implement {', '.join(abstract)}")
