"""The sentence-transformers format, built from sentence-transformers' own modules and saved by its `save()`.

Transformer → (WeightedLayerPooling for layer mixes, its weights an `nn.Parameter` so they are saved)
→ Pooling → Dense per head layer (CLSR's MLP) → (Normalize). Only built-in module types, so loading
never needs `trust_remote_code`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.exporting.verify import COSINE_LIMIT, FP16_COSINE_LIMIT, compare

if TYPE_CHECKING:
    import torch

    from sentadapt.events import Note
    from sentadapt.exporting.request import Check, ExportRequest
    from sentadapt.model.encoder import Encoder


def _modules() -> Any:
    try:  # sentence-transformers >= 6 moved the classes; the old path still works there but warns
        from sentence_transformers.sentence_transformer import modules
    except ImportError:
        from sentence_transformers import models as modules  # type: ignore[attr-defined, no-redef]
    return modules


def build_sentence_transformer(encoder: Encoder, stage: Path) -> Any:
    """A SentenceTransformer equal to `encoder`; `stage` is a scratch folder for the backbone files."""
    from sentence_transformers import SentenceTransformer

    modules = _modules()
    encoder.backbone.save_pretrained(stage, safe_serialization=True)
    encoder.tokenizer.save_pretrained(stage)
    pipeline = [_transformer(modules.Transformer, stage, encoder)]
    if encoder.pooling.needs_hidden_states:
        pipeline.append(_weighted_layers(modules.WeightedLayerPooling, encoder))
    pipeline.append(modules.Pooling(encoder.hidden_size, pooling_mode=encoder.pooling.token,
                                    include_prompt=encoder.prompts.include_prompt))
    pipeline += [_dense(modules.Dense, layer) for layer in encoder.head]
    if encoder.normalize:
        pipeline.append(modules.Normalize())
    prompts = encoder.prompts  # saved in config_sentence_transformers.json: encode_query() applies them
    return SentenceTransformer(modules=pipeline, device="cpu", similarity_fn_name="cosine",
                               prompts=dict(prompts.texts), default_prompt_name=prompts.default_name)


def _transformer(transformer_class: type, stage: Path, encoder: Encoder) -> Any:
    config_kwargs = {"output_hidden_states": True} if encoder.pooling.needs_hidden_states else {}
    # sentence-transformers renamed config_args to config_kwargs in v6
    keyword = "config_kwargs" if "config_kwargs" in inspect.signature(transformer_class).parameters else "config_args"
    with _quiet_loading():
        transformer = transformer_class(str(stage), max_seq_length=encoder.max_length, **{keyword: config_kwargs})
    if getattr(transformer.auto_model, "pooler", None) is not None:
        transformer.auto_model.pooler = None  # freshly initialised, never used for sentence vectors: not shipped
    return transformer


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """The backbone is saved without its unused pooler; transformers' "missing weights" report is noise here,
    and so is sentence-transformers' advice about fp16 speed on CPU (the card says it)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    st_logger = logging.getLogger("sentence_transformers")
    st_level = st_logger.level
    hf_logging.set_verbosity_error()
    st_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        st_logger.setLevel(st_level)


def _weighted_layers(layer_class: type, encoder: Encoder) -> Any:
    """WeightedLayerPooling covers hidden states layer_start..L; layers outside the mix get weight 0."""
    import torch

    pooling, num_layers = encoder.pooling, encoder.num_layers
    start = min(pooling.layers)
    weights = dict(zip(pooling.layers, pooling.weights or (1.0,) * len(pooling.layers)))
    vector = torch.tensor([weights.get(layer, 0.0) for layer in range(start, num_layers + 1)], dtype=torch.float32)
    # a Parameter, not a tensor: only registered parameters are saved, else loaders use all-ones weights
    return layer_class(encoder.hidden_size, num_layers, start, torch.nn.Parameter(vector))


def _dense(dense_class: type, layer: Any) -> Any:
    from sentadapt.model.st_format import SAFE_ACTIVATIONS

    linear = layer.linear
    return dense_class(
        linear.in_features, linear.out_features, bias=linear.bias is not None,
        activation_function=SAFE_ACTIVATIONS[layer.activation_name](),  # explicit: Dense defaults to Tanh
        init_weight=linear.weight.detach().clone(),
        init_bias=None if linear.bias is None else linear.bias.detach().clone(),
    )


def write_sentence_transformers(encoder: Encoder, folder: Path, request: ExportRequest, texts: list[str],
                                reference: torch.Tensor, note: Note) -> list[Check]:
    import torch
    from sentence_transformers import SentenceTransformer

    from sentadapt.model.encoder import Encoder

    with tempfile.TemporaryDirectory(prefix="sentadapt-export-") as stage:
        model = build_sentence_transformer(encoder, Path(stage))
        if request.dtype == "fp16":
            model = model.to(torch.float16)
        model.save(str(folder), safe_serialization=True, create_model_card=False)
    note(f"verifying on {len(texts)} sentences: SentenceTransformer(OUT) and sentadapt's reader against the source")
    limit = COSINE_LIMIT if request.dtype == "fp32" else FP16_COSINE_LIMIT
    with _quiet_loading():
        loaded = SentenceTransformer(str(folder), device="cpu")
    theirs = loaded.encode(texts, convert_to_tensor=True, prompt="")  # the reference has no prompt
    checks = [compare("SentenceTransformer(OUT)", reference, theirs, min_cosine=limit)]
    reread = Encoder.load(folder, device="cpu")  # what `sentadapt eval OUT` will use
    checks.append(compare("sentadapt Encoder.load(OUT)", reference, reread.encode(texts, prompt=""),
                          min_cosine=limit))
    _check_prompts(encoder, loaded)
    return checks


def _check_prompts(encoder: Encoder, loaded: Any) -> None:
    """SentenceTransformer(OUT) applies the encoder's prompts (it may add its own empty placeholders)."""
    from sentadapt.errors import ExportError

    prompts = encoder.prompts
    missing = sorted(name for name, text in prompts.texts.items() if loaded.prompts.get(name) != text)
    if missing or loaded.default_prompt_name != prompts.default_name:
        raise ExportError(f"verification failed: SentenceTransformer(OUT) does not have the model's prompts "
                          f"({', '.join(missing) or 'default_prompt_name'}); please report this")
