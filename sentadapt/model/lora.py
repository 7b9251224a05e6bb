"""LoRA: train low-rank adapters on the encoder's linear layers instead of every weight (`adapt --lora`).

The adapters are peft's LoRA layers, injected into the backbone in place (`peft.inject_adapter_in_model`), so the
backbone keeps its own class and everything the encoder does to it (position ids for ConSERT's shuffle, the
embedding hook of its cutoff views, gradient checkpointing) works unchanged. The base weights are frozen; only
the adapters (and a recipe's own heads) are trained. A weight W of a targeted layer then computes
(W + (alpha / r) · B·A) x, with B (out × r) starting at zero, so step 0 is the base exactly.

What is saved: a model folder holds the merged weights (W + (alpha / r)·B·A, a plain model that any loader reads
without peft) and, beside them, the adapters alone in peft's format (`ADAPTER_FOLDER`: adapter_config.json and
adapter_model.safetensors, a few MB) for users who keep one base and several adapters. Training checkpoints hold
the whole training module (adapters, frozen weights, heads) and the adapters' optimizer state.

peft is optional (`pip install sentadapt[lora]`); it is imported only when LoRA is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.config.schema import LoraSettings  # one class for the settings and the adapters built from them
from sentadapt.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from sentadapt.config.schema import TrainConfig

ADAPTER_FOLDER = "lora-adapter"  # inside a saved model folder: the adapters alone, in peft's format
ADAPTER_NAME = "default"  # peft's name of the one adapter
DEFAULT_RANK = 16
TARGET_SETS = ("attention", "all-linear")  # or module names joined by '+', e.g. query+value
# a Linear whose qualified name has one of these parts is an attention projection (BERT, RoBERTa, XLM-R:
# attention.self.query / attention.output.dense; MPNet: attention.attn.q; ModernBERT: attn.Wqkv / attn.Wo;
# T5: layer.0.SelfAttention.q)
ATTENTION_PARTS = {"attention", "attn", "self_attn", "self_attention", "SelfAttention"}
MISSING_PEFT = "--lora: needs peft, which is not installed; pip install 'sentadapt[lora]' (or pip install peft)"
FROZEN_ENCODER = ("--lora: {recipe} keeps the encoder frozen (it trains a head on fixed embeddings), so there is "
                  "nothing for adapters to adapt; drop --lora")
SPEC_KEYS = {"r": "lora_r", "alpha": "lora_alpha", "dropout": "lora_dropout", "targets": "lora_targets"}


def lora_flags(spec: str | None) -> dict[str, Any]:
    """`--lora r=16,alpha=32,dropout=0.05,targets=attention` as TrainConfig fields (`{}` when not given).
    Every key is optional (`--lora r=8`); a bare `--lora on` takes the defaults (r 16, alpha 2·r, attention)."""
    if spec is None:
        return {}
    flags: dict[str, Any] = {"lora_r": DEFAULT_RANK}
    if spec.strip() == "on":
        return flags
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in SPEC_KEYS or not value:
            raise ConfigError(f"--lora: '{item}' is not KEY=VALUE with KEY one of {', '.join(SPEC_KEYS)} "
                              "(e.g. --lora r=16,alpha=32,targets=attention, or --lora on)")
        flags[SPEC_KEYS[key]] = value if key == "targets" else _number(key, value)
    if flags["lora_r"] < 1:
        raise ConfigError(f"--lora: r={flags['lora_r']}: the rank must be at least 1 (leave --lora out to train "
                          "every weight)")
    return flags


def _number(key: str, value: str) -> int | float:
    try:
        return int(value) if key == "r" else float(value)
    except ValueError:
        kind = "an integer" if key == "r" else "a number"
        raise ConfigError(f"--lora: {key}={value} is not {kind}") from None


def settings_of(train: TrainConfig) -> LoraSettings | None:
    """The run's LoRA settings from its TrainConfig; None when it trains every weight (lora_r 0)."""
    return train.lora.resolved() if train.lora.r else None


def check_lora_request(train: TrainConfig, recipe: Any) -> None:
    """Before anything loads (no import of peft or torch): peft is installed and the recipe trains the encoder."""
    import importlib.util

    if not train.lora.r:
        return
    if importlib.util.find_spec("peft") is None:
        raise ConfigError(MISSING_PEFT)
    if not recipe.spec.trains_encoder:
        raise ConfigError(FROZEN_ENCODER.format(recipe=recipe.spec.name))


def require_peft() -> Any:
    try:
        import peft
    except ImportError:
        raise ConfigError(MISSING_PEFT) from None
    return peft


def target_modules(backbone: nn.Module, targets: str) -> list[str]:
    """The qualified names of the backbone's Linear layers that get adapters."""
    from torch import nn

    linears = [name for name, module in backbone.named_modules() if isinstance(module, nn.Linear)]
    if targets == "all-linear":
        chosen = linears
    elif targets == "attention":
        chosen = [name for name in linears if ATTENTION_PARTS & set(name.split("."))]
    else:
        wanted = [part for part in targets.split("+") if part]
        chosen = [name for name in linears if any(name == w or name.endswith("." + w) for w in wanted)]
    if not chosen:
        model_type = getattr(getattr(backbone, "config", None), "model_type", "?")
        leaves = sorted({name.rsplit(".", 1)[-1] for name in linears})
        others = [name for name in TARGET_SETS if name != targets]  # not the set that just matched nothing
        raise ConfigError(f"lora_targets: '{targets}' matches no linear layer of this {model_type} model; use "
                          f"{', '.join(others)} or names joined by '+' from: {', '.join(leaves)}")
    return chosen


def check_attachable(encoder: Any) -> Any:
    """peft is installed (returned) and the recipe trains the backbone (CLSR freezes it)."""
    peft = require_peft()
    if not any(parameter.requires_grad for parameter in encoder.backbone.parameters()):
        raise ConfigError(FROZEN_ENCODER.format(recipe="this recipe"))
    return peft


def attach(encoder: Any, settings: LoraSettings) -> None:
    """Inject the adapters into `encoder.backbone` and freeze everything of the encoder but them."""
    peft = check_attachable(encoder)
    backbone = encoder.backbone
    config = peft.LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                             target_modules=target_modules(backbone, settings.targets), bias="none")
    peft.inject_adapter_in_model(config, backbone, adapter_name=ADAPTER_NAME)
    for name, parameter in encoder.named_parameters():
        parameter.requires_grad_(".lora_" in name)
    encoder.use_lora(settings)


def lora_layers(backbone: nn.Module) -> list[tuple[str, Any]]:
    from peft.tuners.lora import LoraLayer

    return [(name, module) for name, module in backbone.named_modules() if isinstance(module, LoraLayer)]


def weight_deltas(backbone: nn.Module) -> list[torch.Tensor]:
    """(alpha / r)·B·A of every adapted layer: how far the adapted weights are from the base (differentiable)."""
    return [module.get_delta_weight(ADAPTER_NAME) for _, module in lora_layers(backbone)]


def merged_state_dict(backbone: nn.Module) -> dict[str, torch.Tensor]:
    """The backbone's state dict as a plain model's: each adapted weight is W + (alpha / r)·B·A under its own
    name, the adapters left out. The backbone itself is not changed (training goes on after a save)."""
    import torch

    merged: dict[str, torch.Tensor] = {}
    for key, value in backbone.state_dict().items():
        if ".lora_" not in key:
            merged[key.replace(".base_layer.", ".")] = value
    with torch.no_grad():
        for name, module in lora_layers(backbone):
            merged[f"{name}.weight"] = module.base_layer.weight + module.get_delta_weight(ADAPTER_NAME)
    return merged


def merge(encoder: Any) -> None:
    """Fold the adapters into the base weights for good: the backbone becomes a plain model again."""
    import torch

    backbone = encoder.backbone
    with torch.no_grad():
        for name, module in lora_layers(backbone):
            plain = module.base_layer
            plain.weight += module.get_delta_weight(ADAPTER_NAME)
            parent_name, _, child = name.rpartition(".")
            setattr(backbone.get_submodule(parent_name) if parent_name else backbone, child, plain)
    encoder.use_lora(None)


def save_adapter(encoder: Any, folder: Path, base_model: str) -> None:
    """The adapters alone in peft's layout (what `PeftModel.from_pretrained(AutoModel(base), folder)` and
    sentence-transformers' `model.load_adapter(folder)` read); `base_model` is recorded as peft records it."""
    from safetensors.torch import save_file

    peft = require_peft()
    settings: LoraSettings = encoder.lora
    backbone = encoder.backbone
    folder.mkdir(parents=True, exist_ok=True)
    state = peft.get_peft_model_state_dict(backbone, adapter_name=ADAPTER_NAME)
    # PeftModel's keys start with its wrappers' prefix; transformers and peft both strip it when loading
    save_file({f"base_model.model.{key}": value.detach().cpu().contiguous() for key, value in state.items()},
              str(folder / "adapter_model.safetensors"))
    config = peft.LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                             target_modules=sorted({name for name, _ in lora_layers(backbone)}), bias="none",
                             base_model_name_or_path=base_model, task_type="FEATURE_EXTRACTION")
    config.save_pretrained(str(folder))


def trainable_parameters(module: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    total = sum(parameter.numel() for parameter in module.parameters())
    return sum(parameter.numel() for parameter in module.parameters() if parameter.requires_grad), total
