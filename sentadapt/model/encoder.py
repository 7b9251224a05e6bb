"""THE encoder: tokenizer + transformer + pooling + optional Dense head, used by every command.

Training, `eval`, `diagnose` and `export` all go through `Encoder`, so a model is always scored
with the pooling it was trained and saved with. It loads Hugging Face folders, sentence-transformers
folders (reading `modules.json`: Pooling, WeightedLayerPooling, Dense, Normalize) and Hub ids, and
saves the sentence-transformers layout that `SentenceTransformer(path)` loads without sentadapt.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from sentadapt.errors import ConfigError, ModelError
from sentadapt.model.backbone import load_backbone, usable_positions
from sentadapt.model.compiling import eager_only
from sentadapt.model.half_precision import DTYPES, CastCopy, cast_copy, check_dtype, weight_versions
from sentadapt.model.length_chunks import chunk_transform, plan_chunks, real_lengths
from sentadapt.model.packed_pass import PackedRows, can_pack, packed_attention_on, packed_transform
from sentadapt.model.pooling import POOLING_NAMES, Pooling
from sentadapt.model.prompts import Prompts, read_prompts
from sentadapt.model.resolve import ResolvedModel, check_has_weights, resolve_model
from sentadapt.model.st_format import DenseLayer, FolderLayout, read_layout, write_sentence_transformers_folder
from sentadapt.options import ENCODE_BATCH_SIZE, PASS_OVERHEAD_TOKENS, VECTOR_DTYPE

DEFAULT_MAX_LENGTH = 128


@dataclass(frozen=True)
class TokenizedBatch:
    """A tokenized batch as the backbone takes it; the optional ids go to the backbone only when given (DistilBERT's
    forward has neither keyword)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor | None = None
    position_ids: torch.Tensor | None = None

    def given(self) -> dict[str, torch.Tensor]:
        return {name: tensor for name, tensor in vars(self).items() if tensor is not None}

    def _mapped(self, change: Callable[[torch.Tensor], torch.Tensor]) -> TokenizedBatch:
        return TokenizedBatch(**{name: change(tensor) for name, tensor in self.given().items()})

    def to(self, device: torch.device | str, non_blocking: bool = False) -> TokenizedBatch:
        return self._mapped(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def on_device(self, device: torch.device) -> TokenizedBatch:
        """On `device`; to a GPU through pinned memory without waiting (a pageable copy would synchronise the
        host with the GPU once per batch)."""
        if device.type != "cuda":
            return self.to(device)
        return self._mapped(lambda tensor: tensor.pin_memory()).to(device, non_blocking=True)

    def trimmed(self, rows: torch.Tensor, width: int) -> TokenizedBatch:
        """The batch's `rows`, cut to their first `width` positions (a chunk of similar lengths)."""
        return self._mapped(lambda tensor: tensor[rows, :width])


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int) -> TokenizedBatch:
    """Right-pad token id lists to the longest in the batch (dynamic padding)."""
    longest = max(len(seq) for seq in sequences)
    input_ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, seq in enumerate(sequences):
        input_ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        attention_mask[row, : len(seq)] = 1
    return TokenizedBatch(input_ids, attention_mask)


class _Placed:
    """An encode's vectors, each batch's rows put in their places (the texts' order) in one float32 CPU matrix.

    On a GPU the batches' vectors wait on the device and go to the host FLUSH_ROWS at a time: one copy, and one
    wait for the GPU, per 16,384 rows (50 MB at 768 dims) instead of one per batch, which would leave the GPU idle
    while the host reads each batch back. On the CPU each batch is placed at once."""

    FLUSH_ROWS = 16_384

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.out: torch.Tensor | None = None
        self.pending: list[tuple[list[int], torch.Tensor]] = []
        self.pending_rows = 0

    def add(self, places: list[int], vectors: torch.Tensor) -> None:
        self.pending.append((places, vectors.detach()))
        self.pending_rows += len(places)
        if vectors.device.type == "cpu" or self.pending_rows >= self.FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        places = [place for chunk, _ in self.pending for place in chunk]
        vectors = torch.cat([block for _, block in self.pending]).float().cpu()
        if self.out is None:
            self.out = torch.empty((self.rows, vectors.shape[-1]), dtype=torch.float32)
        self.out[torch.as_tensor(places)] = vectors
        self.pending, self.pending_rows = [], 0

    def matrix(self) -> torch.Tensor:
        self._flush()
        assert self.out is not None  # at least one text (encode returns early without any)
        return self.out


def each_text_once(texts: Sequence[str], embed: Callable[[list[str]], torch.Tensor]) -> torch.Tensor:
    """`embed` of the distinct texts (in first-seen order), then a row per text of `texts`, in its order."""
    unique_index: dict[str, int] = {}
    positions = [unique_index.setdefault(text, len(unique_index)) for text in texts]
    vectors = embed(list(unique_index))
    if len(unique_index) == len(texts):  # no repeats: positions is 0..n-1, and a gather would copy the matrix
        return vectors
    return vectors[torch.as_tensor(positions)]


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass(frozen=True)
class EncoderSettings:
    """How the encoder reads a text into a vector, beside its weights: one value, changed whole by
    `Encoder.configure` (a recipe's export pooling, `export --pooling/--normalize`, CLSR's un-normalised MLP input)."""

    pooling: Pooling
    normalize: bool = False  # L2-normalise the output
    max_length: int = DEFAULT_MAX_LENGTH  # tokens a text is cut to (capped by the position table)
    # Tokens of the prompt every training sequence starts with (the corpus is tokenized with it): what forward()
    # leaves out of pooling when the model's Pooling says include_prompt: false (as sentence-transformers does)
    train_prompt_length: int = 0


class Encoder(nn.Module):
    """Transformer backbone + pooling + optional Dense head (+ optional L2 normalisation)."""

    backbone: Any  # a transformers PreTrainedModel: its config and methods are read by name
    head: nn.ModuleList  # of DenseLayer
    pooling_source: str  # where the pooling came from: "option" | "modules.json" | "default"

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        pooling: Pooling,
        head: Sequence[DenseLayer] = (),
        normalize: bool = False,
        max_length: int = DEFAULT_MAX_LENGTH,
        name: str = "",
        prompts: Prompts | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.head = nn.ModuleList(head)
        self.position_limit = usable_positions(backbone)
        self.settings = EncoderSettings(pooling, normalize, self.token_limit(max_length))
        self.name = name or getattr(backbone.config, "_name_or_path", "model")
        # The model's prompts (sentadapt/model/prompts.py): applied by encode(), saved back by save().
        self.prompts = prompts or Prompts()
        # Half-precision encoding (see _embed): the cast backbone kept by `keep_cast_copy`, outside the module
        # tree (a plain attribute, not a submodule: never in state_dict, parameters() or .to()).
        self._cast_copy: CastCopy | None = None
        self._keep_cast_copies = 0
        # adapt --lora: the adapters' settings once lora.attach injected them into the backbone (None: plain)
        self.lora: Any = None
        self.location = self.name  # Encoder.load sets the absolute folder (or the Hub id)
        self.pass_cost = PASS_OVERHEAD_TOKENS  # tokens one more CPU training pass costs (length_chunks.plan_chunks)

    # ------------------------------------------------------------------ properties
    @property
    def num_layers(self) -> int:
        return int(self.backbone.config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.backbone.config.hidden_size)

    @property
    def embedding_dim(self) -> int:
        return int(cast(DenseLayer, self.head[-1]).linear.out_features) if len(self.head) else self.hidden_size

    @property
    def pooling(self) -> Pooling:
        return self.settings.pooling

    @property
    def normalize(self) -> bool:
        return self.settings.normalize

    @property
    def max_length(self) -> int:
        return self.settings.max_length

    @property
    def train_prompt_length(self) -> int:
        return self.settings.train_prompt_length

    @property
    def pooling_name(self) -> str:
        return self.pooling.name(self.num_layers)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    @property
    def embedding_layer(self) -> nn.Module | None:
        """The module whose output is the embedding layer (what ConSERT's views edit, what SG-OPT freezes): the
        backbone's `embeddings` (tokens + positions + LayerNorm: BERT and its kin), else the token embeddings its
        encoder calls (T5, whose positions are a bias inside attention: its stack's `embed_tokens`, a module apart
        from the model's `shared` that holds the same weight); None when it has neither."""
        embeddings = getattr(self.backbone, "embeddings", None)
        if embeddings is not None:
            return cast(nn.Module, embeddings)
        try:
            stack = self.backbone.get_encoder() if hasattr(self.backbone, "get_encoder") else self.backbone
            return cast(nn.Module, stack.get_input_embeddings())
        except (AttributeError, NotImplementedError):
            return None

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
        check_has_weights(resolved)  # a folder of config.json alone: say so, not "allow pickle weights"
        layout = read_layout(Path(resolved.location)) if resolved.is_local else FolderLayout()
        backbone, tokenizer = load_backbone(resolved, layout.transformer_path, trust_remote_code, allow_pickle)
        num_layers = int(backbone.config.num_hidden_layers)  # type: ignore[union-attr, arg-type]
        folder_pooling = layout.pooling or Pooling("mean")
        encoder = cls(
            backbone,
            tokenizer,
            Pooling.from_name(pooling, num_layers) if pooling else folder_pooling,
            head=layout.head,
            normalize=layout.normalize,
            max_length=max_length or layout.max_length or DEFAULT_MAX_LENGTH,
            name=resolved.name,
            prompts=read_prompts(resolved),
        )
        encoder.pooling_source = "option" if pooling else ("modules.json" if layout.pooling else "default")
        # where it loads from again, whatever the working directory (a LoRA adapter records it as its base)
        encoder.location = str(Path(resolved.location).resolve()) if resolved.is_local else resolved.location
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
        prompt_length: int | None = None,
        whole_batch: bool = False,
    ) -> torch.Tensor:
        """Sentence vectors for a tokenized batch; differentiable (the training path).

        `head_layers` stops after that many head layers, without normalisation (the frozen part).
        `prompt_length`: tokens of the prompt the sequences start with (default: the training prompt's); they are
        left out of pooling only when the model's Pooling says include_prompt: false, as in sentence-transformers.

        `embedding_transform` edits the embedding layer's output (after position embeddings,
        LayerNorm and dropout) for this forward only — how ConSERT's cutoff views are made,
        through a scoped forward hook rather than a patched model class.

        On the CPU, a pass without the model's dropout runs packed (sentadapt/model/packed_pass.py: no padding but
        attention's, one backbone pass) where the backbone allows, else in chunks of similar length, each padded to its
        own longest row (sentadapt/model/length_chunks.py); `whole_batch` runs it as one padded pass (a transform that
        keeps what it is given, as ConSERT's adversarial view records the embeddings, needs the whole batch at once).
        """
        tokens = TokenizedBatch(input_ids, attention_mask, token_type_ids, position_ids)
        pooling = pooling or self.pooling
        chunks = None if whole_batch else self._length_chunks(attention_mask)
        if chunks is None:
            pooled = self._pooled(tokens, embedding_transform, pooling, prompt_length)
        elif self._packs(pooling):
            pooled = self._pooled_packed(chunks, tokens, embedding_transform, pooling, prompt_length)
        else:
            pooled = self._pooled_in_chunks(chunks, tokens, embedding_transform, pooling, prompt_length)
        if head_layers is not None:
            return self.apply_head(pooled, stop=head_layers, normalize=False)
        return self.apply_head(pooled)

    def _pooled(self, tokens: TokenizedBatch, embedding_transform: Callable[[torch.Tensor], torch.Tensor] | None,
                pooling: Pooling, prompt_length: int | None) -> torch.Tensor:
        """The backbone's pass and pooling of a batch, before the head."""
        outputs = self._backbone_pass(tokens, embedding_transform, pooling.needs_hidden_states)
        return pooling(outputs.last_hidden_state, tokens.attention_mask, outputs.hidden_states,
                       self._pooled_prompt(prompt_length))

    def _length_chunks(self, attention_mask: torch.Tensor) -> list[tuple[torch.Tensor, int]] | None:
        """(rows, longest length) of each chunk of a CPU training pass without dropout, or None to run the batch as
        one pass: on a GPU, with the model's dropout on, without gradient (encode sorts its batches by length
        already), while torch.export or torch.compile traces the model (the plan reads the lengths on the host), or
        where one chunk is best."""
        if (attention_mask.device.type != "cpu" or self.backbone.training or not torch.is_grad_enabled()
                or torch.compiler.is_compiling() or torch.compiler.is_exporting()):
            return None
        lengths = real_lengths(attention_mask)
        chunks = plan_chunks(lengths, self.pass_cost)
        if len(chunks) == 1:
            return None
        return [(torch.from_numpy(rows), int(lengths[rows].max())) for rows in chunks]

    def _pooled_in_chunks(self, chunks: list[tuple[torch.Tensor, int]], tokens: TokenizedBatch,
                          embedding_transform: Callable[[torch.Tensor], torch.Tensor] | None, pooling: Pooling,
                          prompt_length: int | None) -> torch.Tensor:
        """`_pooled` chunk by chunk, each trimmed to its longest row, the pooled rows put back in the batch's order.

        The chunks' token embeddings are looked up in one call and each chunk's pass reads its own: a lookup per
        chunk would give each chunk's backward a dense gradient of the whole vocabulary table to zero and add
        (30,522 × 384 floats = 47 MB for all-MiniLM-L6-v2: 10 % of a chunked step, measured). A view's transform is
        sliced to the chunk's rows (length_chunks.chunk_transform)."""
        shape = (tokens.input_ids.shape[0], tokens.input_ids.shape[1])
        chunk_tokens = [tokens.trimmed(rows, width) for rows, width in chunks]
        table = self.backbone.get_input_embeddings()
        words = table(torch.cat([part.input_ids.reshape(-1) for part in chunk_tokens])).split(
            [part.input_ids.numel() for part in chunk_tokens])
        parts = []
        for (rows, width), part, chunk_words in zip(chunks, chunk_tokens, words, strict=True):
            transform = None if embedding_transform is None else chunk_transform(embedding_transform, rows, width,
                                                                                 shape)
            with _output_replaced(table, chunk_words.view(*part.input_ids.shape, -1)):
                parts.append(self._pooled(part, transform, pooling, prompt_length))
        return torch.cat(parts)[torch.argsort(torch.cat([rows for rows, _ in chunks]))]

    def _packs(self, pooling: Pooling) -> bool:
        """Whether a chunked pass runs packed: a backbone packed_pass can pack, pooling the last layer alone."""
        return can_pack(self.backbone) and not pooling.needs_hidden_states

    def _pooled_packed(self, chunks: list[tuple[torch.Tensor, int]], tokens: TokenizedBatch,
                       embedding_transform: Callable[[torch.Tensor], torch.Tensor] | None, pooling: Pooling,
                       prompt_length: int | None) -> torch.Tensor:
        """`_pooled` as one packed pass, attention in `chunks` (packed_pass.py); the last layer put back in its rows for
        the pooling."""
        rows = PackedRows.plan(tokens.attention_mask, chunks)
        shape = (tokens.input_ids.shape[0], tokens.input_ids.shape[1])
        transform = None if embedding_transform is None else packed_transform(embedding_transform, rows, chunks, shape)
        inputs = rows.backbone_inputs(tokens.input_ids, tokens.position_ids, tokens.token_type_ids)
        with self._embedding_hook(transform), packed_attention_on(self.backbone):
            outputs = self.backbone(**inputs, return_dict=True)
        return pooling(rows.unpack(outputs.last_hidden_state), tokens.attention_mask, None,
                       self._pooled_prompt(prompt_length))

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each transformer layer in backward instead of keeping its activations (transformers' own
        checkpointing, non-reentrant: the dropout masks are replayed from the saved RNG state, and each layer is
        recomputed in the train/eval modes its forward ran in, so losses and gradients equal a run without it even
        when a recipe switches dropout between passes). A backbone without support is refused in one line."""
        if not getattr(self.backbone, "supports_gradient_checkpointing", False):
            model_type = getattr(self.backbone.config, "model_type", "?")
            raise ConfigError(f"gradient_checkpointing: {model_type} models do not support it in transformers; "
                              "train without --grad-checkpointing")
        non_reentrant = {"use_reentrant": False, "context_fn": _forward_modes_replayed(self.backbone)}
        if hasattr(self.backbone, "activation_checkpointing_enable"):  # transformers 5.x's name; the old one warns
            self.backbone.activation_checkpointing_enable(activation_checkpointing_kwargs=non_reentrant)
        else:
            self.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=non_reentrant)

    @contextmanager
    def dropout(self, on: bool) -> Iterator[None]:
        """While training: the backbone's own dropout on or off for the passes inside (ConSERT's views and clean
        passes run without it, as the paper), then the backbone's mode as it was. Layers that checkpoint keep their
        own `training` flag, which is what makes transformers checkpoint them (every dropout sits in their
        sub-modules, which follow `on`); backward recomputes each layer in the modes of its forward
        (`_forward_modes_replayed`), so restoring the mode here is safe. Outside training: the mode is left as is."""
        was_training = self.backbone.training
        if self.training:
            self.backbone.train(on and was_training)
            if not (on and was_training):
                for module in self.backbone.modules():
                    if getattr(module, "gradient_checkpointing", False) is True:
                        module.training = True  # its own flag only: it decides checkpointing, not dropout
        try:
            yield
        finally:
            self.backbone.train(was_training)

    def _pooled_prompt(self, prompt_length: int | None) -> int:
        """How many leading tokens pooling leaves out: the prompt's, when the model excludes prompts."""
        if self.prompts.include_prompt:
            return 0
        return self.train_prompt_length if prompt_length is None else prompt_length

    def run_backbone(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        embedding_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        output_hidden_states: bool = False,
    ) -> Any:
        """The backbone's outputs (no pooling, no head): what SG-OPT's [CLS] and the diagnostics' layers read."""
        return self._backbone_pass(TokenizedBatch(input_ids, attention_mask, token_type_ids, position_ids),
                                   embedding_transform, output_hidden_states)

    def _backbone_pass(self, tokens: TokenizedBatch, embedding_transform: Callable[[torch.Tensor], torch.Tensor] | None,
                       output_hidden_states: bool) -> Any:
        extra = {"output_hidden_states": True} if output_hidden_states else {}
        with self._embedding_hook(embedding_transform):
            return self.backbone(**tokens.given(), **extra, return_dict=True)

    @contextmanager
    def _embedding_hook(self, transform: Callable[[torch.Tensor], torch.Tensor] | None) -> Iterator[None]:
        if transform is None:
            yield
            return
        embeddings = self.embedding_layer
        if embeddings is None:
            raise ModelError(f"{self.name}: has no embedding layer to augment; use a BERT-like encoder")
        ran = []

        def hook(_module: nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
            ran.append(True)
            return transform(output)

        handle = embeddings.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()
        if not ran:  # a module the forward never called: the view would silently be the sentence unchanged
            raise ModelError(f"{self.name}: its embedding layer ({type(embeddings).__name__}) was not called by the "
                             "forward pass, so a view that edits it cannot be made; choose views that do not edit it "
                             "(shuffle, span-cutoff, encoder-dropout)")

    # ------------------------------------------------------------------ changed through its own methods
    # Other modules never assign the encoder's attributes (tests/test_architecture.py): these say what changes.
    def configure(self, pooling: Pooling | None = None, normalize: bool | None = None, max_length: int | None = None,
                  train_prompt_length: int | None = None) -> None:
        """Read texts with these settings from now on (None: unchanged); `max_length` is capped by the position
        table."""
        changes: dict[str, Any] = {"pooling": pooling, "normalize": normalize,
                                   "max_length": None if max_length is None else self.token_limit(max_length),
                                   "train_prompt_length": train_prompt_length}
        self.settings = replace(self.settings, **{key: value for key, value in changes.items() if value is not None})

    def cost_passes_at(self, tokens: int) -> None:
        """One more CPU training pass costs this many tokens' work from now on: the length chunks add a pass only
        where it saves more padded tokens (what the run timed on this CPU: train/pass_costs.py)."""
        self.pass_cost = tokens

    def use_lora(self, settings: Any) -> None:
        """The LoRA settings of the adapters in the backbone (sentadapt/model/lora.py), or None once they are merged."""
        self.lora = settings

    def keep_prefix(self, dim: int) -> None:
        """From now on output each vector's first `dim` coordinates (`export --dim`): a Dense layer of weight
        [I_dim | 0], no bias, no activation, appended to the head. Its products are x · 1 and its sums add exact
        zeros, so the output is the prefix bit for bit, before the normalisation (when the model has one), and every
        format that holds Dense modules (sentence-transformers, ONNX) carries it without code of its own."""
        from sentadapt.model.st_format import DenseLayer

        width = self.embedding_dim
        if not 1 <= dim <= width:
            raise ConfigError(f"--dim: {dim} is not a size of this model's {width}-dimensional vectors; give 1 to "
                              f"{width}")
        if dim == width:
            return
        layer = DenseLayer(width, dim, bias=False)
        with torch.no_grad():
            layer.linear.weight.copy_(torch.eye(dim, width))
        layer.requires_grad_(False)
        self.head = nn.ModuleList([*self.head, layer.to(self.device)])

    def apply_head(self, pooled: torch.Tensor, start: int = 0, stop: int | None = None,
                   normalize: bool = True) -> torch.Tensor:
        for layer in list(self.head)[start:stop]:
            pooled = layer(pooled)
        if normalize and self.normalize:
            pooled = nn.functional.normalize(pooled, dim=-1)
        return pooled

    # ------------------------------------------------------------------ tokenization
    def token_limit(self, max_length: int) -> int:
        """The length token ids are cut to: `max_length`, capped by the position table (a longer sequence would
        index past it)."""
        return min(max_length, self.position_limit) if self.position_limit is not None else max_length

    def tokenize_ids(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """Token ids with special tokens, truncated to max_length, unpadded."""
        encoded = self.tokenizer(
            list(texts), truncation=True, max_length=self.token_limit(max_length or self.max_length),
            padding=False, return_attention_mask=False, return_token_type_ids=False,
        )
        return encoded["input_ids"]

    def prompt_length(self, prompt: str, max_length: int | None = None) -> int:
        """The prompt's length in tokens as sentence-transformers counts it (Transformer._get_prompt_length): the
        prompt tokenized alone, special tokens included, less a trailing special token ([SEP], </s>)."""
        if not prompt:
            return 0
        ids = self.tokenize_ids([prompt], max_length)[0]
        special = set(getattr(self.tokenizer, "all_special_ids", ()))
        return len(ids) - 1 if ids and ids[-1] in special else len(ids)

    def collate(self, sequences: Sequence[Sequence[int]]) -> TokenizedBatch:
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return pad_batch(sequences, pad_id)

    # ------------------------------------------------------------------ inference
    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = ENCODE_BATCH_SIZE,
        max_length: int | None = None,
        dtype: str = VECTOR_DTYPE,
        pooling: Pooling | None = None,
        progress: Callable[[int], None] | None = None,
        prompt: str | None = None,
        prompt_name: str | None = None,
        head_layers: int | None = None,
    ) -> torch.Tensor:
        """Embed texts → float32 CPU tensor (len(texts), dim), rows in input order.

        Each unique text is encoded once; batches are sorted by token length so padding is minimal.
        `head_layers`: stop after that many head layers, without normalisation (a frozen part's output,
        sentadapt/model/frozen_part.py).

        Prompts as sentence-transformers' `encode`: `prompt` (a text; "" for none) or `prompt_name` (one of
        `self.prompts`) is prepended to every text; with neither, the model's default prompt, if it has one.
        """
        check_dtype(dtype, self.device.type)
        prompt = self.prompts.resolve(prompt, prompt_name, self.name)
        if not texts:
            return torch.empty((0, self.embedding_dim))
        return each_text_once(texts, lambda unique: self._embed(unique, batch_size, max_length, dtype, pooling,
                                                                progress, head_layers, prompt))

    def _embed(
        self,
        unique_texts: list[str],
        batch_size: int,
        max_length: int | None,
        dtype: str,
        pooling: Pooling | None,
        progress: Callable[[int], None] | None,
        head_layers: int | None = None,
        prompt: str = "",
    ) -> torch.Tensor:
        """Vectors (float32, CPU) of unique texts, in their order, each after `prompt` ("" for none).

        bf16/fp16 run the backbone as a copy whose weights are cast to that type once (`cast_copy`), not
        under torch.autocast. Autocast decides op by op at run time: each matmul casts its inputs to half
        precision (the weights from a cache that lasts one autocast block, the activations every time) and
        LayerNorm and softmax run in fp32 and hand fp32 on, so every layer gains cast kernels and dispatch
        work; on an H100 fp16 eval was slower than fp32 that way (L3 model, 7 STS tasks: 10.4 s vs 1.7 s).
        The cast copy converts each weight once and runs every op in half precision, casts in between none.
        Its hidden states are cast to float32 before pooling (mean pooling sums up to max_length tokens),
        the Dense head and the normalisation, which run in float32 with the encoder's own modules.

        The encoder itself is never changed: training evaluates the same Encoder on dev with its fp32
        master weights. The copy lives for this call, or for a `keep_cast_copy()` block (eval over several
        evaluators), where it is made once and rebuilt only if the weights change.
        """
        ids = self.tokenize_ids([prompt + text for text in unique_texts] if prompt else unique_texts, max_length)
        skip = self.prompt_length(prompt, max_length)  # pooled or not: forward decides (include_prompt)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        was_training = self.training
        self.eval()
        device = self.device
        cast = None if dtype == "fp32" else self._cast_backbone(dtype)
        # each batch's rows go straight to their places: no list of batches and concatenation of them (two more
        # copies of the whole matrix: 2 × 25 MB for a teacher's 8,192-sentence block at 768 dims)
        out = _Placed(len(unique_texts))
        with eager_only():  # each exact padded length would compile a graph for one use (compiling.py)
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                batch = self.collate([ids[i] for i in chunk]).on_device(device)
                if cast is None:
                    vectors = self(batch.input_ids, batch.attention_mask, pooling=pooling, head_layers=head_layers,
                                   prompt_length=skip)
                else:
                    vectors = self._forward_cast(cast, batch, pooling or self.pooling, head_layers, skip)
                out.add(chunk, vectors)
                if progress is not None:
                    progress(len(chunk))
        del cast
        self.train(was_training)
        return out.matrix()

    def _forward_cast(self, backbone: nn.Module, batch: TokenizedBatch, pooling: Pooling,
                      head_layers: int | None, prompt_length: int = 0) -> torch.Tensor:
        """`forward` with a cast backbone: its hidden states → float32, then pooling, head and normalisation."""
        kwargs: dict[str, Any] = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if pooling.needs_hidden_states:
            kwargs["output_hidden_states"] = True
        outputs = backbone(**kwargs, return_dict=True)
        skip = self._pooled_prompt(prompt_length)
        if pooling.needs_hidden_states:  # only the layers pooling mixes are cast
            hidden = tuple(state.float() if index in pooling.layers else state
                           for index, state in enumerate(outputs.hidden_states))
            pooled = pooling(outputs.last_hidden_state, batch.attention_mask, hidden, skip)
        else:
            pooled = pooling(outputs.last_hidden_state.float(), batch.attention_mask, None, skip)
        if len(self.head):  # the head's own dtype: float32 unless the whole model was loaded in half precision
            pooled = pooled.to(next(self.head.parameters()).dtype)
        if head_layers is not None:
            return self.apply_head(pooled, stop=head_layers, normalize=False)
        return self.apply_head(pooled)

    def _cast_backbone(self, dtype: str) -> nn.Module:
        """The backbone cast to `dtype`: the kept copy if it is still current, else a new one (kept inside a
        `keep_cast_copy` block)."""
        versions = weight_versions(self.backbone)
        kept = self._cast_copy
        if kept is not None and (kept.dtype, kept.source, kept.versions) == (dtype, id(self.backbone), versions):
            return kept.module
        self._cast_copy = None  # a stale copy goes before the new one is made
        module = cast_copy(self.backbone, DTYPES[dtype])
        if self._keep_cast_copies:
            self._cast_copy = CastCopy(dtype, id(self.backbone), versions, module)
        return module

    @contextmanager
    def keep_cast_copy(self) -> Iterator[Encoder]:
        """Within the block, encodes in bf16/fp16 share one cast copy of the backbone (made on first use, made
        again only if the weights or the dtype change); it is released on exit. Without the block each encode
        makes its own copy and releases it when done (one cast per call, never one per batch)."""
        self._keep_cast_copies += 1
        try:
            yield self
        finally:
            self._keep_cast_copies -= 1
            if not self._keep_cast_copies:
                self._cast_copy = None

    # ------------------------------------------------------------------ saving
    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write the sentence-transformers layout (safetensors weights) into `folder`."""
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        if self.lora is None:
            write_sentence_transformers_folder(self, Path(folder))
            return
        from sentadapt.model import lora

        # a plain model with the adapters merged in, and the adapters alone beside it (sentadapt/model/lora.py)
        write_sentence_transformers_folder(self, Path(folder), lora.merged_state_dict(self.backbone))
        lora.save_adapter(self, Path(folder) / lora.ADAPTER_FOLDER, self.location)


@contextmanager
def _output_replaced(module: nn.Module, output: torch.Tensor) -> Iterator[None]:
    """While inside, `module`'s forward gives `output` (computed elsewhere, with its own gradient path)."""
    handle = module.register_forward_hook(lambda _module, _inputs, _output: output)
    try:
        yield
    finally:
        handle.remove()


def _forward_modes_replayed(backbone: nn.Module) -> Callable[[], tuple[Any, Any]]:
    """torch.utils.checkpoint's `context_fn`: at each checkpointed forward, remember every module's train/eval
    mode; when backward recomputes that layer, run it in those modes (then put the current ones back). Recipes
    switch the backbone's dropout between passes of one step (ConSERT's views run without it, its clean pass too),
    and a layer recomputed in the later mode would take another code path (eager vs fused attention) or other
    dropout: wrong gradients, or a shape mismatch torch reports."""
    modules = list(backbone.modules())

    def context_fn() -> tuple[Any, Any]:
        forward_modes = [module.training for module in modules]

        @contextmanager
        def as_in_forward() -> Iterator[None]:
            current = [module.training for module in modules]
            for module, mode in zip(modules, forward_modes):
                module.training = mode
            try:
                yield
            finally:
                for module, mode in zip(modules, current):
                    module.training = mode

        return contextlib.nullcontext(), as_in_forward()

    return context_fn
