"""ConSERT (Yan et al., ACL 2021): contrastive learning over two augmented views at the embedding layer.

Unsupervised (`mode: unsup`, the default): each sentence of the corpus gets two views — e.g. token
shuffle (permuted position ids) and feature cutoff (zeroed embedding columns) — encoded with the
model's internal dropout off; NT-Xent pulls the two views together against the 2(N−1) views of the
other sentences in the (global) batch. Training pools the last layer's tokens by mean; the model is
evaluated and exported with the mean of the last two layers (the paper's reported setting) — or,
with `export_pooling: auto` (default), with the base model's own pooling when its folder declares one.

Supervised (`mode: joint`, on an NLI file): softmax classification of [r1, r2, |r1−r2|] plus
α·NT-Xent over views of the premises and hypotheses; the `adversarial` view adds the normalised
gradient of the classification loss to the embedding output (FGV), so it exists only here.
`sup-unsup` and `joint-unsup` run that supervised stage first, then the unsupervised stage on the
corpus (run/execute.py trains each stage; recipes/base.py's `stages`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from sentadapt.config.schema import PATHS, RecipeConfig, check_choice, check_range, setting
from sentadapt.data.readers import TrainingData, counted_sentences, nli_examples, sentence_examples
from sentadapt.errors import ConfigError
from sentadapt.events import Progress
from sentadapt.model.pooling import POOLING_NAMES, TOKEN_POOLINGS, Pooling, resolve_export_pooling
from sentadapt.recipes.augment import AUGMENTATIONS, ViewInputs, make_view, stack_views
from sentadapt.recipes.base import (
    CONTRASTIVE_TEMPERATURE,
    TEXT,
    Embedded,
    RecipeBase,
    RecipeSpec,
    Stage,
    Term,
    register_recipe,
)
from sentadapt.recipes.matryoshka import Cut, whole

if TYPE_CHECKING:
    from torch import Tensor, nn

    from sentadapt.data.batching import TokenizedExamples
    from sentadapt.model.encoder import Encoder

MODES = ("unsup", "joint", "sup-unsup", "joint-unsup", "sup")
SUPERVISED_VIEWS = ("adversarial",)
# models whose position ids start after the padding index (positions padding_idx+1 .. ), not at 0
OFFSET_POSITION_MODELS = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text")
# The NLI classifier draws nn.Linear's default init from its own seed, so a run starts from the same weights
# whatever the process drew before (tests, an earlier stage); --seed changes data order and views.
CLASSIFIER_INIT_SEED = 0


@dataclass
class ConsertConfig(RecipeConfig):
    mode: str = setting("unsup", "unsup: two views of each corpus sentence | joint: NLI classification + alpha × "
                        "NT-Xent over views of its pairs (needs nli) | sup: NLI classification alone | sup-unsup, "
                        "joint-unsup: that stage first, then unsup on the corpus.")
    views: tuple[str, ...] = setting(("shuffle", "feature-cutoff"), "The two views: none, shuffle, token-cutoff, "
                                     "feature-cutoff, dropout, span-cutoff, encoder-dropout; adversarial in the "
                                     "supervised modes (default: the paper's best pair, Fig. 5).")
    token_cutoff_rate: float = setting(0.15, "The share of tokens token-cutoff zeroes.")
    feature_cutoff_rate: float = setting(0.2, "The share of embedding columns feature-cutoff zeroes.")
    dropout_rate: float = setting(0.2, "The share of embedding values the dropout view zeroes.")
    span_cutoff_rate: float = setting(0.2, "The share of tokens span-cutoff masks (it keeps one contiguous span of "
                                      "the rest).")
    temperature: float = setting(CONTRASTIVE_TEMPERATURE, "NT-Xent's temperature τ.")
    train_pooling: str = setting("mean", "The pooling in training (the paper's: mean of the last layer).")
    # switching a mean-trained model to last2avg cost points here (research/findings.md)
    export_pooling: str = setting("auto", "The pooling the model is evaluated and saved with: auto, the base "
                                  "model's own when its folder declares one (sentence-transformers), else the "
                                  "paper's last2avg (the mean of the last two layers); or a pooling name.")
    alpha: float = setting(0.15, "The contrastive loss's weight in the joint modes.")
    adversarial_norm: float = setting(0.1, "‖perturbation‖ per token of the adversarial view.")
    nli: tuple[str, ...] = setting((), "NLI file(s) for the supervised modes.", **PATHS)

    def validate(self) -> None:
        check_choice("mode", self.mode, MODES)
        if len(self.views) != 2:
            raise ConfigError(
                f"views: give exactly two views (e.g. views=shuffle,feature-cutoff), got {len(self.views)}"
            )
        allowed = AUGMENTATIONS + (SUPERVISED_VIEWS if self.mode != "unsup" else ())
        for view in self.views:
            if view in SUPERVISED_VIEWS and self.mode == "unsup":
                raise ConfigError("views: 'adversarial' needs labels; use it with mode=joint or joint-unsup")
            check_choice("views", view, allowed)
        for name in ("token_cutoff_rate", "feature_cutoff_rate", "dropout_rate", "span_cutoff_rate"):
            check_range(name, getattr(self, name), 0, 1, high_open=True)
        check_range("temperature", self.temperature, 0, None, low_open=True)
        check_choice("train_pooling", self.train_pooling, POOLING_NAMES)
        check_choice("export_pooling", self.export_pooling, ("auto", *POOLING_NAMES))
        check_range("alpha", self.alpha, 0, None)
        check_range("adversarial_norm", self.adversarial_norm, 0, None)
        if self.mode != "unsup" and not self.nli:
            raise ConfigError(f"mode {self.mode}: needs labelled NLI pairs; pass --set nli=FILE")


def _check_nli_files(paths: Sequence[str], config: ConsertConfig) -> None:
    """Before weights load (and in a dry run, which counts them): each NLI file of `--set nli=FILE` must exist."""
    for path in config.nli:
        if not Path(path).expanduser().is_file():
            raise ConfigError(f"--set nli={path}: no such file; pass .jsonl/.tsv/.csv/.parquet files of premise, "
                              "hypothesis and label")


def _count_nli_pairs(config: Any, progress: Progress) -> int | None:
    from sentadapt.data.nli import count_nli_pairs

    return count_nli_pairs(config.recipe_args.nli)


@register_recipe("consert")
class ConsertRecipe(RecipeBase):
    spec: ClassVar[RecipeSpec] = RecipeSpec(
        "consert", ConsertConfig, TEXT,
        # paper §4.1 (unsupervised): batch 96, max length 64, eval every 200 steps, patience 10, 10 % warm-up. lr: the
        # paper's 5e-7 was later called too low by its author; recipes/consert.yaml says what we measured.
        train_defaults={"batch_size": 96, "max_length": 64, "lr": 2e-5, "eval_every": 200, "checkpoint_every": 200,
                        "patience": 10, "warmup_ratio": 0.1},
        # sentence-tuned bases (presets.py): distillation towards the frozen base lets a higher lr learn the domain
        # without drifting (research/findings.md, "Levers on tuned bases")
        tuned_base_defaults={"lr": 5e-5, "distill": 1.0},
        # bf16 where the CPU multiplies it natively, by a rule written before its runs (research/findings.md, "A faster
        # teacher run"; bench/README.md, "The teacher run's default in bf16")
        teacher_defaults={"mixed_precision": "auto"},
    )
    config: ConsertConfig

    def __init__(self, config: ConsertConfig, encoder: Encoder, stage: str | None = None) -> None:
        import torch
        from torch import nn

        super().__init__(config, encoder, stage)
        self.stage_mode = stage or self.stages(config)[0].name
        self.train_pooling = Pooling.from_name(config.train_pooling, encoder.num_layers)
        self.position_offset = self._position_offset(encoder)
        self._check_model_supports_views(encoder)
        # an unused classifier would be a parameter without gradient under DDP: none in the unsupervised stage
        self._heads = nn.ModuleDict()
        if self.stage_mode in ("joint", "sup"):
            # softmax classifier over [r1, r2, |r1 − r2|] (Sentence-BERT's NLI head), 3 labels
            with torch.random.fork_rng(devices=[]):  # the process's own random state is left as it was
                torch.manual_seed(CLASSIFIER_INIT_SEED)
                self._heads["classifier"] = nn.Linear(3 * encoder.hidden_size, 3)

    @classmethod
    def stages(cls, config: ConsertConfig) -> tuple[Stage, ...]:
        """sup-unsup / joint-unsup: a supervised stage on the NLI files of `--set nli=FILE` (their labelled pairs),
        then the unsupervised stage on the corpus."""
        unsupervised = Stage("unsup", "sentence", counted_sentences)
        if config.mode == "unsup":
            return (unsupervised,)
        supervised = Stage(config.mode.split("-")[0], "NLI pair", _count_nli_pairs, _check_nli_files)
        return (supervised, unsupervised) if config.mode.endswith("-unsup") else (supervised,)

    def load_examples(self, data: TrainingData, encoder: Encoder, note: Callable[[str], None],
                      progress: Progress) -> TokenizedExamples:
        """The corpus (unsupervised stage), or the NLI files of `--set nli=FILE` (supervised stages)."""
        mismatch = self._pooling_mismatch(encoder)
        if mismatch is not None:
            note(mismatch)
        tokenizer, limit = encoder.tokenizer, encoder.token_limit(data.max_length)
        if self.stage_mode != "unsup":
            return nli_examples(self.config.nli, data, tokenizer, limit, note, progress)
        return sentence_examples(data, tokenizer, limit, note, progress)

    def _pooling_mismatch(self, encoder: Encoder) -> str | None:
        """A base that declares a token pooling other than the one trained (a [CLS] model: BGE, GTE; a decoder
        embedder's last token) is exported with its own, so the loss trains a vector the user does not get. The mean
        stays the default by a rule written before its runs (research/findings.md, "ConSERT's training pooling on a
        base that declares [CLS]": [CLS] gained more on average but lost past the rule's bound in one cell); the user
        is told."""
        declared = resolve_export_pooling("auto", encoder, paper="")
        trained = self.train_pooling.name(encoder.num_layers)
        exported = resolve_export_pooling(self.config.export_pooling, encoder, paper="last2avg")
        if declared not in TOKEN_POOLINGS or declared == trained or exported != declared:
            return None
        return (f"ConSERT trains {trained} pooling (train_pooling) but the model is used with the {declared} pooling "
                f"its folder declares; --set train_pooling={declared} trains the vector you get (docs/recipes.md)")

    def trainable_heads(self) -> nn.ModuleDict:
        return self._heads

    def prepare_export(self, encoder: Encoder, heads: nn.ModuleDict) -> Encoder:
        name = resolve_export_pooling(self.config.export_pooling, encoder, paper="last2avg")
        encoder.configure(pooling=Pooling.from_name(name, encoder.num_layers))
        return encoder

    # ------------------------------------------------------------------ views and terms
    def embed(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor], exported: bool) -> Embedded:
        if self.stage_mode == "unsup":
            return self._unsupervised(encoder, batch["input_ids"], batch["attention_mask"], exported)
        return self._supervised(encoder, heads, batch)

    def _unsupervised(self, encoder: Encoder, input_ids: Tensor, attention_mask: Tensor, exported: bool) -> Embedded:
        from sentadapt.recipes.losses import gather_across_processes

        first_view, second_view = (self._view(name, input_ids, attention_mask) for name in self.config.views)
        clean_view = self._clean_view(encoder, input_ids, attention_mask) if exported else None
        first, second, clean = self._encode_pair(encoder, first_view, second_view, clean_view)
        rows = clean if clean is not None else self._exported_rows(encoder, first, second)
        first, second = gather_across_processes(first), gather_across_processes(second)
        return Embedded([self._contrastive(first, second)], exported=rows)

    def _contrastive(self, first: Tensor, second: Tensor) -> Term:
        from sentadapt.recipes.losses import nt_xent

        temperature = self.config.temperature
        return Term("contrastive", lambda cut: nt_xent(cut(first), cut(second), temperature))

    def _clean_view(self, encoder: Encoder, input_ids: Tensor, attention_mask: Tensor) -> ViewInputs | None:
        """The sentences as exported, to stack with the views (a distillation term wants them) when no view already
        is them and training pools as the model is exported. One pass of 3 × batch rows instead of the views'
        2 × batch and the term's own of the batch: fewer, larger length chunks on a CPU, fewer kernel launches on a
        GPU (bench/README.md, "The teacher run on every CPU")."""
        if "none" in self.config.views or self.train_pooling != encoder.pooling:
            return None
        return ViewInputs(input_ids, attention_mask, None, None, False)

    def _exported_rows(self, encoder: Encoder, first: Tensor, second: Tensor) -> Tensor | None:
        """The `none` view's rows when training pools as the model is exported: then they are the sentences' vectors
        as evaluated (the same pass, pooling and head, dropout off: every ConSERT view runs without the model's
        dropout), which the distillation term can reuse. None otherwise (a paper-preset BERT pools [CLS] but
        trains on the mean)."""
        if "none" not in self.config.views or self.train_pooling != encoder.pooling:
            return None
        return first if self.config.views[0] == "none" else second

    def _supervised(self, encoder: Encoder, heads: nn.ModuleDict, batch: dict[str, Tensor]) -> Embedded:
        import torch
        import torch.nn.functional as F

        from sentadapt.recipes.losses import gather_across_processes

        recorded: list[Tensor] = []

        def record(embeddings: Tensor) -> Tensor:  # keeps the embedding output for the adversarial view
            recorded.append(embeddings)
            return embeddings

        wants_adversarial = "adversarial" in self.config.views
        left = self._encode_view(encoder, self._plain_view(batch, "a"), record if wants_adversarial else None)
        right = self._encode_view(encoder, self._plain_view(batch, "b"), record if wants_adversarial else None)

        def classify(cut: Cut) -> Tensor:  # Sentence-BERT's head on (a --matryoshka prefix of) both sentences
            u, v = cut(left), cut(right)
            logits = heads["classifier"](torch.cat([u, v, (u - v).abs()], dim=-1))
            return F.cross_entropy(logits.float(), batch["labels"])

        classification = Term("classification", classify, local=True)
        if self.stage_mode == "sup":
            return Embedded([classification])
        # contrastive term over the premises and hypotheses of the batch
        ids = _stack_padded(batch["a_input_ids"], batch["b_input_ids"])
        mask = _stack_padded(batch["a_attention_mask"], batch["b_attention_mask"])
        # FGV: the gradient of the classification loss on the whole vectors (a direction: its scale does not count)
        gradients = (torch.autograd.grad(classify(whole), recorded, retain_graph=True)
                     if wants_adversarial else None)
        inputs = []
        for name in self.config.views:
            if name == "adversarial":
                assert gradients is not None
                perturbation = _stack_padded(*(self.config.adversarial_norm * F.normalize(g.detach(), dim=-1)
                                               for g in gradients))
                inputs.append(ViewInputs(ids, mask, None, lambda e, p=perturbation: e + p.to(e.dtype),  # type: ignore[misc]
                                         False))
            else:
                inputs.append(self._view(name, ids, mask))
        first, second = (gather_across_processes(view) for view in self._encode_pair(encoder, *inputs)[:2])
        contrastive = dataclasses.replace(self._contrastive(first, second), factor=self.config.alpha)
        return Embedded([classification, contrastive])

    # ------------------------------------------------------------------ views
    def _view(self, name: str, input_ids: Tensor, attention_mask: Tensor) -> ViewInputs:
        rate = {
            "token-cutoff": self.config.token_cutoff_rate, "feature-cutoff": self.config.feature_cutoff_rate,
            "dropout": self.config.dropout_rate, "span-cutoff": self.config.span_cutoff_rate,
        }.get(name, 0.0)
        return make_view(name, input_ids, attention_mask, rate, position_offset=self.position_offset)

    @staticmethod
    def _plain_view(batch: dict[str, Tensor], side: str) -> ViewInputs:
        return ViewInputs(batch[f"{side}_input_ids"], batch[f"{side}_attention_mask"], None, None, False)

    def _encode_pair(self, encoder: Encoder, first: ViewInputs, second: ViewInputs, clean: ViewInputs | None = None,
                     ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Both views in one forward pass of 2B rows (stack_views: half the kernel launches), and the `clean` rows
        (_clean_view) as a third block of B, unless a view runs the model's own dropout and so needs a pass of its
        own (the clean rows are then left to the distillation term's pass: None)."""
        if first.model_dropout or second.model_dropout:
            return self._encode_view(encoder, first), self._encode_view(encoder, second), None
        stacked = stack_views(first, second, self.position_offset)
        if clean is not None:
            stacked = stack_views(stacked, clean, self.position_offset)
        pooled = self._encode_view(encoder, stacked)
        rows = first.input_ids.shape[0]
        return pooled[:rows], pooled[rows:2 * rows], None if clean is None else pooled[2 * rows:]

    def _encode_view(self, encoder: Encoder, view: ViewInputs, record: Any = None) -> Tensor:
        """One forward pass; internal dropout is on only for the `encoder-dropout` view (paper: off)."""
        transform = view.embedding_transform
        if record is not None:
            transform = record if transform is None else (lambda e, t=transform: t(record(e)))
        with encoder.dropout(view.model_dropout):
            return encoder(view.input_ids, view.attention_mask, position_ids=view.position_ids,
                           embedding_transform=transform, pooling=self.train_pooling, whole_batch=record is not None)

    # ------------------------------------------------------------------ model checks
    @staticmethod
    def _position_offset(encoder: Encoder) -> int:
        """RoBERTa-style models number positions from padding_idx + 1; their position table says so."""
        table = getattr(getattr(encoder.backbone, "embeddings", None), "position_embeddings", None)
        padding_idx = getattr(table, "padding_idx", None)
        if padding_idx is not None:
            return int(padding_idx) + 1
        if getattr(encoder.backbone.config, "model_type", "") in OFFSET_POSITION_MODELS:
            return int(encoder.backbone.config.pad_token_id) + 1
        return 0

    def _check_model_supports_views(self, encoder: Encoder) -> None:
        model_type = getattr(encoder.backbone.config, "model_type", "?")
        accepts_positions = "position_ids" in inspect.signature(encoder.backbone.forward).parameters
        if "shuffle" in self.config.views and not accepts_positions:
            raise ConfigError(f"views: 'shuffle' permutes position ids, which {model_type} models do not accept; "
                              "choose other views (e.g. views=token-cutoff,feature-cutoff)")
        if "shuffle" in self.config.views and not _positions_matter(encoder.backbone, self.position_offset):
            raise ConfigError(f"views: 'shuffle' permutes position ids, which this {model_type} model takes but "
                              "ignores (its positions are relative: the same output whatever the ids), so the view "
                              "would be the sentence unchanged; choose other views (e.g. "
                              "views=token-cutoff,feature-cutoff)")
        needs_embeddings = {"token-cutoff", "feature-cutoff", "dropout", "adversarial"} & set(self.config.views)
        if needs_embeddings and encoder.embedding_layer is None:
            raise ConfigError(f"views: {', '.join(sorted(needs_embeddings))} edit the embedding layer, which this "
                              f"{model_type} model does not expose; use shuffle or span-cutoff")


def _positions_matter(backbone: Any, offset: int) -> bool:
    """Whether the model's output changes when its position ids are shuffled: not for a model whose positions are
    relative alone (DeBERTa with position_biased_input false takes position_ids and ignores them). The shuffle
    changes the distances between tokens (a reversal would keep them, and rotary positions, ModernBERT's, would
    hardly move). Two no-grad passes of 6 tokens; fixed ids, so no tokenizer is needed; the mode is restored."""
    import torch

    vocabulary = backbone.get_input_embeddings().num_embeddings
    input_ids = (torch.arange(6, device=backbone.device) * 7 + 5) % vocabulary  # six distinct, arbitrary tokens
    plain = torch.arange(6, device=backbone.device) + offset
    was_training = backbone.training
    backbone.eval()
    try:
        with torch.no_grad():
            outputs = [backbone(input_ids=input_ids[None], attention_mask=torch.ones_like(input_ids)[None],
                                position_ids=positions[None]).last_hidden_state.float()
                       for positions in (plain, plain[torch.tensor([3, 1, 0, 5, 2, 4])])]
    finally:
        backbone.train(was_training)
    # a model that ignores the ids runs the same arithmetic twice: the same output to the bit. One that reads them
    # moves it by 0.8-1.2 of its scale (the shared MiniLMs, random BERT, RoBERTa, MPNet, DeBERTa with absolute
    # positions), a random-weight ModernBERT by 2.5e-5 (its near-uniform attention hardly sees rotary positions)
    return bool((outputs[0] - outputs[1]).abs().max() > 1e-6 * outputs[0].abs().max())


def _stack_padded(first: Tensor, second: Tensor) -> Tensor:
    """Concatenate two (B, T_i, ...) tensors along the batch, right-padding the shorter with zeros."""
    import torch
    import torch.nn.functional as F

    width = max(first.shape[1], second.shape[1])
    pad = [0, 0] * (first.dim() - 2)
    return torch.cat([F.pad(first, [*pad, 0, width - first.shape[1]]),
                      F.pad(second, [*pad, 0, width - second.shape[1]])])
