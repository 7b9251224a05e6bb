"""THE encoder: tokenizer + transformer + pooling + optional Dense head, used by every command.

Training, `eval`, `diagnose` and `export` all go through `Encoder`, so a model is always scored
with the pooling it was trained and saved with. It loads Hugging Face folders, sentence-transformers
folders (reading `modules.json`: Pooling, WeightedLayerPooling, Dense, Normalize) and Hub ids, and
saves the sentence-transformers layout that `SentenceTransformer(path)` loads without sentadapt.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sentadapt.errors import ModelError
from sentadapt.pooling import POOLING_NAMES, Pooling
from sentadapt.resolve import ResolvedModel, resolve_model
from sentadapt.st_format import DenseLayer, FolderLayout, read_layout, write_sentence_transformers_folder

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DEFAULT_MAX_LENGTH = 128

@dataclass
class TokenizedBatch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> TokenizedBatch:
        return TokenizedBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            None if self.token_type_ids is None else self.token_type_ids.to(device),
        )


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int) -> TokenizedBatch:
    """Right-pad token id lists to the longest in the batch (dynamic padding)."""
    longest = max(len(seq) for seq in sequences)
    input_ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, seq in enumerate(sequences):
        input_ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        attention_mask[row, : len(seq)] = 1
    return TokenizedBatch(input_ids, attention_mask)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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


class Encoder(nn.Module):
    """Transformer backbone + pooling + optional Dense head (+ optional L2 normalisation)."""

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        pooling: Pooling,
        head: Sequence[DenseLayer] = (),
        normalize: bool = False,
        max_length: int = DEFAULT_MAX_LENGTH,
        name: str = "",
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.head = nn.ModuleList(head)
        self.normalize = normalize
        self.position_limit = usable_positions(backbone)
        self.max_length = min(max_length, self.position_limit or max_length)
        self.name = name or getattr(backbone.config, "_name_or_path", "model")
        # Set by recipes that never train the backbone: text → output of the frozen part
        # (backbone, pooling, first `frozen_head_layers` head layers); see encode_frozen_part.
        self.frozen_memo: dict[str, torch.Tensor] | None = None
        self.frozen_head_layers = 0

    # ------------------------------------------------------------------ properties
    @property
    def num_layers(self) -> int:
        return int(self.backbone.config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.backbone.config.hidden_size)

    @property
    def embedding_dim(self) -> int:
        return self.head[-1].linear.out_features if len(self.head) else self.hidden_size

    @property
    def pooling_name(self) -> str:
        return self.pooling.name(self.num_layers)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        model: str | os.PathLike[str] | ResolvedModel,
        pooling: str | None = None,
        max_length: int | None = None,
        device: str | torch.device | None = None,
        trust_remote_code: bool = False,
        allow_pickle: bool = False,
    ) -> Encoder:
        """Load a local folder or Hub id. `pooling` overrides the folder's own pooling."""
        resolved = model if isinstance(model, ResolvedModel) else resolve_model(model)
        if pooling is not None and pooling not in POOLING_NAMES:
            from sentadapt.errors import ConfigError
            from sentadapt.registry import unknown_name_message

            raise ConfigError(unknown_name_message("pooling", pooling, list(POOLING_NAMES)))
        layout = read_layout(Path(resolved.location)) if resolved.is_local else FolderLayout()
        backbone, tokenizer = _load_backbone(resolved, layout.transformer_path, trust_remote_code, allow_pickle)
        num_layers = int(backbone.config.num_hidden_layers)
        folder_pooling = layout.pooling or Pooling("mean")
        encoder = cls(
            backbone,
            tokenizer,
            Pooling.from_name(pooling, num_layers) if pooling else folder_pooling,
            head=layout.head,
            normalize=layout.normalize,
            max_length=max_length or layout.max_length or DEFAULT_MAX_LENGTH,
            name=resolved.name,
        )
        encoder.pooling_source = "option" if pooling else ("modules.json" if layout.pooling else "default")
        target = torch.device(device) if device is not None else default_device()
        if target.type == "cuda" and not torch.cuda.is_available():
            raise ModelError(f"--device {device}: CUDA is not available on this machine; use --device cpu")
        encoder.to(target)
        encoder.eval()
        return encoder

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        embedding_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        pooling: Pooling | None = None,
        head_layers: int | None = None,
    ) -> torch.Tensor:
        """Sentence vectors for a tokenized batch; differentiable (the training path).

        `head_layers` stops after that many head layers, without normalisation (the frozen part).

        `embedding_transform` edits the embedding layer's output (after position embeddings,
        LayerNorm and dropout) for this forward only — how ConSERT's cutoff views are made,
        through a scoped forward hook rather than a patched model class.
        """
        pooling = pooling or self.pooling
        outputs = self.run_backbone(
            input_ids, attention_mask, token_type_ids, position_ids, embedding_transform,
            output_hidden_states=pooling.needs_hidden_states,
        )
        pooled = pooling(outputs.last_hidden_state, attention_mask, outputs.hidden_states)
        if head_layers is not None:
            return self.apply_head(pooled, stop=head_layers, normalize=False)
        return self.apply_head(pooled)

    def run_backbone(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        embedding_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        output_hidden_states: bool = False,
    ) -> Any:
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if output_hidden_states:
            kwargs["output_hidden_states"] = True
        with self._embedding_hook(embedding_transform):
            return self.backbone(**kwargs, return_dict=True)

    @contextmanager
    def _embedding_hook(self, transform: Callable[[torch.Tensor], torch.Tensor] | None) -> Iterator[None]:
        if transform is None:
            yield
            return
        embeddings = getattr(self.backbone, "embeddings", None)
        if embeddings is None:
            raise ModelError(f"{self.name}: has no `embeddings` module to augment; use a BERT-like encoder")
        handle = embeddings.register_forward_hook(lambda _module, _inputs, output: transform(output))
        try:
            yield
        finally:
            handle.remove()

    def apply_head(self, pooled: torch.Tensor, start: int = 0, stop: int | None = None,
                   normalize: bool = True) -> torch.Tensor:
        for layer in list(self.head)[start:stop]:
            pooled = layer(pooled)
        if normalize and self.normalize:
            pooled = nn.functional.normalize(pooled, dim=-1)
        return pooled

    # ------------------------------------------------------------------ tokenization
    def tokenize_ids(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """Token ids with special tokens, truncated to max_length, unpadded."""
        limit = max_length or self.max_length
        if self.position_limit is not None:
            limit = min(limit, self.position_limit)  # a longer sequence would index past the position table
        encoded = self.tokenizer(
            list(texts), truncation=True, max_length=limit,
            padding=False, return_attention_mask=False, return_token_type_ids=False,
        )
        return encoded["input_ids"]

    def collate(self, sequences: Sequence[Sequence[int]]) -> TokenizedBatch:
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return pad_batch(sequences, pad_id)

    # ------------------------------------------------------------------ inference
    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 128,
        max_length: int | None = None,
        dtype: str = "fp32",
        pooling: Pooling | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> torch.Tensor:
        """Embed texts → float32 CPU tensor (len(texts), dim), rows in input order.

        Each unique text is encoded once; batches are sorted by token length so padding is minimal.
        With `frozen_memo` set (a recipe that never trains the backbone, e.g. CLSR), the frozen part's
        output is remembered per text, so repeated dev evaluations only run the trainable head.
        """
        if dtype not in DTYPES:
            from sentadapt.errors import ConfigError

            raise ConfigError(f"--dtype: '{dtype}' is not one of {', '.join(DTYPES)}")
        unique_index: dict[str, int] = {}
        positions = [unique_index.setdefault(text, len(unique_index)) for text in texts]
        unique_texts = list(unique_index)
        if not unique_texts:
            return torch.empty((0, self.embedding_dim))
        if self.frozen_memo is None or pooling is not None:
            vectors = self._embed(unique_texts, batch_size, max_length, dtype, pooling, progress)
        else:
            prefix = self.encode_frozen_part(unique_texts, batch_size, max_length, dtype, progress)
            was_training = self.training
            self.eval()
            vectors = self.apply_head(prefix.to(self.device), start=self.frozen_head_layers).float().cpu()
            self.train(was_training)
        return vectors[torch.as_tensor(positions)]

    @torch.inference_mode()
    def encode_frozen_part(
        self,
        texts: Sequence[str],
        batch_size: int = 128,
        max_length: int | None = None,
        dtype: str = "fp32",
        progress: Callable[[int], None] | None = None,
    ) -> torch.Tensor:
        """Backbone + pooling + the first `frozen_head_layers` head layers, memoised per text (float32, CPU)."""
        memo = self.frozen_memo if self.frozen_memo is not None else {}
        unique = list(dict.fromkeys(texts))
        missing = [text for text in unique if text not in memo]
        if missing:
            computed = self._embed(missing, batch_size, max_length, dtype, None, progress,
                                   head_layers=self.frozen_head_layers)
            memo.update(zip(missing, computed))
        return torch.stack([memo[text] for text in texts]) if texts else torch.empty((0, self.embedding_dim))

    def _embed(
        self,
        unique_texts: list[str],
        batch_size: int,
        max_length: int | None,
        dtype: str,
        pooling: Pooling | None,
        progress: Callable[[int], None] | None,
        head_layers: int | None = None,
    ) -> torch.Tensor:
        ids = self.tokenize_ids(unique_texts, max_length)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        was_training = self.training
        self.eval()
        device = self.device
        autocast = (
            torch.autocast(device_type=device.type, dtype=DTYPES[dtype]) if dtype != "fp32" else nullcontext()
        )
        rows: list[torch.Tensor] = []
        with autocast:
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                batch = self.collate([ids[i] for i in chunk]).to(device)
                rows.append(self(batch.input_ids, batch.attention_mask, pooling=pooling,
                                 head_layers=head_layers).float().cpu())
                if progress is not None:
                    progress(len(chunk))
        self.train(was_training)
        vectors = torch.empty((len(unique_texts), rows[0].shape[-1]), dtype=torch.float32)
        vectors[torch.as_tensor(order)] = torch.cat(rows)
        return vectors

    # ------------------------------------------------------------------ saving
    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write the sentence-transformers layout (safetensors weights) into `folder`."""
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        write_sentence_transformers_folder(self, Path(folder))


def _load_backbone(
    resolved: ResolvedModel, subfolder: str, trust_remote_code: bool, allow_pickle: bool
) -> tuple[nn.Module, Any]:
    from transformers import AutoConfig, AutoModel, AutoTokenizer
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
            backbone = AutoModel.from_pretrained(location, config=config, **model_kwargs)
        finally:
            hf_logging.set_verbosity(verbosity)
    except (OSError, ValueError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if not trust_remote_code and "contains custom code" in message:
            raise ModelError(
                f"{resolved.name}: the model ships its own Python code (auto_map in config.json), which would run "
                "when loaded; read it, then pass --trust-remote-code if you trust it"
            ) from None
        if not allow_pickle and ("safetensors" in message.lower() or "model.safetensors" in message):
            raise ModelError(
                f"{resolved.name}: no safetensors weights; pickle checkpoints (.bin) can run code when "
                "loaded — convert the model to safetensors, or pass --allow-pickle if you trust it"
            ) from None
        raise ModelError(f"{resolved.name}: cannot load model: {message}") from None
    if tokenizer.pad_token_id is None:
        raise ModelError(f"{resolved.name}: tokenizer has no padding token; sentadapt needs one to batch")
    if getattr(backbone, "pooler", None) is not None:
        # The pooler MLP (BERT/RoBERTa/MPNet) never feeds sentence vectors; kept, it would be a parameter with
        # no gradient, which DDP rejects, and some sentence models ship without its weights anyway.
        backbone.pooler = None
    return backbone, tokenizer
