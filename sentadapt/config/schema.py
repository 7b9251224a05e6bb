"""The run configuration's schema: what a run is configured by, as frozen dataclasses with their defaults.

`RunConfig` is what a run needs and saves as config.yaml; `TrainConfig` what the one training loop needs, its settings
of one concern grouped (a field holding a frozen dataclass). Every training setting has one flat key (`--set
KEY=VALUE`, YAML, config.yaml, `FLAT_KEYS`). How the values are merged into one (defaults < paper < tuned base <
YAML < flags < --set) is config/merging.py's.

First the checks every configured value passes before any weights load (ranges, choices, the distillation mix and
the Matryoshka sizes, each failing with one line that names the setting and what is valid), then the schema."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sentadapt.errors import ConfigError
from sentadapt.options import DEFAULT_ENCODING_ERRORS, ENCODE_BATCH_SIZE, TEXT_FIELD, VECTOR_FIELD
from sentadapt.registry import one_line

# ------------------------------------------------------------------------------------------ the checks


MIXED_PRECISION = ("no", "fp16", "bf16", "auto")  # auto: train/compute.py
ON_NAN = ("stop", "skip")
OPTIMIZERS = ("adamw", "lars")  # train/optim.py builds them
SCHEDULES = ("linear", "cosine")
REPORT_TO = ("none", "tensorboard", "wandb", "mlflow", "all")  # --report-to (train/tracking.py)
# sentadapt.recipes.losses.distillation_loss: kl and sim-mse compare the in-batch similarity structure (any two
# widths); mse and cosine compare each vector with its target (a teacher of another width through a projection)
STRUCTURE_KINDS = ("kl", "sim-mse")
VECTOR_KINDS = ("mse", "cosine")
DISTILL_KINDS = STRUCTURE_KINDS + VECTOR_KINDS
MIX_EXAMPLE = "kl:1,sim-mse:10"  # a weighted sum of kinds, as the errors show it


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


@dataclass(frozen=True)
class DistillMix:
    """distill_kind, parsed: the (kind, weight) terms with a weight above 0; the distillation term D is their weighted
    sum. "kl" is (("kl", 1.0),); "kl:1,sim-mse:10,cosine:0" is (("kl", 1.0), ("sim-mse", 10.0))."""

    terms: tuple[tuple[str, float], ...]

    @classmethod
    def parse(cls, value: str) -> DistillMix:
        """distill_kind's text → its terms; one-line errors name the part."""
        return cls(_distill_terms(value))

    @property
    def vector_kind(self) -> str | None:
        """The first kind that compares coordinates (mse, cosine), which a --matryoshka prefix or a blend of
        similarities cannot serve; None when every kind compares in-batch similarities."""
        return next((kind for kind, _ in self.terms if kind in VECTOR_KINDS), None)

    @property
    def compares_structure(self) -> bool:
        """Whether a kind compares the in-batch similarities (kl, sim-mse)."""
        return any(kind not in VECTOR_KINDS for kind, _ in self.terms)


def _distill_terms(value: str) -> tuple[tuple[str, float], ...]:
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


# ------------------------------------------------------------------------------------------ the schema


# The risk rule's default limit (decision/rule.py), declared here, a low module every reader imports (the
# command line too, which must not load numpy): the chance, over every look of the label-more loop
# (decision/sequential.py), of using a model no better than the base. Picked with the spending function by the rule
# written before its study (research/findings.md, "The label-more loop and its limit (issue 83)").
DEFAULT_RISK = 0.2
# the label-more loop (decision/sequential.py): its last look's labels (400 random labels put a gain of +1.0 at
# z ≈ 1.7), and the spending of the risk over the looks
LABEL_CAP = 400
DEFAULT_SPENDING = "sqrt"
DEFAULT_DECISION = "risk"  # the use/keep rule (decision/rule.py: risk | strict | positive)


def setting(default: Any, help: str, **metadata: Any) -> Any:
    """A config field with its description, written once: `help` is what the option reference (docs/options.md)
    says of its `--set` key and what its `adapt` flag's --help says (run/adapt_options.py reads it)."""
    return field(default=default, metadata={"help": help, **metadata})


def help_of(setting_field: dataclasses.Field[Any]) -> str:
    """A setting's description, as `setting` recorded it ("" for a field declared without one)."""
    return str(setting_field.metadata.get("help", ""))


PATHS = {"paths": True}  # a RecipeConfig field's metadata: a tuple of local files
RECORDED = {"recorded": True}  # a RunConfig field's metadata: what the run fills in, not an option a user gives


@dataclass
class RecipeConfig:
    """The base of every recipe's settings dataclass (`RecipeBase.Config`): `build_config` validates it after
    the YAML, flags and --set are applied. A field of local files says so in its metadata (`PATHS`): the run
    records them absolute, as it does its corpus, so `--resume` finds them from any directory."""

    def validate(self) -> None:
        """Raise ConfigError naming the setting that is out of range (a recipe with ranges overrides this)."""


@dataclass(frozen=True)
class OptimizerSettings:
    """The optimizer and its learning-rate schedule."""

    optimizer: str = setting("adamw", "adamw | lars (SimCLR-style, for large learning rates on small heads).")
    weight_decay: float = setting(0.01, "The optimizer's decoupled weight decay (not on biases and LayerNorms).")
    warmup_ratio: float = setting(0.1, "Linear warm-up over this share of the steps, then the decay.")
    schedule: str = setting("linear", "The decay after warm-up, to 0: linear | cosine.")
    max_grad_norm: float = setting(1.0, "Clip the gradients' global norm to this (0: no clipping).")
    adam_beta1: float = setting(0.9, "AdamW's β1 (the gradient's moving average).")
    adam_beta2: float = setting(0.999, "AdamW's β2 (the squared gradient's moving average).")
    adam_eps: float = setting(1e-6, "AdamW's ε.")


@dataclass(frozen=True)
class EvaluationSettings:
    """When the dev set is scored during training, and when training stops for want of a better score."""

    eval_every: int = setting(200, "Dev evaluation every N optimizer steps (0: only at the end). Default: the "
                              "recipe's (`--dry-run` shows it).")
    evals_per_pass: float = setting(0.0, "> 0: evaluate this many times per pass over the data instead of every "
                                    "eval_every.")
    patience: int = setting(10, "Stop after N evaluations without improvement (0: never stop early).")
    eval_batch_size: int = setting(ENCODE_BATCH_SIZE, "Sentences per batch when the dev set is encoded.")


@dataclass(frozen=True)
class RecordSettings:
    """What a run writes as it goes: checkpoints to resume from and log lines."""

    checkpoint_every: int = setting(200, "A resumable checkpoint every N steps (0: only on an interrupt).")
    keep_checkpoints: int = setting(2, "The newest resumable checkpoints kept on disk.")
    log_every: int = setting(10, "Steps between lines of train.log (and points sent to the --report-to trackers).")
    report_to: str = setting("none", "Experiment tracking through Accelerate: none | tensorboard | wandb | mlflow | "
                             "all (every installed one). Events of tensorboard: OUTPUT/tensorboard/.")
    on_nan: str = setting("stop", "A non-finite loss or gradient norm: stop with the last good step's weights | "
                          "skip the step (and stop after max_nan_skips).")
    max_nan_skips: int = setting(10, "With on_nan=skip: the steps skipped before the run stops.")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA (sentadapt/model/lora.py, `--lora r=16`): rank-r adapters on the encoder's linear layers, base frozen."""

    KEY_PREFIX: ClassVar[str] = "lora_"  # its settings' flat keys: lora_r, lora_alpha, ...
    r: int = setting(0, "The adapters' rank (0: off, every weight trains).")
    alpha: float = setting(0.0, "The adapters' scale numerator, update × alpha / r (0: 2 × r).")
    dropout: float = setting(0.0, "Dropout on the adapters' input.")
    targets: str = setting("attention", "The linear layers adapted: attention | all-linear | names joined by '+' "
                           "(query+value).")

    def resolved(self) -> LoraSettings:
        """The settings as the adapters are built (sentadapt/model/lora.py): alpha 0 made 2 × r."""
        return dataclasses.replace(self, alpha=self.alpha or 2.0 * self.r)


@dataclass(frozen=True)
class DistillationSettings:
    """Distillation toward the frozen base model or a teacher, for every recipe (sentadapt/train/distill.py)."""

    distill: float = setting(0.0, "The loss gains distill × D(adapted, base) on each batch's sentences (0: off, no "
                             "frozen copy, no extra pass).")
    distill_kind: str = setting("kl", "kl: in-batch similarity distributions | sim-mse: in-batch cosine values | "
                                "mse: the vectors' squared distance (not normalised) | cosine: 1 − cos of each vector "
                                "with its target; or a weighted sum of them, \"kl:1,sim-mse:10,cosine:1\" (a weight 0 "
                                "turns its term off).")
    distill_temperature: float = setting(0.05, "The softmax temperature of the kl kind.")
    distill_batches: str = setting("random", "random | neighbours: with a teacher, half of each batch random "
                                   "anchors and half one of each anchor's distill_neighbours nearest examples under "
                                   "the teacher (pairs it ranks close, not only unrelated ones).")
    distill_neighbours: int = setting(8, "With distill_batches=neighbours: the nearest examples a partner is drawn "
                                      "from.")
    # a recipe that trains heads of its own still runs them at weight 0: they keep a gradient of 0 for DDP
    recipe_weight: float = setting(1.0, "The weight of the recipe's own loss (0: the distillation term alone; the "
                                   "recipe's views are then not computed).")

    @functools.cached_property
    def mix(self) -> DistillMix:
        """distill_kind as its typed terms, parsed on first use (check_distillation's) and kept."""
        return DistillMix.parse(self.distill_kind)


@dataclass(frozen=True)
class TeacherSettings:
    """With --teacher (RunConfig.teacher) the distillation target is the teacher's cached vectors instead of the
    base; distill_kind and distill_temperature are shared (kl: any two widths)."""

    KEY_PREFIX: ClassVar[str] = "teacher_"  # its settings' flat keys: teacher_weight, teacher_check, ...
    weight: float = setting(1.0, "The distillation term's weight with a teacher.")
    check: str = setting("on", "on: a teacher that trails the base on the dev set (the CI of its lead below 0) stops "
                         "the run before training | off.")
    blend: str = setting("1", "The distillation target's similarities: α · the teacher's cosines + (1 − α) · the "
                         "base's (docs/teacher.md, \"Blend targets\"): 1, the teacher alone, a number in [0, 1], or "
                         "auto: α weighed on the dev set by its rule.")
    text_field: str = setting(TEXT_FIELD, "The text's field in a --teacher vectors file (.jsonl key, .parquet "
                              "column).")
    vector_field: str = setting(VECTOR_FIELD, "The vector's field in a --teacher vectors file (what embeddings APIs "
                                "return).")


@dataclass(frozen=True)
class SizeSettings:
    """The sizes a run trains (Matryoshka) and weighs on dev (decision/sizes.py)."""

    matryoshka: tuple[int, ...] = setting((), "Train prefixes of the vectors as embeddings too (MatryoshkaLoss): "
                                          "every loss term, the recipe's and distillation's, summed over these "
                                          "sizes, largest first, e.g. 384,192,96, weighted by matryoshka_weights. "
                                          "Then eval --dims 192 scores a prefix.")
    matryoshka_weights: tuple[float, ...] = setting((), "The weight of each --matryoshka size's term, in its order "
                                                    "(default: 2 for the largest, 1 for each other; 1,1,1 weighs "
                                                    "them equally).")
    sizes: tuple[int, ...] = setting((), "After training, score the kept model on the dev set at these sizes (fp32, "
                                     "int8, binary) against the base's whole vectors and name the smallest that "
                                     "keeps the gain at --risk. Default: the --matryoshka sizes.")


@dataclass(frozen=True)
class TrainConfig:
    """What the one training loop needs, whatever the recipe. Frozen, like RunConfig: built once (`build_config`),
    then only read; a changed copy is `dataclasses.replace(config, ...)`. Settings of one concern are a group (a
    field holding a frozen dataclass); every setting, grouped or not, has one flat key (`--set KEY=VALUE`, YAML,
    config.yaml): `flat_keys()`."""

    max_steps: int = setting(0, "Optimizer steps (overrides --epochs). Default: 0, from --epochs and the corpus size "
                             "(`--dry-run` counts the corpus and shows them).")
    epochs: float = setting(1.0, "Passes over the corpus (--max-steps wins).")
    min_examples: int = setting(0, "> 0 (and max_steps 0): as many passes as it takes to train on that many "
                                "examples, at least --epochs and at most max_epochs (a small corpus gets several "
                                "passes, a large one --epochs).")
    max_epochs: float = setting(4.0, "The most passes min_examples may ask for.")
    batch_size: int = setting(64, "Sentences per optimizer step, all processes together; each one's negatives are "
                              "the others in its batch, so larger is harder. Default: the recipe's (`--dry-run` "
                              "shows it).")
    lr: float = setting(2e-5, "Peak learning rate. Default: the recipe's or preset's (`--dry-run` shows it).")
    grad_accum: int = setting(1, "Micro-batches per optimizer step (they add no negatives).")
    max_length: int = setting(64, "Tokens per training sentence.")
    mixed_precision: str = setting("no", "no | fp16 | bf16 | auto (bf16 on a CPU with native bf16 matmuls where its "
                                   "training pass timed ≤ 0.9× fp32's, else no; a ConSERT teacher run's default).")
    tf32: bool = setting(True, "on (default) | off: fp32 matmuls on TensorFloat-32 tensor cores (CUDA, Ampere and "
                         "newer: 10-bit mantissa products, fp32 accumulation, ~2× strict fp32's speed on an "
                         "A100/H100); off is strict fp32 (reproducible).")
    seed: int = setting(42, "Seed of data order and augmentations.")
    length_grouping: bool = setting(True, "Random batches of similar lengths, so less padding (research/results.md).")
    # 8 on a GPU: tensor-core tiles, and with max_length 64 at most 8 padded lengths for its kernels to warm up to
    # instead of 64; 1 on the CPU, where every padded position is paid for and nothing warms up per shape
    pad_multiple: int = setting(0, "A training batch's padded length is rounded up to a multiple of this (0: 8 on a "
                                "GPU, 1 on the CPU).")
    # in contrastive training the batch is the number of negatives, so the memory saved buys a larger batch
    gradient_checkpointing: bool = setting(False, "Recompute activations in backward: activation memory ~1/L of the "
                                           "layers' (L layers; a larger batch, more negatives) for about one more "
                                           "forward pass of time (docs/internals.md).")
    # a step at batch 64-128 is bound by kernel launches; ~25 s of compiling first, recovered after ~1,800 steps
    # (bench/README.md)
    compile: str = setting("off", "torch.compile of the encoder's transformer layers while training on a CUDA GPU "
                           "(dev scoring and every encode stay eager; elsewhere a note, and the run trains "
                           "uncompiled): off | on (inductor's fused kernels) | graphs (also CUDA graphs).")
    dedup: bool = setting(True, "Train on each distinct corpus line once (a repeat would be its own false negative "
                          "in a batch).")
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
        check_range("eval_every", self.evaluation.eval_every, 0, None)
        check_range("evals_per_pass", self.evaluation.evals_per_pass, 0, None)
        check_range("patience", self.evaluation.patience, 0, None)
        check_range("eval_batch_size", self.evaluation.eval_batch_size, 1, None)
        check_records(self.records)
        vector_kind = check_distillation(self.distillation, self.teacher)
        check_matryoshka(self.dims.matryoshka, self.dims.matryoshka_weights, vector_kind)
        sizes = self.dims.sizes
        if any(size < 1 for size in sizes) or len(set(sizes)) != len(sizes):
            raise ConfigError(f"--sizes: {','.join(map(str, sizes))} must list positive sizes, each once "
                              "(e.g. 384,192,96)")
        check_range("lora_r", self.lora.r, 0, None, hint="0 = off; the rank of the adapters")
        check_range("lora_alpha", self.lora.alpha, 0, None, hint="0 = 2 × lora_r")
        check_range("lora_dropout", self.lora.dropout, 0, 1, high_open=True)


# group name → its settings class: the TrainConfig fields whose default is a dataclass of settings
GROUPS: dict[str, Any] = {f.name: f.default_factory for f in dataclasses.fields(TrainConfig)
                          if dataclasses.is_dataclass(f.default_factory)}


def group_keys(group: str) -> dict[str, str]:
    """A group's field names → their flat keys: the field's name, after the group's KEY_PREFIX where it has one
    (`lora.r` is lora_r; `optim.adam_beta1` is adam_beta1)."""
    settings = GROUPS[group]
    prefix = getattr(settings, "KEY_PREFIX", "")
    return {f.name: prefix + f.name for f in dataclasses.fields(settings)}


def flat_keys() -> dict[str, tuple[str | None, str]]:
    """Every training setting's flat key → (its group, or None at the top, its field name), in TrainConfig's order."""
    keys: dict[str, tuple[str | None, str]] = {}
    for top in dataclasses.fields(TrainConfig):
        if top.name in GROUPS:
            keys.update({key: (top.name, name) for name, key in group_keys(top.name).items()})
        else:
            keys[top.name] = (None, top.name)
    return keys


FLAT_KEYS = flat_keys()


def flat_values(train: TrainConfig) -> dict[str, Any]:
    """The settings under their flat keys: what config.yaml, the summary and the presets read and write."""
    return {name: getattr(train, field) if group is None else getattr(getattr(train, group), field)
            for name, (group, field) in FLAT_KEYS.items()}


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
    check_choice("optimizer", optim.optimizer, OPTIMIZERS)
    check_range("weight_decay", optim.weight_decay, 0, None)
    check_range("warmup_ratio", optim.warmup_ratio, 0, 1, high_open=True)
    check_choice("schedule", optim.schedule, SCHEDULES)
    check_range("max_grad_norm", optim.max_grad_norm, 0, None)
    check_range("adam_beta1", optim.adam_beta1, 0, 1, high_open=True)
    check_range("adam_beta2", optim.adam_beta2, 0, 1, high_open=True)
    check_range("adam_eps", optim.adam_eps, 0, None, low_open=True)


def check_records(records: RecordSettings) -> None:
    check_range("checkpoint_every", records.checkpoint_every, 0, None)
    check_range("keep_checkpoints", records.keep_checkpoints, 1, None)
    check_range("log_every", records.log_every, 1, None)
    check_choice("report_to", records.report_to, REPORT_TO)
    check_choice("on_nan", records.on_nan, ON_NAN)


def check_distillation(distillation: DistillationSettings, teacher: TeacherSettings) -> str | None:
    """The distillation and teacher settings; returns the first vector kind distill_kind weighs (or None), which
    Matryoshka and blends cannot be combined with."""
    check_range("distill", distillation.distill, 0, None, hint="0 = off")
    vector_kind = distillation.mix.vector_kind
    check_range("distill_temperature", distillation.distill_temperature, 0, None, low_open=True)
    check_range("teacher_weight", teacher.weight, 0, None, low_open=True)
    check_choice("teacher_check", teacher.check, ("on", "off"))
    check_blend(teacher.blend)
    if str(teacher.blend) not in ("1", "1.0") and vector_kind is not None:
        raise ConfigError(f"teacher_blend: blends the teacher's and the base's similarities, which distill_kind "
                          f"{vector_kind} does not compare; use distill_kind=kl or sim-mse, or drop "
                          "teacher_blend")
    check_choice("distill_batches", distillation.distill_batches, ("random", "neighbours"))
    check_range("distill_neighbours", distillation.distill_neighbours, 1, None)
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
    dev: str | None = setting(None, "stsb | sickr | a task FILE (scored or 0/1-labelled pairs, reranking .jsonl) | a "
                              "BEIR retrieval DIR | none. Default: STS-B dev when STS data is available.")
    dev_metric: str | None = setting(None, "Dev metric that selects checkpoints (e.g. f1, mrr@10). Default: the "
                                     "task's main metric (spearman, ap, map, ndcg@10).")
    data_dir: str | None = setting(None, "Folder of STS JSON Lines files (for --dev stsb|sickr).")
    text_column: str | None = setting(None, "Column of .jsonl .csv .tsv .parquet corpora.")
    encoding_errors: str = setting(DEFAULT_ENCODING_ERRORS, "Invalid UTF-8 in the corpus: strict (stop, name the "
                                   "line) | replace | skip.")
    streaming: bool = setting(False, "Stream a Hub dataset corpus (no full download).")
    num_proc: int | None = setting(None, "Processes tokenizing the corpus (default: cores).")
    # {name, reason, values}: the defaults the run started from (presets.py)
    preset: dict[str, Any] | None = field(default=None, metadata=RECORDED)
    decision: str = setting(DEFAULT_DECISION, "The use/keep rule: risk (use the adapted model when the risk that it "
                            "is no better than the base, the choice of checkpoint paid for, is at most --risk) | "
                            "strict (the dev Δ's paired 95 % CI excludes 0) | positive (any dev Δ > 0).")
    risk: float = setting(DEFAULT_RISK, "The risk rule's limit: the largest accepted chance, over every look of the "
                          "label-more loop, that the adapted model is no better than the base (a look with fewer "
                          f"than {LABEL_CAP} labels is held to a share of it).")
    teacher: str | None = setting(None, "A stronger model (folder or Hub id, any width) whose in-batch similarities "
                                  "the student learns (kl, weight --set teacher_weight=W, default 1); it encodes the "
                                  "corpus once before training (cached) and replaces the base as distill's target. "
                                  "Or a file of vectors you already have: .jsonl/.json ({text, embedding} objects, "
                                  "also .gz), .parquet, or .npy with a .txt of its sentences.")
    # resolved into a name before the run is saved (sentadapt/model/prompts.py)
    prompt: str | None = setting(None, "The base's prompt (e.g. query) prepended to every training sentence, or "
                                 "none. Default: the base's default_prompt_name, else none. Dev scores use the "
                                 "prompts eval uses.")
    # each corpus file's sha256 when the run started (None: a Hub dataset): a resumed run refuses a changed corpus
    corpus_sha256: list[str | None] | None = field(default=None, metadata=RECORDED)
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe_args: Any = None  # the recipe's own Config dataclass
    # which layer set each value ("train.lr" → "preset tuned-base", "dev" → "flag"; config/merging.py,
    # run/plan.py): what `adapt --dry-run` shows. Not saved: a resumed run's values all come from its
    # config.yaml
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False,
                                    metadata={"saved": False, **RECORDED})

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("saved", True)}
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
