"""A transformers backbone and its tokenizer, loaded as the Encoder uses them: safetensors unless pickle is allowed,
no remote code unless trusted, float32 weights, an encoder-decoder family's encoder alone, a padding token, no pooler;
and the positions its table can take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from sentadapt.errors import ModelError
from sentadapt.model.resolve import ResolvedModel
from sentadapt.options import ALLOW_PICKLE, TRUST_REMOTE_CODE


def usable_positions(backbone: nn.Module) -> int | None:
    """How many tokens the backbone's absolute position table can take; None when it has none.

    RoBERTa-style tables number positions from padding_idx + 1 (514 rows → 512 tokens); BERT's from 0.
    """
    limit = getattr(backbone.config, "max_position_embeddings", None)
    if limit is None:
        return None
    table = getattr(getattr(backbone, "embeddings", None), "position_embeddings", None)
    padding_idx = getattr(table, "padding_idx", None)
    return int(limit) - (padding_idx + 1 if padding_idx is not None else 0)


# Ordinary words every vocabulary holds: a tokenizer that maps all of them to its unknown token has no vocabulary (a
# model folder copied without its tokenizer files), and would score every sentence as a row of [UNK]
_PROBE_TEXT = "the quick brown fox jumps over the lazy dog"


def check_tokenizer(name: str, tokenizer: Any) -> None:
    """Refuse a tokenizer that knows no words (every probe word its unknown token)."""
    unknown = getattr(tokenizer, "unk_token_id", None)
    if unknown is None:
        return
    ids = tokenizer(_PROBE_TEXT, add_special_tokens=False)["input_ids"]
    if ids and all(token == unknown for token in ids):
        raise ModelError(f"{name}: its tokenizer knows no words (every one becomes {tokenizer.unk_token}): the "
                         "folder lacks its tokenizer files (tokenizer.json, vocab.txt, …); copy them from the model "
                         "it was trained from")


def load_backbone(
    resolved: ResolvedModel, subfolder: str, trust_remote_code: bool, allow_pickle: bool
) -> tuple[nn.Module, Any]:
    """The backbone (float32, no pooler) and its tokenizer (with a padding token) from `resolved`'s `subfolder`;
    every failure a one-line ModelError that says what to do."""
    from transformers import AutoConfig, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-tensor "Loading weights" bars are noise next to our own progress

    location = str(Path(resolved.location) / subfolder) if resolved.is_local and subfolder else resolved.location
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if resolved.is_local:
        kwargs["local_files_only"] = True
    try:
        config = AutoConfig.from_pretrained(location, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
        model_kwargs = dict(kwargs)
        if not allow_pickle:
            model_kwargs["use_safetensors"] = True
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # "weights not used" notices about the pooler are noise here
        try:
            backbone = model_class(resolved.name, config).from_pretrained(location, config=config, **model_kwargs)
        finally:
            hf_logging.set_verbosity(verbosity)
        # transformers 5 loads weights in the dtype they were stored in: a folder exported with --dtype fp16
        # would train with fp16 master weights and `eval --dtype fp32` would run in fp16. The encoder's weights
        # are float32; half precision is a decision of training (autocast) or eval (--dtype), not of the file.
        if any(parameter.is_floating_point() and parameter.dtype != torch.float32
               for parameter in backbone.parameters()):
            backbone = backbone.float()
    except (OSError, ValueError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if not trust_remote_code and "contains custom code" in message:
            raise ModelError(
                f"{resolved.name}: the model ships its own Python code (auto_map in config.json), which would run "
                f"when loaded; read it, then pass {TRUST_REMOTE_CODE} if you trust it"
            ) from None
        if not allow_pickle and ("safetensors" in message.lower() or "model.safetensors" in message):
            raise ModelError(
                f"{resolved.name}: no safetensors weights; pickle checkpoints (.bin) can run code when "
                f"loaded — convert the model to safetensors, or pass {ALLOW_PICKLE} if you trust it"
            ) from None
        raise ModelError(f"{resolved.name}: cannot load model: {message}") from None
    except Exception as error:
        if type(error).__name__ != "SafetensorError":  # safetensors' own error: a truncated or corrupted file
            raise
        raise ModelError(f"{resolved.name}: its weights are not a complete safetensors file ({error}); copy or "
                         "export the model again") from None
    check_tokenizer(resolved.name, tokenizer)
    if tokenizer.pad_token_id is None:
        # decoder models often ship without one (GPT-2, Llama); padding is masked out of attention and pooling, so
        # any id serves, and the end-of-sequence token is the convention (the saved tokenizer then pads with it)
        if tokenizer.eos_token is None:
            raise ModelError(f"{resolved.name}: tokenizer has neither a padding nor an end-of-sequence token; "
                             "sentadapt needs one to batch: set pad_token in its tokenizer_config.json")
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(backbone, "pooler", None) is not None:
        # The pooler MLP (BERT/RoBERTa/MPNet) never feeds sentence vectors; kept, it would be a parameter with
        # no gradient, which DDP rejects, and some sentence models ship without its weights anyway.
        backbone.pooler = None
    return backbone, tokenizer


# Encoder-decoder families whose encoder alone is a sentence encoder (sentence-T5, GTR): loaded as that encoder, as
# sentence-transformers does; AutoModel would build the decoder too, and its forward would need decoder inputs
ENCODER_OF = {"t5": "T5EncoderModel", "mt5": "MT5EncoderModel", "umt5": "UMT5EncoderModel"}


def loader_name(config: Any) -> str:
    """The name of the transformers class that loads a backbone of this config (what a model card tells users)."""
    return ENCODER_OF.get(getattr(config, "model_type", ""), "AutoModel")


def model_class(name: str, config: Any) -> Any:
    """The transformers class that loads the backbone: AutoModel, or an encoder-decoder family's encoder."""
    import transformers

    model_type = getattr(config, "model_type", "?")
    if model_type in ENCODER_OF:
        return getattr(transformers, loader_name(config))
    if getattr(config, "is_encoder_decoder", False):
        raise ModelError(f"{name}: a {model_type} encoder-decoder model; sentadapt encodes sentences with an "
                         f"encoder: pass an encoder model (BERT, RoBERTa, MPNet, ...) or a {'/'.join(ENCODER_OF)} one")
    return transformers.AutoModel
