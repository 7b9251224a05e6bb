"""Which defaults a run starts from: the papers' (plain MLM bases) or the recipe's tuned-base ones.

The recipes' papers tuned their settings on raw MLM BERT. Most users start from a model that is already
sentence-tuned (all-MiniLM, bge, e5, ...), where those settings can undo what the base learned; each recipe
therefore declares `tuned_base_defaults` beside its `train_defaults`. A base is sentence-tuned when it is a
sentence-transformers model: its `modules.json` lists a Pooling module.

Precedence (later wins): TrainConfig defaults < recipe train_defaults < the tuned-base preset (when it
applies) < YAML < flags < --set. The chosen preset is saved in config.yaml, so `--resume` never detects again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.config.merging import with_overrides
from sentadapt.config.schema import TrainConfig, check_choice, flat_values
from sentadapt.errors import ModelError
from sentadapt.model.resolve import ResolvedModel
from sentadapt.model.st_modules import module_kind, read_modules, read_pooling_mode
from sentadapt.storage.hub import hub_file

PAPER = "paper"
TUNED_BASE = "tuned-base"
PRESET_CHOICES = ("auto", PAPER, TUNED_BASE)  # --preset

# `--teacher` with a recipe that trains the encoder: the distillation defaults, chosen on the domain suite's dev
# sets alone (why and by how much: research/findings.md, "Distillation defaults"). They sit above the recipe's and the
# preset's values and below the YAML, the flags and --set. The objective stays the mechanism's own; the teacher
# changes the length, which follows the corpus (few dev evaluations: each costs the decision some power), and the
# batches, composed from the teacher's neighbourhoods so the in-batch KL sees pairs the teacher ranks close.
TEACHER_DEFAULTS: dict[str, Any] = {
    "min_examples": 20_000, "max_epochs": 4.0, "evals_per_pass": 1.0, "patience": 2, "batch_size": 64,
    "distill": 0.0,  # the teacher replaces the frozen base as the target
    "distill_batches": "neighbours",
}


@dataclass(frozen=True)
class Preset:
    name: str  # paper | tuned-base
    reason: str  # why, in one line
    values: dict[str, Any] = field(default_factory=dict)  # what it sets above the recipe's paper defaults

    def to_dict(self) -> dict[str, Any]:
        """config.yaml's `preset` and metrics.json's."""
        return {"name": self.name, "reason": self.reason, "values": dict(self.values)}


def detect_preset(resolved: ResolvedModel) -> tuple[str, str]:
    """(preset name, reason): tuned-base when the base's modules.json lists a Pooling module, else paper.

    A Hub model is judged by its modules.json, from the local Hugging Face cache or fetched (a few hundred
    bytes) when the Hub answers, so a first run and a later one pick the same preset."""
    if resolved.is_local:
        folder = Path(resolved.location)
        shown = Path(resolved.name) / "modules.json"  # as the user gave it, not the offline copy's site-packages
        modules_file = folder / "modules.json"
        if not modules_file.is_file():
            return PAPER, f"{shown.parent}: no modules.json: a plain transformers model"

        def pooling_config(path: str) -> Path | None:
            return folder / path / "config.json"
    else:
        model_id = resolved.location
        shown = Path(f"{model_id}/modules.json")
        fetched = hub_file(model_id, "modules.json")
        if fetched is None:
            return PAPER, (f"{model_id}: no modules.json in the local Hugging Face cache or on the Hub (read as a "
                           "plain transformers model); pass --preset tuned-base if it is a sentence-transformers "
                           "model")
        modules_file = fetched

        def pooling_config(path: str) -> Path | None:
            return hub_file(model_id, f"{path}/config.json" if path else "config.json")

    pooling = next((m for m in read_modules(modules_file) if module_kind(str(m.get("type", ""))) == "Pooling"), None)
    if pooling is None:
        return PAPER, f"{shown} lists no Pooling module: not a sentence-transformers embedding model"
    return TUNED_BASE, f"{shown} declares a Pooling module{_mode(pooling_config(str(pooling.get('path', ''))))}: " \
                       "a sentence-tuned model"


def _mode(config_path: Path | None) -> str:
    """' (mean)' for the reason text; the encoder reports an unreadable pooling config itself, when it loads."""
    if config_path is None or not config_path.is_file():
        return ""
    try:
        return f" ({read_pooling_mode(config_path)})"
    except ModelError:
        return ""


def choose_preset(option: str | None, resolve: Callable[[], ResolvedModel], recipe_class: Any,
                  teacher: bool = False) -> Preset:
    """`--preset auto|paper|tuned-base` (None: auto) → the Preset, with the recipe's tuned-base values and, for a run
    with a teacher, TEACHER_DEFAULTS on top. The one place a run's preset is made: a single run and every
    `--recipe auto` candidate get the same. `resolve` gives the base model; it is called only when the preset is
    detected."""
    option = option or "auto"
    check_choice("--preset", option, PRESET_CHOICES)
    if option == "auto":
        name, reason = detect_preset(resolve())
    else:
        name, reason = option, f"chosen with --preset {option}"
    values = dict(recipe_class.spec.tuned_base_defaults) if name == TUNED_BASE else {}
    preset = Preset(name, reason, values)
    return with_teacher(preset, recipe_class) if teacher else preset


def with_teacher(preset: Preset, recipe_class: Any) -> Preset:
    """The preset with TEACHER_DEFAULTS and the recipe's own teacher_defaults on top, for a recipe that trains the
    encoder (CLSR keeps its own)."""
    if not recipe_class.spec.trains_encoder:
        return preset
    return Preset(preset.name, f"{preset.reason}; --teacher: the distillation defaults",
                  {**preset.values, **TEACHER_DEFAULTS, **recipe_class.spec.teacher_defaults})


def paper_values(recipe_class: Any) -> dict[str, Any]:
    """Every training and recipe field as it is before a preset applies (TrainConfig < the recipe's defaults)."""
    train = with_overrides(TrainConfig(), recipe_class.spec.train_defaults, f"recipe {recipe_class.spec.name} defaults")
    values = flat_values(train)
    values.update(dataclasses.asdict(recipe_class.spec.settings()))  # recipe fields win, as `--set` routes them
    return values


def preset_changes(preset: dict[str, Any], recipe_class: Any) -> list[tuple[str, Any, Any]]:
    """(key, paper value, preset value) for each value the preset changes."""
    before = paper_values(recipe_class)
    return [(key, before.get(key), value) for key, value in (preset.get("values") or {}).items()
            if before.get(key) != value]

