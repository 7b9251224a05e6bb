"""Run configuration: dataclasses with defaults, merged in one direction.

Precedence (later wins): dataclass defaults < the recipe's training defaults (its paper's settings)
< the recipe's tuned-base defaults, when the base is sentence-tuned (presets.py) < the YAML file (`--config`)
< command-line flags (`--lr`, `--batch-size`, ...) < `--set key=value`.
Unknown keys are errors that suggest the closest name; every value is checked against its field's
type and valid range before any weights load. The resolved config is saved with every run.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sentadapt.errors import ConfigError
from sentadapt.options import DEFAULT_ENCODING_ERRORS, ENCODE_BATCH_SIZE, TEXT_FIELD, VECTOR_FIELD
from sentadapt.registry import one_line, unknown_name_message

# The risk rule's default limit (decision/rule.py), declared here, the lowest module every reader imports (the
# command line too, which must not load numpy). Chosen by the rule written before its study (research/findings.md,
# "Calibrated intervals and risk (issue 68)"): the largest of 0.05-0.20 whose use of a model no better than the base
# (judged by its Δ over the whole pool) stays ≤ 5 % at every dev size from 50 to 200 labels, with the calibrated
# risk; it was 0.20 with the bootstrap's.
DEFAULT_RISK = 0.1
DEFAULT_DECISION = "risk"  # the use/keep rule (decision/rule.py: risk | strict | positive)

T = TypeVar("T")
MIXED_PRECISION = ("no", "fp16", "bf16", "auto")  # auto: train/precision.py
ON_NAN = ("stop", "skip")
REPORT_TO = ("none", "tensorboard", "wandb", "mlflow", "all")  # --report-to (train/tracking.py)
# sentadapt.recipes.losses.distillation_loss: kl and sim-mse compare the in-batch similarity structure (any two
# widths); mse and cosine compare each vector with its target (a teacher of another width through a projection)
STRUCTURE_KINDS = ("kl", "sim-mse")
VECTOR_KINDS = ("mse", "cosine")
DISTILL_KINDS = STRUCTURE_KINDS + VECTOR_KINDS
# Options that studies measured and the product did not adopt, removed in issue 59, with the value that left runs as
# they are: a run saved with it resumes; with another value, or given as --set, it is a one-line error naming where
# the evidence is (docs/teacher.md, "What was tried").
REMOVED_SETTINGS = {"teacher_evidence": "off", "teacher_risk": None, "agreement_holdout": 1000,
                    "mask_neighbours": False, "distill_neighbour_share": 1.0}
MIX_EXAMPLE = "kl:1,sim-mse:10"  # a weighted sum of kinds, as the errors show it


@dataclass
class RecipeConfig:
    """The base of every recipe's settings dataclass (`RecipeBase.Config`): `build_config` validates it after
    the YAML, flags and --set are applied."""

    def validate(self) -> None:
        """Raise ConfigError naming the setting that is out of range (a recipe with ranges overrides this)."""


def flat_key(name: str) -> dict[str, str]:
    """A group field's metadata: the flat key that names it in --set, YAML and config.yaml."""
    return {"key": name}


@dataclass(frozen=True)
class OptimizerSettings:
    """The optimizer and its learning-rate schedule."""

    # adamw | lars (SimCLR-style, for large learning rates on small heads)
    name: str = field(default="adamw", metadata=flat_key("optimizer"))
    weight_decay: float = field(default=0.01, metadata=flat_key("weight_decay"))
    # linear warm-up over this share of the steps, then linear decay to 0
    warmup_ratio: float = field(default=0.1, metadata=flat_key("warmup_ratio"))
    schedule: str = field(default="linear", metadata=flat_key("schedule"))  # decay after warm-up: linear | cosine
    max_grad_norm: float = field(default=1.0, metadata=flat_key("max_grad_norm"))  # 0 = no clipping
    beta1: float = field(default=0.9, metadata=flat_key("adam_beta1"))
    beta2: float = field(default=0.999, metadata=flat_key("adam_beta2"))
    eps: float = field(default=1e-6, metadata=flat_key("adam_eps"))


@dataclass(frozen=True)
class EvaluationSettings:
    """When the dev set is scored during training, and when training stops for want of a better score."""

    # dev evaluation every N optimizer steps (0 = only at the end)
    every: int = field(default=200, metadata=flat_key("eval_every"))
    # > 0: evaluate this many times per pass over the data instead of every eval_every
    per_pass: float = field(default=0.0, metadata=flat_key("evals_per_pass"))
    # stop after N evaluations without improvement (0 = never stop early)
    patience: int = field(default=10, metadata=flat_key("patience"))
    batch_size: int = field(default=ENCODE_BATCH_SIZE, metadata=flat_key("eval_batch_size"))


@dataclass(frozen=True)
class RecordSettings:
    """What a run writes as it goes: checkpoints to resume from and log lines."""

    # resumable checkpoint every N steps (0 = only on interrupt)
    checkpoint_every: int = field(default=200, metadata=flat_key("checkpoint_every"))
    keep_checkpoints: int = field(default=2, metadata=flat_key("keep_checkpoints"))
    # steps between lines of train.log (and points sent to the --report-to trackers)
    log_every: int = field(default=10, metadata=flat_key("log_every"))
    # none | tensorboard | wandb | mlflow | all (Accelerate's experiment trackers)
    report_to: str = field(default="none", metadata=flat_key("report_to"))
    # stop | skip (skip the step, stop after `max_nan_skips`)
    on_nan: str = field(default="stop", metadata=flat_key("on_nan"))
    max_nan_skips: int = field(default=10, metadata=flat_key("max_nan_skips"))


@dataclass(frozen=True)
class LoraSettings:
    """LoRA (sentadapt/model/lora.py, `--lora r=16`): train rank-r adapters on the encoder's linear layers, base frozen.
    r 0 = off (every weight trains). alpha 0 = 2 × r; targets: attention | all-linear | names joined by '+'."""

    r: int = field(default=0, metadata=flat_key("lora_r"))
    alpha: float = field(default=0.0, metadata=flat_key("lora_alpha"))
    dropout: float = field(default=0.0, metadata=flat_key("lora_dropout"))
    targets: str = field(default="attention", metadata=flat_key("lora_targets"))

    def resolved(self) -> LoraSettings:
        """The settings as the adapters are built (sentadapt/model/lora.py): alpha 0 made 2 × r."""
        return dataclasses.replace(self, alpha=self.alpha or 2.0 * self.r)

    @property
    def scaling(self) -> float:
        """peft's scale of the adapters' update: alpha / r (of resolved settings)."""
        return self.alpha / self.r


@dataclass(frozen=True)
class DistillationSettings:
    """Distillation toward the frozen base model or a teacher, for every recipe (sentadapt/train/distill.py)."""

    # the loss gains distill × D(adapted, base) on each batch's sentences. 0 = off (no frozen copy, no extra pass).
    weight: float = field(default=0.0, metadata=flat_key("distill"))
    # kl: in-batch similarity distributions | sim-mse: in-batch cosine values | mse: the vectors' squared distance
    # (not normalised) | cosine: 1 − cos of each vector with its target; or a weighted sum of them,
    # "kl:1,sim-mse:10,cosine:1" (a weight 0 = that term off): `distill_terms`
    kind: str = field(default="kl", metadata=flat_key("distill_kind"))
    # softmax temperature of the kl kind
    temperature: float = field(default=0.05, metadata=flat_key("distill_temperature"))
    # random | neighbours: with a teacher, half of each batch random anchors and half one of each anchor's
    # `distill_neighbours` nearest examples under the teacher (pairs it ranks close, not only unrelated ones)
    batches: str = field(default="random", metadata=flat_key("distill_batches"))
    neighbours: int = field(default=8, metadata=flat_key("distill_neighbours"))
    # The weight of the recipe's own loss: 0 = the distillation term alone (the recipe's views are then not
    # computed at all, unless the recipe trains heads of its own: they keep a gradient of 0 for DDP)
    recipe_weight: float = field(default=1.0, metadata=flat_key("recipe_weight"))


@dataclass(frozen=True)
class TeacherSettings:
    """With --teacher (RunConfig.teacher) the distillation target is the teacher's cached vectors instead of the
    base; distill_kind and distill_temperature are shared (kl: any two widths)."""

    # the distillation term's weight with a teacher
    weight: float = field(default=1.0, metadata=flat_key("teacher_weight"))
    # on: a teacher that trails the base on the dev set (the CI of its lead below 0) stops the run before training
    check: str = field(default="on", metadata=flat_key("teacher_check"))
    # the distillation target's similarities: α · the teacher's cosines + (1 − α) · the base's (docs/teacher.md,
    # "Blend targets"); "1" the teacher alone, a number in [0, 1], or "auto": α weighed on the dev set by its rule
    blend: str = field(default="1", metadata=flat_key("teacher_blend"))
    # the fields of a --teacher vectors file (.jsonl keys, .parquet columns): what embeddings APIs return
    text_field: str = field(default=TEXT_FIELD, metadata=flat_key("teacher_text_field"))
    vector_field: str = field(default=VECTOR_FIELD, metadata=flat_key("teacher_vector_field"))


@dataclass(frozen=True)
class SizeSettings:
    """The sizes a run trains (Matryoshka) and weighs on dev (decision/sizes.py)."""

    # Matryoshka (`--matryoshka 384,192,96`): every loss term, the recipe's and distillation's, summed over these
    # prefix widths of the exported vectors, largest first (sentence-transformers' MatryoshkaLoss), so each prefix
    # is an embedding of its own; () = off
    matryoshka: tuple[int, ...] = field(default=(), metadata=flat_key("matryoshka"))
    # the weight of each --matryoshka width's term, in its order; () = 2 for the first (largest), 1 for each other
    matryoshka_weights: tuple[float, ...] = field(default=(), metadata=flat_key("matryoshka_weights"))
    # --sizes: the sizes the finished run's dev table weighs (decision/sizes.py); () = matryoshka's, if any
    dev: tuple[int, ...] = field(default=(), metadata=flat_key("sizes"))


@dataclass(frozen=True)
class TrainConfig:
    """What the one training loop needs, whatever the recipe. Frozen, like RunConfig: built once (`build_config`),
    then only read; a changed copy is `dataclasses.replace(config, ...)`. Settings of one concern are a group (a
    field holding a frozen dataclass); every setting, grouped or not, has one flat key (`--set KEY=VALUE`, YAML,
    config.yaml): `flat_keys()`."""

    max_steps: int = 0  # optimizer steps; 0 = derived from `epochs`
    epochs: float = 1.0
    # With min_examples > 0 (and max_steps 0): as many passes as it takes to train on that many examples, at
    # least `epochs` and at most `max_epochs` — a small corpus gets several passes, a large one `epochs`.
    min_examples: int = 0
    max_epochs: float = 4.0
    batch_size: int = 64  # GLOBAL batch (all processes together) = the in-batch negatives per step
    lr: float = 2e-5
    grad_accum: int = 1  # micro-batches per optimizer step (does not add negatives)
    max_length: int = 64  # tokens per sentence in training
    mixed_precision: str = "no"
    # fp32 matmuls on TensorFloat-32 tensor cores (CUDA, Ampere and newer): 10-bit mantissa products, fp32
    # accumulation, ~2× the speed of strict fp32 on an A100/H100. False: strict fp32 (reproducibility).
    tf32: bool = True
    seed: int = 42
    length_grouping: bool = True  # random batches, less padding by grouping similar lengths (research/results.md)
    # A training batch's padded length is rounded up to a multiple of this. 0 = 8 on a GPU (tensor-core tiles, and
    # with max_length 64 at most 8 padded lengths for its kernels to warm up to instead of 64), 1 on the CPU
    # (there every padded position is paid for, and nothing warms up per shape)
    pad_multiple: int = 0
    # Keep only each transformer layer's input in the forward pass and recompute the layer in backward: activation
    # memory ~1/L of the layers' (L layers), for about one more forward pass of time (docs/internals.md). In
    # contrastive training the batch is the number of negatives, so the memory saved buys a larger batch.
    gradient_checkpointing: bool = False
    # torch.compile of the encoder's transformer layers while training on a CUDA GPU (sentadapt/model/compiling.py; dev
    # scoring and every encode stay eager; on other devices a note, and the run trains uncompiled): off | on
    # (inductor's fused kernels) | graphs (also CUDA graphs, mode "reduce-overhead"). A step at batch 64-128 is
    # bound by kernel launches; ~25 s of compiling first, recovered after ~1,800 steps (bench/README.md).
    compile: str = "off"
    dedup: bool = True  # repeated corpus lines would be false negatives in a batch
    optim: OptimizerSettings = field(default_factory=OptimizerSettings)
    evaluation: EvaluationSettings = field(default_factory=EvaluationSettings)
    records: RecordSettings = field(default_factory=RecordSettings)
    lora: LoraSettings = field(default_factory=LoraSettings)
    distillation: DistillationSettings = field(default_factory=DistillationSettings)
    teacher: TeacherSettings = field(default_factory=TeacherSettings)
    dims: SizeSettings = field(default_factory=SizeSettings)

    def validate(self) -> None:
        check_range("max_steps", self.max_steps, 0, None)
        check_range("epochs", self.epochs, 0, None, low_open=True)
        check_range("batch_size", self.batch_size, 2, None, hint="contrastive training needs at least 2 sentences "
                                                                    "per batch for in-batch negatives")
        check_range("lr", self.lr, 0, 1, low_open=True)
        check_range("grad_accum", self.grad_accum, 1, None)
        check_range("max_length", self.max_length, 4, None)
        check_range("pad_multiple", self.pad_multiple, 0, None)
        check_choice("mixed_precision", self.mixed_precision, MIXED_PRECISION)
        check_choice("compile", self.compile, ("off", "on", "graphs"))
        if self.compile != "off" and self.gradient_checkpointing:  # measured: torch 2.13 cannot trace its recompute
            raise ConfigError(f"compile: {self.compile} cannot compile layers that --grad-checkpointing recomputes; "
                              "drop one of the two (compile=off, or no --grad-checkpointing)")
        check_range("min_examples", self.min_examples, 0, None)
        check_range("max_epochs", self.max_epochs, 0, None, low_open=True)
        check_optimizer(self.optim)
        check_range("eval_every", self.evaluation.every, 0, None)
        check_range("evals_per_pass", self.evaluation.per_pass, 0, None)
        check_range("patience", self.evaluation.patience, 0, None)
        check_range("eval_batch_size", self.evaluation.batch_size, 1, None)
        check_records(self.records)
        vector_kind = check_distillation(self.distillation, self.teacher)
        check_matryoshka(self.dims.matryoshka, self.dims.matryoshka_weights, vector_kind)
        sizes = self.dims.dev
        if any(size < 1 for size in sizes) or len(set(sizes)) != len(sizes):
            raise ConfigError(f"--sizes: {','.join(map(str, sizes))} must list positive sizes, each once "
                              "(e.g. 384,192,96)")
        check_range("lora_r", self.lora.r, 0, None, hint="0 = off; the rank of the adapters")
        check_range("lora_alpha", self.lora.alpha, 0, None, hint="0 = 2 × lora_r")
        check_range("lora_dropout", self.lora.dropout, 0, 1, high_open=True)


# group name → its settings class: the TrainConfig fields whose default is a dataclass of settings
GROUPS: dict[str, Any] = {f.name: f.default_factory for f in dataclasses.fields(TrainConfig)
                          if dataclasses.is_dataclass(f.default_factory)}


def flat_keys() -> dict[str, tuple[str | None, str]]:
    """Every training setting's flat key → (its group, or None at the top, its field name), in TrainConfig's order."""
    keys: dict[str, tuple[str | None, str]] = {}
    for top in dataclasses.fields(TrainConfig):
        if top.name in GROUPS:
            keys.update({f.metadata["key"]: (top.name, f.name) for f in dataclasses.fields(GROUPS[top.name])})
        else:
            keys[top.name] = (None, top.name)
    return keys


FLAT_KEYS = flat_keys()


def flat_values(train: TrainConfig) -> dict[str, Any]:
    """The settings under their flat keys: what config.yaml, the summary and the presets read and write."""
    return {name: getattr(train, field) if group is None else getattr(getattr(train, group), field)
            for name, (group, field) in FLAT_KEYS.items()}


def train_config(**values: Any) -> TrainConfig:
    """A TrainConfig from flat keys (`train_config(distill=1.0, lora_r=16)`), each coerced to its type."""
    return with_overrides(TrainConfig(), values, "TrainConfig")


def key_type(name: str) -> Any:
    """The type of the setting a flat key names."""
    group, field_name = FLAT_KEYS[name]
    return typing.get_type_hints(TrainConfig if group is None else GROUPS[group])[field_name]


def key_field(name: str) -> dataclasses.Field[Any]:
    """The dataclass field behind a flat key (its type, default and metadata)."""
    group, field_name = FLAT_KEYS[name]
    owner = TrainConfig if group is None else GROUPS[group]
    return next(f for f in dataclasses.fields(owner) if f.name == field_name)


def check_optimizer(optim: OptimizerSettings) -> None:
    check_choice("optimizer", optim.name, ("adamw", "lars"))
    check_range("weight_decay", optim.weight_decay, 0, None)
    check_range("warmup_ratio", optim.warmup_ratio, 0, 1, high_open=True)
    check_choice("schedule", optim.schedule, ("linear", "cosine"))
    check_range("max_grad_norm", optim.max_grad_norm, 0, None)
    check_range("adam_beta1", optim.beta1, 0, 1, high_open=True)
    check_range("adam_beta2", optim.beta2, 0, 1, high_open=True)
    check_range("adam_eps", optim.eps, 0, None, low_open=True)


def check_records(records: RecordSettings) -> None:
    check_range("checkpoint_every", records.checkpoint_every, 0, None)
    check_range("keep_checkpoints", records.keep_checkpoints, 1, None)
    check_range("log_every", records.log_every, 1, None)
    check_choice("report_to", records.report_to, REPORT_TO)
    check_choice("on_nan", records.on_nan, ON_NAN)


def check_distillation(distillation: DistillationSettings, teacher: TeacherSettings) -> str | None:
    """The distillation and teacher settings; returns the first vector kind distill_kind weighs (or None), which
    Matryoshka and blends cannot be combined with."""
    check_range("distill", distillation.weight, 0, None, hint="0 = off")
    terms = distill_terms(distillation.kind)
    check_range("distill_temperature", distillation.temperature, 0, None, low_open=True)
    check_range("teacher_weight", teacher.weight, 0, None, low_open=True)
    check_choice("teacher_check", teacher.check, ("on", "off"))
    check_blend(teacher.blend)
    vector_kind = next((kind for kind, _ in terms if kind in VECTOR_KINDS), None)
    if str(teacher.blend) not in ("1", "1.0") and vector_kind is not None:
        raise ConfigError(f"teacher_blend: blends the teacher's and the base's similarities, which distill_kind "
                          f"{vector_kind} does not compare; use distill_kind=kl or sim-mse, or drop "
                          "teacher_blend")
    check_choice("distill_batches", distillation.batches, ("random", "neighbours"))
    check_range("distill_neighbours", distillation.neighbours, 1, None)
    check_range("recipe_weight", distillation.recipe_weight, 0, None)
    return vector_kind


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs; saved as `config.yaml` in the output directory. Frozen: every option lands in it once,
    in `build_config`, and nothing after that changes it in place (a stage's or a resumed run's config is a copy)."""

    recipe: str
    base: str
    corpus: list[str]
    output: str
    dev: str | None = None  # "stsb", "sickr", a task file or BEIR folder, or None (blind: keep the last step)
    dev_metric: str | None = None  # the dev task's metric that selects checkpoints (None: its main metric)
    data_dir: str | None = None
    text_column: str | None = None
    encoding_errors: str = DEFAULT_ENCODING_ERRORS  # strict | replace | skip (invalid UTF-8 lines in the corpus)
    streaming: bool = False  # stream Hub datasets instead of downloading them whole first
    num_proc: int | None = None  # corpus preparation workers; None: one per available core
    preset: dict[str, Any] | None = None  # {name, reason, values}: the defaults the run started from (presets.py)
    # the use/keep rule (decision/rule.py): risk | strict | positive, and the risk rule's limit
    decision: str = DEFAULT_DECISION
    risk: float = DEFAULT_RISK
    teacher: str | None = None  # --teacher MODEL: a model whose similarity structure the student distils
    # the base's prompt (a name, or "none") prepended to every training sentence; None: the base's
    # default_prompt_name, resolved into a name before the run is saved (sentadapt/model/prompts.py)
    prompt: str | None = None
    # each corpus file's sha256 when the run started (None: a Hub dataset): a resumed run refuses a changed corpus
    corpus_sha256: list[str | None] | None = None
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe_args: Any = None  # the recipe's own Config dataclass

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["train"] = _plain(flat_values(self.train))  # flat keys, as every config.yaml has held them
        data["recipe_args"] = _plain(dataclasses.asdict(self.recipe_args)) if self.recipe_args is not None else {}
        return data


def _plain(value: Any) -> Any:
    """Tuples → lists so the YAML stays readable (no python/tuple tags)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------------- checks


def check_range(name: str, value: float, low: float | None, high: float | None, *, low_open: bool = False,
                 high_open: bool = False, hint: str = "") -> None:
    bad = isinstance(value, float) and math.isnan(value)
    if low is not None:
        bad |= value <= low if low_open else value < low
    if high is not None:
        bad |= value >= high if high_open else value > high
    if bad:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        span = f"{left}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}{right}"
        raise ConfigError(f"{name}: {value} is out of range; valid: {span}" + (f" ({hint})" if hint else ""))


def check_blend(value: str) -> None:
    """teacher_blend: auto, or the teacher's weight α in [0, 1]."""
    if str(value) == "auto":
        return
    try:
        alpha = float(value)
    except ValueError:
        raise ConfigError(f"teacher_blend: {value!r} is not auto or a number in [0, 1] (the teacher's weight in the "
                          "target's similarities)") from None
    check_range("teacher_blend", alpha, 0, 1)


def distill_terms(value: str) -> tuple[tuple[str, float], ...]:
    """distill_kind as (kind, weight) terms with a weight above 0: "kl" is (("kl", 1.0),); "kl:1,sim-mse:10,cosine:0"
    is (("kl", 1.0), ("sim-mse", 10.0)), the distillation term their weighted sum. One-line errors name the part."""
    text = one_line(str(value))
    if ":" not in text and "," not in text:
        check_choice("distill_kind", text, DISTILL_KINDS)
        return ((text, 1.0),)
    terms: dict[str, float] = {}
    for part in text.split(","):
        kind, _, weight = part.strip().partition(":")
        if kind not in DISTILL_KINDS:
            raise ConfigError(f"distill_kind: '{kind}' in '{text}' is not one of {', '.join(DISTILL_KINDS)}; give "
                              f"one kind or a weighted sum such as {MIX_EXAMPLE}")
        if kind in terms:
            raise ConfigError(f"distill_kind: '{text}' names {kind} twice; give each kind once, e.g. {MIX_EXAMPLE}")
        try:
            terms[kind] = float(weight) if weight else 1.0
        except ValueError:
            raise ConfigError(f"distill_kind: '{part.strip()}' has a weight that is not a number; write kind:weight, "
                              f"e.g. {MIX_EXAMPLE}") from None
        if not terms[kind] >= 0 or terms[kind] == float("inf"):
            raise ConfigError(f"distill_kind: '{part.strip()}' has a weight that is not ≥ 0 and finite (0 = off)")
    kept = tuple((kind, weight) for kind, weight in terms.items() if weight > 0)
    if not kept:
        raise ConfigError(f"distill_kind: '{text}' weighs every kind 0; give one a weight above 0, or turn "
                          "distillation off with distill=0")
    return kept


def check_matryoshka(sizes: tuple[int, ...], weights: tuple[float, ...], vector_kind: str | None) -> None:
    """--matryoshka: positive widths, largest first, each once; as many positive weights (or none); no distillation
    kind that compares coordinates (`vector_kind`: the first such kind distill_kind weighs, or None)."""
    if not sizes:
        if weights:
            raise ConfigError("matryoshka_weights: given without --matryoshka; list the sizes they weigh, e.g. "
                              "--matryoshka 384,192,96")
        return
    listed = ",".join(str(size) for size in sizes)
    if min(sizes) < 1:
        raise ConfigError(f"--matryoshka: {listed} has a size below 1; list widths such as 384,192,96")
    if any(later >= earlier for earlier, later in itertools.pairwise(sizes)):
        fixed = ",".join(str(size) for size in sorted(set(sizes), reverse=True))
        raise ConfigError(f"--matryoshka: {listed} is not decreasing; list each size once, largest first: {fixed}")
    if weights and len(weights) != len(sizes):
        raise ConfigError(f"matryoshka_weights: {len(weights)} weights for {len(sizes)} sizes ({listed}); give one "
                          "per size")
    if any(not weight > 0 for weight in weights):
        raise ConfigError(f"matryoshka_weights: {','.join(map(str, weights))} has a weight that is not > 0")
    if vector_kind is not None:
        raise ConfigError(f"--matryoshka: distill_kind {vector_kind} compares every coordinate of a vector with its "
                          "target's, which a prefix cannot match; use distill_kind=kl or sim-mse")


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name}: '{one_line(str(value))}' is not one of {', '.join(choices)}")




# ---------------------------------------------------------------------- coercion and merging


def coerce(name: str, value: Any, annotation: Any) -> Any:
    """Turn a YAML/CLI value into the field's type, or raise ConfigError naming the key."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        empty = value is None or (isinstance(value, str) and value.lower() in ("none", "null", ""))
        if empty and type(None) in typing.get_args(annotation):
            return None
        return coerce(name, value, options[0])
    if origin in (tuple, list):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ConfigError(f"{name}: expected a comma-separated list, got {value!r}")
        (item_type, *_) = typing.get_args(annotation) or (str,)
        converted = [coerce(name, item.strip() if isinstance(item, str) else item, item_type) for item in items]
        return tuple(converted) if origin is tuple else converted
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on", "false", "no", "0", "off"):
            return value.lower() in ("true", "yes", "1", "on")
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
        if not number.is_integer():
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        return int(number)
    if annotation is float:
        try:
            return float(value)  # YAML reads "2e-5" as a string: accept it here
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if annotation is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{name}: expected text, got {value!r}")
        if isinstance(value, bool):  # YAML 1.1 reads a bare on/off (or yes/no) as a boolean
            return "on" if value else "off"
        return str(value)
    return value


def with_overrides(target: T, overrides: dict[str, Any], where: str) -> T:
    """A copy of the dataclass `target` with fields from a mapping, types coerced; unknown keys are errors. A
    TrainConfig takes flat keys (FLAT_KEYS) and, in YAML, a group as a mapping of its fields (`lora: {r: 16}`)."""
    if isinstance(target, TrainConfig):
        return _train_with_overrides(target, overrides, where)  # type: ignore[return-value]
    hints = typing.get_type_hints(type(target))
    names = [f.name for f in dataclasses.fields(target)]  # type: ignore[arg-type]
    changes = {}
    for key, value in overrides.items():
        if key in REMOVED_SETTINGS and key not in names:
            check_removed(f"{where}: {key}", key, value)
            continue  # a run saved before the option left, with the value that changed nothing
        if key not in names:
            raise ConfigError(f"{where}: " + unknown_name_message("key", key, names))
        changes[key] = coerce(f"{where}: {key}", value, hints[key])
    return dataclasses.replace(target, **changes)  # type: ignore[type-var]


def _train_with_overrides(train: TrainConfig, overrides: dict[str, Any], where: str) -> TrainConfig:
    flat: dict[str, Any] = {}
    for name, value in overrides.items():
        if name in GROUPS and isinstance(value, dict):  # a group written out: its fields by their own names
            fields = {f.name: f.metadata["key"] for f in dataclasses.fields(GROUPS[name])}
            for inner, inner_value in value.items():
                if inner not in fields:
                    raise ConfigError(f"{where}: {name}: " + unknown_name_message("key", inner, list(fields)))
                flat[fields[inner]] = inner_value
        else:
            flat[name] = value
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        if name in REMOVED_SETTINGS and name not in FLAT_KEYS:
            check_removed(f"{where}: {name}", name, value)
            continue  # a run saved before the option left, with the value that changed nothing
        if name not in FLAT_KEYS:
            raise ConfigError(f"{where}: " + unknown_name_message("key", name, list(FLAT_KEYS)))
        group, field_name = FLAT_KEYS[name]
        owner = TrainConfig if group is None else GROUPS[group]
        converted = coerce(f"{where}: {name}", value, typing.get_type_hints(owner)[field_name])
        if group is None:
            top[field_name] = converted
        else:
            grouped.setdefault(group, {})[field_name] = converted
    for group, changes in grouped.items():
        top[group] = dataclasses.replace(getattr(train, group), **changes)
    return dataclasses.replace(train, **top)


def check_removed(where: str, key: str, value: Any) -> None:
    """A removed option (REMOVED_SETTINGS) at the value that changed nothing passes (a saved run resumes); any other
    value is one line saying it is gone and where its evidence is."""
    default = REMOVED_SETTINGS[key]
    if value is None or value == default or (str(value).lower() in ("off", "false", "none") and not default):
        return
    if default is not None and not isinstance(default, bool) and _same_number(value, default):
        return
    raise ConfigError(f"{where}: {key} was removed (studies measured it and did not adopt it: docs/teacher.md, "
                      "\"What was tried\"); drop it (a run trained with it resumes only with the sentadapt that "
                      "trained it)")


def _same_number(value: Any, default: Any) -> bool:
    try:
        return float(value) == float(default)
    except (TypeError, ValueError):
        return False


def parse_set_options(items: list[str]) -> dict[str, str]:
    """`--set key=value` pairs → dict (values stay strings; the field type converts them)."""
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set: '{one_line(item)}' is not key=value (e.g. --set temperature=0.05)")
        parsed[key.strip()] = value.strip()
    return parsed


def load_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    from sentadapt.storage.file_memo import same_file_once

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config: {path}: no such file")
    try:  # parsed once per process while unchanged (the recipe's name, auto's candidates and the config read it)
        data = copy.deepcopy(same_file_once(path, lambda p: yaml.safe_load(p.read_text(encoding="utf-8")))) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: invalid YAML ({getattr(error, 'problem', error)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with recipe, train and recipe_args")
    allowed = {"recipe", "version", "train", "recipe_args", "description"}
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{path}: " + unknown_name_message("top-level key", key, sorted(allowed)))
    return data


def split_set_options(options: dict[str, Any], recipe_config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Route bare `--set` keys: recipe fields first, then training fields; `train.x`/`recipe.x` are explicit."""
    recipe_fields = {f.name for f in dataclasses.fields(recipe_config)}
    train_fields = set(FLAT_KEYS)
    to_recipe: dict[str, Any] = {}
    to_train: dict[str, Any] = {}
    for key, value in options.items():
        scope, dot, name = key.partition(".")
        if dot and scope == "train":
            to_train[name] = value
        elif dot and scope in ("recipe", "recipe_args"):
            to_recipe[name] = value
        elif key in recipe_fields:
            to_recipe[key] = value
        elif key in train_fields:
            to_train[key] = value
        elif key in REMOVED_SETTINGS:
            check_removed(f"--set {key}", key, value)  # the value that changed nothing: accepted, as before
        else:
            raise ConfigError("--set: " + unknown_name_message("key", key, sorted(recipe_fields | train_fields)))
    return to_recipe, to_train


def build_config(
    recipe_name: str,
    recipe_config_class: type,
    recipe_train_defaults: dict[str, Any],
    yaml_path: str | Path | None,
    flag_overrides: dict[str, Any],
    set_options: list[str],
    preset_values: dict[str, Any] | None = None,
    set_values: dict[str, Any] | None = None,
    **run_fields: Any,
) -> RunConfig:
    """Merge defaults < recipe training defaults < preset values < YAML < flags < --set into a validated
    RunConfig. `preset_values` (a recipe's tuned-base defaults) may name training or recipe fields; `set_values`
    are typed `--set` values (the API's config keywords)."""
    train = TrainConfig()
    train = with_overrides(train, recipe_train_defaults, f"recipe {recipe_name} defaults")
    recipe_args = recipe_config_class()
    preset_recipe, preset_train = split_set_options(preset_values or {}, recipe_args)
    recipe_args = with_overrides(recipe_args, preset_recipe, f"recipe {recipe_name} tuned_base_defaults")
    train = with_overrides(train, preset_train, f"recipe {recipe_name} tuned_base_defaults")
    if yaml_path is not None:
        data = load_yaml(yaml_path)
        if data.get("recipe", recipe_name) != recipe_name:
            raise ConfigError(
                f"{yaml_path}: is a config for recipe '{data['recipe']}', but --recipe is '{recipe_name}'"
            )
        train = with_overrides(train, data.get("train") or {}, f"{yaml_path}: train")
        recipe_args = with_overrides(recipe_args, data.get("recipe_args") or {}, f"{yaml_path}: recipe_args")
    train = with_overrides(train, {k: v for k, v in flag_overrides.items() if v is not None}, "option")
    to_recipe, to_train = split_set_options({**parse_set_options(set_options), **(set_values or {})}, recipe_args)
    recipe_args = with_overrides(recipe_args, to_recipe, "--set")
    train = with_overrides(train, to_train, "--set")
    train.validate()
    recipe_args.validate()
    return RunConfig(recipe=recipe_name, train=train, recipe_args=recipe_args, **run_fields)


def save_run_config(config: RunConfig, path: Path) -> None:
    import yaml

    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
    tmp.replace(path)


def load_run_config(path: Path, recipe_configs: dict[str, type]) -> RunConfig:
    """Read a run's saved config.yaml back (for --resume): the saved values are authoritative."""
    import yaml

    if not path.is_file():
        raise ConfigError(f"--resume: {path} not found; is this a sentadapt run directory?")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    train = TrainConfig()
    train = with_overrides(train, data.get("train") or {}, f"{path}: train")
    recipe_class = recipe_configs.get(data["recipe"])
    if recipe_class is None:
        raise ConfigError(f"{path}: unknown recipe '{data['recipe']}'")
    recipe_args = recipe_class()
    recipe_args = with_overrides(recipe_args, data.get("recipe_args") or {}, f"{path}: recipe_args")
    # every saved field as written (not coerced: "none" is a value of dev and prompt, unlike None); a field a run
    # saved before it existed gets today's default, except the prompt: runs saved before prompts trained without one
    saved = {f.name: data[f.name] for f in dataclasses.fields(RunConfig)
             if f.name in data and f.name not in ("train", "recipe_args")
             and (data[f.name] is not None or f.default is None)}
    saved.setdefault("prompt", "none")
    return RunConfig(train=train, recipe_args=recipe_args, **saved)
