"""CLSR (Qiu, Ding, Chen, ICON 2021): contrastive learning of an MLP on top of frozen sentence embeddings.

The pretrained encoder is frozen, so each unique training sentence is encoded once (and cached on
disk, `sentadapt.model.embedding_cache`); training then runs at MLP speed over the cached vectors. Model:
frozen encoder + pooling (mean by default, the paper's best) → MLP encoder e (one hidden layer with
ReLU, then a linear output layer; both exported as sentence-transformers Dense modules) → linear
projection head h (training only, dropped at export); `init: identity` starts e and h as the identity
(step 0 = the base model exactly; `identity_mlp`). Loss: NT-Xent over the 2m sentences of m
positive pairs, in-batch negatives, τ = 0.1 — paper eq. (1), both (a, b) and (b, a) as anchors.

Positive pairs: NLI entailment pairs, STS-style scored pairs with score ≥ `min_score`, or any
two-column pairs file (`sentadapt.data.positives`). A sentence appearing twice in a batch would be
its own false negative: such entries are removed from the denominators (not sampled around).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from sentadapt.config.schema import RecipeConfig, check_choice, check_range, setting
from sentadapt.data.readers import TrainingData
from sentadapt.events import Progress
from sentadapt.model.pooling import POOLING_NAMES, Pooling
from sentadapt.recipes.base import (
    CONTRASTIVE_TEMPERATURE,
    PAIRS,
    Embedded,
    RecipeBase,
    RecipeSpec,
    Stage,
    Term,
    register_recipe,
)
from sentadapt.recipes.matryoshka import Cut

if TYPE_CHECKING:
    from torch import Tensor, nn

    from sentadapt.data.batching import RowPairs
    from sentadapt.model.encoder import Encoder
    from sentadapt.model.frozen_part import OnFrozenPart

RELU = "torch.nn.modules.activation.ReLU"
IDENTITY = "torch.nn.modules.linear.Identity"
INITS = ("random", "identity")
# The MLP and the projection draw nn.Linear's default init from their own seed, so a run starts from the same
# weights whatever the process drew before (a second run in one process, tests, the resume of an interrupted run
# in another process); --seed changes the data order.
INIT_SEED = 0


@dataclass
class ClsrConfig(RecipeConfig):
    # the paper's Table 4: mean 76.74 vs CLS 61.34 on STS-B dev (BERT-base)
    pooling: str = setting("mean", "The frozen backbone's pooling, under the MLP.")
    hidden_dim: int = setting(0, "The MLP's hidden size (0: the base model's dimension).")
    output_dim: int = setting(0, "The exported embedding's size (0: the base model's dimension, as in the paper).")
    projection_dim: int = setting(0, "The training-only projection's size (0: output_dim, as in the paper).")
    temperature: float = setting(CONTRASTIVE_TEMPERATURE, "The NT-Xent temperature τ.")
    min_score: float = setting(4.0, "Scored pairs at or above this are positives (the paper: STS-B pairs above 4).")
    init: str = setting("random", "random: nn.Linear's default init (the paper's) | identity: the MLP starts as the "
                        "identity map, so step 0 is the base model bit for bit (hidden_dim 0 → 2 × the base "
                        "dimension).")

    def validate(self) -> None:
        check_choice("pooling", self.pooling, POOLING_NAMES)
        check_choice("init", self.init, INITS)
        for name in ("hidden_dim", "output_dim", "projection_dim"):
            check_range(name, getattr(self, name), 0, None)
        check_range("temperature", self.temperature, 0, None, low_open=True)


def _count_pairs(config: Any, progress: Progress) -> int | None:
    from sentadapt.data.positives import read_positive_pairs

    return len(read_positive_pairs(config.corpus, config.recipe_args.min_score))


def _check_pair_files(paths: Sequence[str], config: ClsrConfig) -> None:
    from sentadapt.data.positives import check_pair_files
    from sentadapt.recipes.base import RECIPES, TEXT

    # a plain sentence list is pointed to the recipes that train on text
    on_text = [name for name in RECIPES if RECIPES.get(name).spec.trains_on == TEXT]
    check_pair_files(paths, " or --recipe ".join(on_text))


@register_recipe("clsr")
class ClsrRecipe(RecipeBase):
    spec: ClassVar[RecipeSpec] = RecipeSpec(
        "clsr", ClsrConfig, PAIRS,
        # Paper: batch 512, temperature 0.1, LARS at lr 0.5 with weight decay 1e-4, linear warm-up then cosine decay,
        # 2000 epochs. LARS measured better than AdamW here (research/findings.md); fewer epochs fit a CPU.
        train_defaults={"batch_size": 512, "max_length": 128, "optimizer": "lars", "lr": 0.5, "weight_decay": 1e-4,
                        "schedule": "cosine", "warmup_ratio": 0.05, "epochs": 100, "eval_every": 150,
                        "checkpoint_every": 1000, "patience": 10, "length_grouping": False},
        # sentence-tuned bases (presets.py): a random MLP scrambles a space that is already good; starting at the
        # identity and distilling towards the base keeps the run near it (research/findings.md, "Levers on tuned
        # bases")
        tuned_base_defaults={"init": "identity", "distill": 1.0},
        trains_encoder=False,  # an MLP on frozen embeddings
    )
    config: ClsrConfig

    def __init__(self, config: ClsrConfig, encoder: Encoder, stage: str | None = None) -> None:
        import torch
        from torch import nn

        from sentadapt.model.frozen_part import FrozenPart
        from sentadapt.model.st_format import DenseLayer

        super().__init__(config, encoder, stage)
        encoder.backbone.requires_grad_(False)  # the encoder is frozen: only the MLP and projection train
        for layer in encoder.head:
            layer.requires_grad_(False)
        encoder.configure(pooling=Pooling.from_name(config.pooling, encoder.num_layers))
        self.frozen = FrozenPart(encoder, len(encoder.head))  # the base's own Dense layers stay frozen too
        base_dim = encoder.embedding_dim
        identity = config.init == "identity"
        if identity:
            check_identity_dims(config, base_dim)
        hidden = config.hidden_dim or (2 * base_dim if identity else base_dim)
        output = config.output_dim or base_dim
        with torch.random.fork_rng(devices=[]):  # the process's own random state is left as it was
            torch.manual_seed(INIT_SEED)
            self.mlp = [DenseLayer(base_dim, hidden, RELU), DenseLayer(hidden, output, IDENTITY)]
            projection = nn.Linear(output, config.projection_dim or output)
        if identity:
            identity_mlp(self.mlp[0].linear, self.mlp[1].linear)
            # The projection head is only seen by the loss. Left random, it would score step 0 on a random
            # linear distortion of the base's geometry, and the MLP's first updates would compensate for that
            # distortion rather than follow the data, undoing the identity start; as the identity (an
            # isometry when wider) the loss starts from the base's own cosines.
            with torch.no_grad():
                nn.init.eye_(projection.weight)
                projection.bias.zero_()
        self._heads = nn.ModuleDict({"projection": projection})
        self.table: Tensor | None = None

    @classmethod
    def stages(cls, config: ClsrConfig) -> tuple[Stage, ...]:
        """One stage on the positive pairs; every input file must hold pairs (a plain sentence list gets a pointed
        message before weights load)."""
        return (Stage("pairs", "pair", _count_pairs, _check_pair_files),)

    def trainable_heads(self) -> nn.ModuleDict:
        return self._heads

    def load_examples(self, data: TrainingData, encoder: Encoder, note: Callable[[str], None],
                      progress: Progress) -> RowPairs:
        """Positive pairs → rows of a matrix of frozen vectors, each unique sentence encoded once (cached)."""
        from sentadapt.data.batching import RowPairs
        from sentadapt.data.positives import read_positive_pairs
        from sentadapt.model.embedding_cache import cached_frozen_vectors

        pairs = read_positive_pairs(data.sources, self.config.min_score)
        for line in pairs.notes:
            note(line)
        encoder.configure(max_length=data.max_length)  # one max length for cache, dev scores and export
        row_of: dict[str, int] = {}
        a_rows = [row_of.setdefault(text, len(row_of)) for text in pairs.first]
        b_rows = [row_of.setdefault(text, len(row_of)) for text in pairs.second]
        texts = list(row_of)
        with progress("encoding (frozen, once)", len(texts)) as advance:
            self.table = cached_frozen_vectors(self.frozen, texts, data.max_length, batch_size=data.encode_batch_size,
                                               progress=advance, note=note, prompt=data.prompt)
        note(f"{len(pairs)} positive pairs over {len(texts)} unique sentences")
        return RowPairs(a_rows, b_rows, texts)

    def prepare_export(self, encoder: Encoder, heads: nn.ModuleDict) -> OnFrozenPart:
        """Attach the MLP (after the base model has been scored without it), once: it is trained and exported. Dev
        evaluations run it over the frozen part's remembered vectors."""
        from sentadapt.model.frozen_part import OnFrozenPart

        if not any(layer is self.mlp[0] for layer in encoder.head):
            encoder.head.extend(layer.to(encoder.device) for layer in self.mlp)
        # the MLP's input is the un-normalised frozen output, in training and in the saved pipeline alike
        encoder.configure(normalize=False)
        return OnFrozenPart(self.frozen)

    # ------------------------------------------------------------------ distillation (--set distill=W)
    def frozen_backbone(self, encoder: Encoder) -> nn.Module:
        """CLSR never trains the backbone: it is its own frozen copy."""
        return encoder.backbone

    def _table_on(self, device: Any) -> Tensor:
        assert self.table is not None, "load_examples() builds the embedding table before training"
        if self.table.device != device:
            self.table = self.table.to(device)
        return self.table

    def embed(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor], exported: bool) -> Embedded:
        from sentadapt.recipes.losses import gather_across_processes

        table = self._table_on(batch["a_rows"].device)
        outputs = [self._mlp(table[batch[side]]) for side in ("a_rows", "b_rows")]  # the exported vectors
        ids = [gather_across_processes(batch[side]) for side in ("a_rows", "b_rows")]
        project = heads["projection"]

        def contrastive(cut: Cut) -> Tensor:  # a --matryoshka prefix of the exported vectors, then the projection
            first, second = (gather_across_processes(project(cut(vectors))) for vectors in outputs)
            return nt_xent_without_duplicates(first, second, ids[0], ids[1], self.config.temperature)

        # the frozen table IS the base model's output: the rows of each pair's first sentence
        return Embedded([Term("contrastive", contrastive)], exported=outputs[0] if exported else None,
                        frozen_rows=table[batch["a_rows"]] if exported else None)

    def _mlp(self, frozen: Tensor) -> Tensor:
        for layer in self.mlp:
            frozen = layer(frozen)
        return frozen

    def exported_width(self, encoder: Encoder) -> int:
        return int(self.mlp[-1].linear.out_features)


def check_identity_dims(config: ClsrConfig, base_dim: int) -> None:
    """init=identity needs room for x = relu(x) − relu(−x): hidden ≥ 2d, output = projection = d (or 0)."""
    from sentadapt.errors import ConfigError

    if config.hidden_dim and config.hidden_dim < 2 * base_dim:
        raise ConfigError(f"hidden_dim: init=identity needs at least 2 × the base dimension ({2 * base_dim}), got "
                          f"{config.hidden_dim}; pass --set hidden_dim=0 or --set init=random")
    if config.output_dim and config.output_dim != base_dim:
        raise ConfigError(f"output_dim: init=identity keeps the base dimension {base_dim}, got {config.output_dim}; "
                          "pass --set output_dim=0 or --set init=random")
    if config.projection_dim and config.projection_dim < base_dim:
        raise ConfigError(f"projection_dim: init=identity needs at least the base dimension {base_dim}, got "
                          f"{config.projection_dim}; pass --set projection_dim=0 or --set init=random")


def identity_mlp(first: nn.Linear, second: nn.Linear) -> None:
    """Make second(relu(first(x))) = x exactly, with plain Linear layers (exported as standard Dense modules).

    first: d → h (h ≥ 2d) with weight rows [I; −I; random], bias 0; second: h → d with weight [I, −I, 0], bias 0.
    Then second(relu(first(x)))_i = relu(x_i)·1 + relu(−x_i)·(−1) + Σ 0·(…) = x_i: every product is x_i, ±0 or
    0·finite, so each sum is exact in any order (one of relu(x_i), relu(−x_i) is 0). Units beyond 2d keep
    their random input weights with zero output weights: they add exactly 0 now and still get gradients.
    """
    import torch

    d = second.out_features
    with torch.no_grad():
        eye = torch.eye(d, dtype=first.weight.dtype, device=first.weight.device)
        first.weight[:d] = eye
        first.weight[d:2 * d] = -eye
        first.bias.zero_()
        second.weight.zero_()
        second.weight[:, :d] = eye
        second.weight[:, d:2 * d] = -eye
        second.bias.zero_()


def nt_xent_without_duplicates(first: Tensor, second: Tensor, first_ids: Tensor, second_ids: Tensor,
                               temperature: float) -> Tensor:
    """NT-Xent over 2N views where entries showing the same sentence as the anchor are not negatives.

    Equals `nt_xent` when every sentence in the batch is distinct (tested). The positive of view i is
    the other member of its pair; any other view with the same sentence id is masked out of the
    denominator, since pushing a sentence away from itself is a false negative.
    """
    import torch

    from sentadapt.recipes.losses import nt_xent

    ids = torch.cat([first_ids, second_ids])
    return nt_xent(first, second, temperature, ids.unsqueeze(0) == ids.unsqueeze(1))
