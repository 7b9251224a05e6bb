"""The recipe contract: a recipe embeds a batch as its views and names its loss terms; train/objective.py weighs
and sums them (with distillation and `--matryoshka`), and the training loop owns everything else.

A recipe never calls backward, steps an optimizer or touches accelerate. It subclasses `RecipeBase`, which
declares every hook the loop and the run lifecycle call: the class variables and methods below marked
*required* (checked when `@register_recipe` runs, so a forgotten piece fails at import), and the others with
the defaults that fit a single-stage recipe reading a one-sentence-per-line corpus. The loop calls each hook
directly; nothing probes a recipe for what it has.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from sentadapt.config.schema import RecipeConfig
from sentadapt.errors import DataError
from sentadapt.events import Progress, no_progress
from sentadapt.recipes.matryoshka import Cut
from sentadapt.recipes.readers import TrainingData, sentence_examples
from sentadapt.registry import Registry

if TYPE_CHECKING:  # recipes import torch where they compute, so `adapt` validates options in well under a second
    from torch import Tensor, nn

    from sentadapt.data.batching import RowPairs, TokenizedExamples
    from sentadapt.model.encoder import Encoder

# What a recipe trains on; its `load_examples` reads and batches the data accordingly.
#   sentences: unlabeled text, one sentence per example      → input_ids, attention_mask
#   nli:       premise/hypothesis/label triples              → a_*, b_*, labels
#   pairs:     positive sentence pairs                       → a_*, b_*
DATA_KINDS = ("sentences", "nli", "pairs")
# What a recipe is given of `adapt`'s inputs (`trains_on`; --recipe auto splits the inputs by it):
# one-sentence-per-line text, or labelled pairs files (NLI, scored or two-column pairs).
TEXT, PAIRS = "text", "pairs"
TRAINS_ON = (TEXT, PAIRS)
EXAMPLE_NOUNS = {TEXT: "sentence", PAIRS: "pair"}  # what an example of each is, as adapt --dry-run's plan counts
# NT-Xent's τ where a recipe's paper sets 0.1: ConSERT (Yan et al. 2021, §4.1) and CLSR
CONTRASTIVE_TEMPERATURE = 0.1
# The class variables every recipe must define (register_recipe checks them).
REQUIRED_CLASS_VARIABLES = ("name", "Config", "trains_on", "train_defaults", "tuned_base_defaults")


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
    # This process's rows of each example's first text as the model is exported (its pooling and head, dropout
    # off), with the gradient, when the recipe's own pass encoded them (ConSERT stacks them with its views when
    # asked): the distillation term then reads them instead of a pass of its own, two encoder passes per step
    # instead of three (bench/README.md, "Where a teacher step's time goes").
    exported: Tensor | None = None
    # When the batch's examples are rows of a table of frozen vectors (CLSR): their first texts' rows, the base's
    # vectors, which the exported head turns into the student's
    frozen_rows: Tensor | None = None


class RecipeBase(abc.ABC):
    """Every registered recipe subclasses this (`@register_recipe(NAME)` checks it).

    Required: the class variables `name`, `Config`, `trains_on`, `train_defaults`, `tuned_base_defaults`, and the
    methods `needs`, `trainable_heads`, `embed`, `prepare_export`: a recipe declares its data, its heads, its views
    and loss terms, and how it is exported. Defaulted: `stage_name`/`stages_for` (one stage), `use_stage` (nothing
    to switch), `check_corpus` (accept), `load_examples` (the tokenized corpus, for `needs == "sentences"`), and the
    hook distillation may use (`frozen_backbone`; train/distill.py does the rest).
    """

    # ------------------------------------------------------------------ required class variables
    name: ClassVar[str]  # the registered name (`--recipe NAME`)
    Config: ClassVar[type[RecipeConfig]]  # a dataclass of the recipe's settings, with the paper's values as defaults
    trains_on: ClassVar[str]  # TEXT | PAIRS: what it is given of adapt's inputs (and of --recipe auto's)
    train_defaults: ClassVar[dict[str, Any]]  # the paper's training settings, below YAML and flags
    # What replaces them when the base is already sentence-tuned (presets.py): training or recipe fields,
    # routed like `--set` keys; above train_defaults, below YAML and flags
    tuned_base_defaults: ClassVar[dict[str, Any]]

    # ------------------------------------------------------------------ defaulted class variables
    stage_name: ClassVar[str] = "train"  # the name of a single-stage recipe's one stage (stages_for's default)
    trains_encoder: ClassVar[bool] = True  # False: the encoder stays frozen (CLSR), so `--lora` has nothing to adapt
    # What a teacher run of this recipe sets above presets.TEACHER_DEFAULTS (presets.with_teacher), each measured on
    # the suite for this recipe alone; below YAML, flags and --set
    teacher_defaults: ClassVar[dict[str, Any]] = {}

    config: Any  # the recipe's settings (an instance of Config; subclasses narrow the type)

    def __init__(self, config: Any, encoder: Encoder) -> None:
        """`config`: an instance of `Config`, validated. A recipe builds its heads (and any frozen copies it keeps
        outside the trained module) here; the loop moves the encoder to its device later."""
        self.config = config

    def exported_width(self, encoder: Encoder) -> int:
        """The width of the vectors the model will export (what `--matryoshka` sizes are prefixes of). Default: the
        encoder's; a recipe that adds an output layer (CLSR's MLP) gives that layer's."""
        return encoder.embedding_dim

    # ------------------------------------------------------------------ stages (defaulted: one stage)
    @classmethod
    def stages_for(cls, config: Any) -> tuple[str, ...]:
        """Names of the training stages run one after the other, each from the previous one's model (earlier
        stages write to OUTPUT/stage-K-NAME). Default: the one stage `stage_name`."""
        return (cls.stage_name,)

    @classmethod
    def count_examples(cls, config: Any, stage: str, progress: Progress = no_progress) -> int | None:
        """The examples `stage` (one of `stages_for`) of a run of this RunConfig trains on, counted as
        `load_examples` will read them but without a model: `adapt --dry-run` plans the steps from it (`progress`: a
        bar while a large corpus is read). None where that cannot be known before training (a Hub dataset).
        Default: None."""
        return None

    @classmethod
    def example_noun(cls, stage: str) -> str:
        """What one example of `stage` is, as the dry run's plan counts them. Default: by `trains_on`."""
        return EXAMPLE_NOUNS[cls.trains_on]

    def use_stage(self, stage: str) -> None:
        """Switch to `stage` (one of `stages_for(config)`) before its data are read; may change `needs`, the heads
        and the loss. Called before every stage's training and before export. Default: nothing to switch."""
        return None

    # ------------------------------------------------------------------ data
    @classmethod
    def check_corpus(cls, paths: Sequence[str], config: Any) -> None:
        """Refuse unusable inputs before any weights load (raise a SentadaptError with a one-line message), e.g.
        CLSR refuses a one-sentence-per-line corpus. Default: accept (the readers check every file they read)."""
        return None

    @property
    @abc.abstractmethod
    def needs(self) -> str:
        """One of DATA_KINDS (may depend on the stage, e.g. a supervised stage needs NLI)."""

    def load_examples(self, data: TrainingData, encoder: Encoder, note: Callable[[str], None],
                      progress: Progress) -> TokenizedExamples | RowPairs:
        """The training examples of the current stage; `note` reports what reading found, `progress` follows it.

        Default: `needs == "sentences"`: the inputs as one sentence per line, read and tokenized once into the
        memory-mapped corpus cache (`sentadapt.data.prepare`). A recipe needing another data kind overrides this
        (ConSERT's NLI stage, CLSR's rows of a frozen-vector table)."""
        if self.needs != "sentences":
            raise DataError(f"recipe {self.name}: needs '{self.needs}' examples, which only the recipe's own "
                            "load_examples can read")
        return sentence_examples(data, encoder, note, progress)

    # ------------------------------------------------------------------ model and loss (required)
    @abc.abstractmethod
    def trainable_heads(self) -> nn.ModuleDict:
        """Extra modules trained with the encoder (projection heads, classifiers); may be empty."""

    @abc.abstractmethod
    def embed(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor], exported: bool) -> Embedded:
        """One (local) batch through the encoder as the recipe's views, and its loss terms on them (gathered across
        processes where negatives are in-batch). `exported`: a distillation term will compare the examples' first
        texts as exported; a recipe whose pass can encode them too returns them (`Embedded.exported`)."""

    @abc.abstractmethod
    def prepare_export(self, encoder: Encoder, heads: nn.ModuleDict) -> Encoder:
        """The encoder as it will be evaluated and saved (pooling set; training-only heads left out). Called once
        the base model has been scored, before any step, and again when `export` rebuilds a run's layout."""

    # ------------------------------------------------------------------ distillation (defaulted)
    # `--set distill=W` or `--teacher MODEL`: train/distill.py compares each example's first text as the model is
    # exported (with the gradient) with the frozen base's or the teacher's vectors of it, for every recipe, from the
    # batch's tokens (or the recipe's Embedded.exported / frozen_rows). A recipe that keeps a frozen copy shares it:
    def frozen_backbone(self, encoder: Encoder) -> nn.Module | None:
        """A frozen copy of the base's backbone the recipe already keeps (SG-OPT's guide; CLSR never trains its
        backbone), so distillation's base side shares it instead of copying the backbone. Called once, before
        any step or resumed weights. Default None: distillation copies it."""
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
    """Raise TypeError unless `recipe_class` subclasses RecipeBase, defines every required class variable (with
    `name` equal to the registered name and a valid `trains_on`) and implements every required method."""
    where = f"recipe '{name}': {recipe_class.__name__ if isinstance(recipe_class, type) else repr(recipe_class)}"
    if not (isinstance(recipe_class, type) and issubclass(recipe_class, RecipeBase)):
        raise TypeError(f"{where} must subclass sentadapt.recipes.base.RecipeBase")
    defined = {key for klass in recipe_class.__mro__ for key in vars(klass)}
    missing = [key for key in REQUIRED_CLASS_VARIABLES if key not in defined]
    if missing:
        raise TypeError(f"{where} does not define {', '.join(missing)} (required class variables: "
                        f"{', '.join(REQUIRED_CLASS_VARIABLES)})")
    if recipe_class.name != name:
        raise TypeError(f"{where}.name is '{recipe_class.name}'; register it under its own name")
    if recipe_class.trains_on not in TRAINS_ON:
        raise TypeError(f"{where}.trains_on is '{recipe_class.trains_on}'; one of {', '.join(TRAINS_ON)}")
    if not (isinstance(recipe_class.Config, type) and issubclass(recipe_class.Config, RecipeConfig)):
        raise TypeError(f"{where}.Config must be a dataclass subclassing sentadapt.config.RecipeConfig")
    for key, value in (("train_defaults", recipe_class.train_defaults),
                       ("tuned_base_defaults", recipe_class.tuned_base_defaults),
                       ("teacher_defaults", recipe_class.teacher_defaults)):
        if not isinstance(value, dict):
            raise TypeError(f"{where}.{key} must be a dict of settings")
    abstract = sorted(recipe_class.__abstractmethods__)
    if abstract:
        raise TypeError(f"{where} does not implement {', '.join(abstract)}")
