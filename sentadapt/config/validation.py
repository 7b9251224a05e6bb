"""The checks every configured value passes before any weights load: ranges, choices, the distillation mix and the
Matryoshka sizes, each failing with one line that names the setting and what is valid."""

from __future__ import annotations

import itertools
import math

from sentadapt.errors import ConfigError
from sentadapt.registry import one_line

MIXED_PRECISION = ("no", "fp16", "bf16", "auto")  # auto: train/precision.py
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

