"""Read and write the sentence-transformers folder layout without importing sentence_transformers.

The layout is plain JSON plus safetensors (see docs/internals.md). Writing it here keeps
`sentadapt adapt` free of the optional sentence-transformers dependency; tests load every folder we
write with `SentenceTransformer(path)` and compare embeddings. Only built-in module types are used
(Transformer, WeightedLayerPooling, Pooling, Dense, Normalize), so loading never needs
`trust_remote_code`. The layout's own types live here too (`DenseLayer`, sentence-transformers' Dense
module; `FolderLayout`, what a folder says), so `encoder.py` imports this module and never the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from sentadapt.errors import ModelError
from sentadapt.model.pooling import Pooling
from sentadapt.model.st_modules import POOLING_FLAGS, UNSUPPORTED_POOLING_FLAGS, read_modules, transformer_config
from sentadapt.model.st_modules import module_kind as _module_kind
from sentadapt.model.st_modules import read_json as _read_json
from sentadapt.model.st_modules import read_pooling_mode as _read_pooling

# Dense activations we instantiate from a modules.json; anything else is refused rather than imported.
SAFE_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "torch.nn.modules.activation.Tanh": nn.Tanh,
    "torch.nn.modules.activation.ReLU": nn.ReLU,
    "torch.nn.modules.activation.GELU": nn.GELU,
    "torch.nn.modules.activation.Sigmoid": nn.Sigmoid,
    "torch.nn.modules.linear.Identity": nn.Identity,
}

ST_TYPES = {
    "Transformer": "sentence_transformers.models.Transformer",
    "Pooling": "sentence_transformers.models.Pooling",
    "WeightedLayerPooling": "sentence_transformers.models.WeightedLayerPooling",
    "Dense": "sentence_transformers.models.Dense",
    "Normalize": "sentence_transformers.models.Normalize",
}


class DenseLayer(nn.Module):
    """A sentence-transformers `Dense` module: activation(linear(x)), saved as `linear.*` weights."""

    def __init__(self, in_features: int, out_features: int, activation: str = "torch.nn.modules.linear.Identity",
                 bias: bool = True) -> None:
        super().__init__()
        if activation not in SAFE_ACTIVATIONS:
            raise ModelError(
                f"Dense activation '{activation}' is not supported; use one of {', '.join(SAFE_ACTIVATIONS)}"
            )
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.activation_name = activation
        self.activation = SAFE_ACTIVATIONS[activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))

    def st_config(self) -> dict[str, Any]:
        return {
            "in_features": self.linear.in_features,
            "out_features": self.linear.out_features,
            "bias": self.linear.bias is not None,
            "activation_function": self.activation_name,
        }


@dataclass
class FolderLayout:
    """What a model folder's sentence-transformers files say (all empty for a plain HF folder)."""

    transformer_path: str = ""
    pooling: Pooling | None = None
    head: tuple[DenseLayer, ...] = ()
    normalize: bool = False
    max_length: int | None = None


class SentenceModel(Protocol):
    """What the writer reads from a model (sentadapt's Encoder has all of it)."""

    backbone: Any
    tokenizer: Any
    pooling: Pooling
    head: Any  # an nn.ModuleList of DenseLayer
    normalize: bool
    max_length: int
    prompts: Any  # a sentadapt.model.prompts.Prompts: texts, default_name, include_prompt

    @property
    def num_layers(self) -> int: ...

    @property
    def hidden_size(self) -> int: ...


def layout_width(folder: Path) -> int | None:
    """The width of a local model folder's sentence vectors, read from its files without loading the backbone: its
    last Dense layer's output, else the transformer's hidden size (config.json); None when the files do not say.
    A layout sentadapt cannot load is its one-line error here, as it would be when loading."""
    layout = read_layout(folder)
    if layout.head:
        return int(layout.head[-1].linear.out_features)
    config = transformer_config(folder)
    try:
        record = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    width = record.get("hidden_size") if isinstance(record, dict) else None
    return width if isinstance(width, int) else None


def read_layout(folder: Path) -> FolderLayout:
    """The layout of a local model folder (all defaults for a plain Hugging Face folder)."""
    layout = FolderLayout()
    layout.max_length = _read_max_length(folder)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return layout
    modules = read_modules(modules_file)
    token_mode: str | None = None
    layer_mix: tuple[tuple[int, ...], tuple[float, ...]] = ((), ())
    head: list[DenseLayer] = []
    for module in modules:
        kind = _module_kind(module.get("type", ""))
        path = folder / module.get("path", "")
        if kind == "Transformer":
            layout.transformer_path = module.get("path", "")
            layout.max_length = _read_max_length(path) or layout.max_length
        elif kind == "Pooling":
            token_mode = _read_pooling(path / "config.json")
        elif kind == "WeightedLayerPooling":
            layer_mix = _read_weighted_layers(path)
        elif kind == "Dense":
            head.append(_read_dense(path))
        elif kind == "Normalize":
            layout.normalize = True
        elif kind == "Dropout":
            continue  # identity at inference
        else:
            raise ModelError(
                f"{modules_file}: module type '{module.get('type')}' is not supported by sentadapt "
                "(supported: Transformer, Pooling, WeightedLayerPooling, Dense, Normalize, Dropout)"
            )
    if token_mode is not None:
        layout.pooling = Pooling(token_mode, *layer_mix)
    layout.head = tuple(head)
    return layout


def _read_max_length(folder: Path) -> int | None:
    """max_seq_length from sentence_bert_config.json (ST < 6) or the tokenizer's model_max_length (ST 6)."""
    bert_config = folder / "sentence_bert_config.json"
    if bert_config.is_file() and _read_json(bert_config).get("max_seq_length"):
        return int(_read_json(bert_config)["max_seq_length"])
    tokenizer_config = folder / "tokenizer_config.json"
    if (folder / "modules.json").is_file() and tokenizer_config.is_file():
        limit = _read_json(tokenizer_config).get("model_max_length")
        if isinstance(limit, int) and limit < 100_000:  # transformers writes 1e30 for "no limit"
            return limit
    return None


def _read_weighted_layers(folder: Path) -> tuple[tuple[int, ...], tuple[float, ...]]:
    config = _read_json(folder / "config.json")
    start = int(config["layer_start"])
    num_layers = int(config["num_hidden_layers"])
    weights_file = folder / "model.safetensors"
    if weights_file.is_file():
        weights = load_file(str(weights_file))["layer_weights"].tolist()
    else:  # sentence-transformers' default when no weights were saved
        weights = [1.0] * (num_layers + 1 - start)
    layers = tuple(range(start, num_layers + 1))
    kept = [(layer, float(w)) for layer, w in zip(layers, weights) if w != 0]
    return tuple(layer for layer, _ in kept), tuple(w for _, w in kept)


def _read_dense(folder: Path) -> DenseLayer:
    config = _read_json(folder / "config.json")
    layer = DenseLayer(
        int(config["in_features"]),
        int(config["out_features"]),
        config.get("activation_function", "torch.nn.modules.activation.Tanh"),
        bool(config.get("bias", True)),
    )
    weights_file = folder / "model.safetensors"
    if not weights_file.is_file():
        raise ModelError(f"{folder}: Dense weights must be in model.safetensors (pickle files are not loaded)")
    state = load_file(str(weights_file))
    layer.load_state_dict({key: value for key, value in state.items() if key.startswith("linear.")})
    return layer


# ---------------------------------------------------------------------- writing


def write_sentence_transformers_folder(encoder: SentenceModel, folder: Path,
                                       backbone_state: dict[str, torch.Tensor] | None = None) -> None:
    """Write `encoder` as a sentence-transformers folder (caller handles atomic replacement). `backbone_state`
    replaces the backbone's own state dict (LoRA: the merged weights)."""
    from sentadapt import __version__

    folder.mkdir(parents=True, exist_ok=True)
    encoder.backbone.save_pretrained(folder, safe_serialization=True, state_dict=backbone_state)
    encoder.tokenizer.save_pretrained(folder)
    pooling = encoder.pooling
    bert_config: dict[str, Any] = {"max_seq_length": encoder.max_length, "do_lower_case": False}
    if pooling.needs_hidden_states:
        # WeightedLayerPooling reads every layer's output; sentence-transformers passes config_args to AutoConfig
        bert_config["config_args"] = {"output_hidden_states": True}
    _write_json(folder / "sentence_bert_config.json", bert_config)

    modules: list[dict[str, Any]] = [_module_entry(0, "", "Transformer")]
    if pooling.needs_hidden_states:
        path = _next_path(modules, "WeightedLayerPooling")
        _write_weighted_layers(folder / path, pooling, encoder.num_layers, encoder.hidden_size)
        modules.append(_module_entry(len(modules), path, "WeightedLayerPooling"))
    path = _next_path(modules, "Pooling")
    _write_json(folder / path / "config.json",
                _pooling_config(pooling.token, encoder.hidden_size, encoder.prompts.include_prompt))
    modules.append(_module_entry(len(modules), path, "Pooling"))
    for layer in encoder.head:
        path = _next_path(modules, "Dense")
        (folder / path).mkdir(parents=True, exist_ok=True)
        _write_json(folder / path / "config.json", layer.st_config())
        save_file({k: v.detach().cpu().contiguous() for k, v in layer.state_dict().items()
                   if k.startswith("linear.")}, str(folder / path / "model.safetensors"))
        modules.append(_module_entry(len(modules), path, "Dense"))
    if encoder.normalize:
        path = _next_path(modules, "Normalize")
        (folder / path).mkdir(parents=True, exist_ok=True)
        modules.append(_module_entry(len(modules), path, "Normalize"))
    _write_json(folder / "modules.json", modules)
    _write_json(folder / "config_sentence_transformers.json", {
        "model_type": "SentenceTransformer",
        "__version__": {
            "sentadapt": __version__,
            "transformers": _version_of("transformers"),
            "pytorch": torch.__version__,
        },
        **encoder.prompts.to_config(),  # what SentenceTransformer(folder).encode_query() applies
        "similarity_fn_name": "cosine",
    })


def _next_path(modules: list[dict[str, Any]], kind: str) -> str:
    return f"{len(modules)}_{kind}"


def _module_entry(idx: int, path: str, kind: str) -> dict[str, Any]:
    return {"idx": idx, "name": str(idx), "path": path, "type": ST_TYPES[kind]}


def _pooling_config(token_mode: str, dimension: int, include_prompt: bool = True) -> dict[str, Any]:
    config: dict[str, Any] = {"word_embedding_dimension": dimension}
    for flag, mode in POOLING_FLAGS.items():
        config[flag] = mode == token_mode
    config.update({flag: False for flag in UNSUPPORTED_POOLING_FLAGS})
    config["include_prompt"] = include_prompt
    return config


def _write_weighted_layers(folder: Path, pooling: Pooling, num_layers: int, dimension: int) -> None:
    """WeightedLayerPooling covers hidden states layer_start..L; unlisted layers get weight 0."""
    start = min(pooling.layers)
    weights = dict(zip(pooling.layers, pooling.weights or (1.0,) * len(pooling.layers)))
    vector = torch.tensor([weights.get(layer, 0.0) for layer in range(start, num_layers + 1)], dtype=torch.float32)
    folder.mkdir(parents=True, exist_ok=True)
    _write_json(folder / "config.json", {
        "word_embedding_dimension": dimension, "layer_start": start, "num_hidden_layers": num_layers,
    })
    # saved as a parameter tensor so loaders get the real weights, not the all-ones default
    save_file({"layer_weights": vector}, str(folder / "model.safetensors"))


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _version_of(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"
