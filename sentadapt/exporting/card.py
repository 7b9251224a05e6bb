"""The model card (README.md) written into every export.

It records what a user needs to trust and use the model: base model and its licence, recipe and the
run's full configuration, training data, STS results from the run, the pooling, and how to load the
export (sentence-transformers, transformers, onnxruntime) — including pooling code for the formats
that cannot store it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from sentadapt.decision.rule import decision_of
from sentadapt.errors import SentadaptError
from sentadapt.text_tables import some_of

if TYPE_CHECKING:
    from sentadapt.exporting.origin import LoadedSource
    from sentadapt.exporting.request import ExportRequest
    from sentadapt.model.encoder import Encoder


def model_card(request: ExportRequest, source: LoadedSource, encoder: Encoder) -> str:
    licence = find_licence(source)
    sections = [
        _front_matter(request, source, licence),
        f"# {Path(request.output).name}\n\n{_keep_base_notice(source)}{_summary(request, source)}",
        _model_section(request, encoder),
        _training_section(source),
        _results_section(source),
        _usage_section(request, encoder, source.base_model),
        f"## Licence\n\n{_licence_text(source, licence)}",
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def find_licence(source: LoadedSource) -> str | None:
    """The `license:` of the base model's README front matter, when a local copy of it is found."""
    for folder in _base_model_folders(source):
        readme = folder / "README.md"
        if readme.is_file():
            licence = _front_matter_value(readme.read_text(encoding="utf-8", errors="replace"), "license")
            if licence:
                return licence
    return None


def _base_model_folders(source: LoadedSource) -> list[Path]:
    from sentadapt.model.resolve import OFFLINE_MODEL_PACKAGES, resolve_model

    folders = [source.model_folder] if source.model_folder is not None else []
    base = source.base_model
    known_offline = base.lower() in OFFLINE_MODEL_PACKAGES or f"sentence-transformers/{base.lower()}" in \
        OFFLINE_MODEL_PACKAGES
    if Path(base).expanduser().is_dir() or known_offline:  # never probe the network for a card
        with contextlib.suppress(SentadaptError):  # a missing base model only means "licence unknown"
            folders.append(Path(resolve_model(base).location))
    return folders


def _front_matter_value(text: str, key: str) -> str | None:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for line in lines[1:]:
        if line.strip() == "---":
            break
        name, _, value = line.partition(":")
        if name.strip() == key and value.strip():
            return value.strip().strip("'\"")
    return None


def _front_matter(request: ExportRequest, source: LoadedSource, licence: str | None) -> str:
    library = {"sentence-transformers": "sentence-transformers", "hf": "transformers", "onnx": "onnx"}
    lines = ["---", f"library_name: {library[request.format]}", "pipeline_tag: sentence-similarity"]
    if licence:
        lines.append(f"license: {licence}")
    if source.base_model != "unknown":
        lines.append(f"base_model: {source.base_model}")
    lines += ["tags:", "- sentence-transformers", "- sentence-similarity", "- sentadapt", "---"]
    return "\n".join(lines)


def _summary(request: ExportRequest, source: LoadedSource) -> str:
    recipe = source.run.config.get("recipe") if source.run else None
    how = f"adapted with sentadapt (recipe **{recipe}**)" if recipe else "exported by sentadapt"
    return (f"A sentence-embedding model {how} from `{source.base_model}`, in the **{request.format}** format "
            f"({request.dtype}). Source: {source.description}.")


def _keep_base_notice(source: LoadedSource) -> str:
    """A run whose decision is keep-base says so before anything else (decision/rule.py)."""
    metrics = source.run.metrics if source.run else None
    if not metrics:
        return ""
    decision = decision_of(metrics)
    if not decision.keep_base:
        return ""
    return (f"> **Keep the base model.** {decision.reason[0].upper()}{decision.reason[1:]}: by the "
            f"{decision.rule or 'strict'} rule this run did not show a gain over `{source.base_model}`, so use the "
            "base model; this export is what the run trained, kept for inspection.\n\n")


def describe_pooling(encoder: Encoder) -> str:
    pooling, layers = encoder.pooling, encoder.num_layers
    token = {"cls": "the first token ([CLS]) vector", "mean": "the mean of the token vectors (padding excluded)",
             "max": "the element-wise max of the token vectors (padding excluded)",
             "lasttoken": "the last real token's vector (padding excluded)"}[pooling.token]
    if not pooling.layers:
        return f"{token} of the last layer (hidden state {layers})"
    mix = " and ".join(f"{w:g}×hidden state {layer}" for layer, w in
                       zip(pooling.layers, pooling.weights or (1.0,) * len(pooling.layers)))
    return f"{token} of the weighted average of {mix} (hidden state 0 is the embedding layer)"


def _model_section(request: ExportRequest, encoder: Encoder) -> str:
    rows = [
        ("Pooling", f"`{encoder.pooling_name}`: {describe_pooling(encoder)}"),
        ("Dense head", " → ".join(f"{layer.linear.in_features}→{layer.linear.out_features} "  # type: ignore[union-attr]
                                  f"{layer.activation_name.rsplit('.', 1)[-1]}"  # type: ignore[union-attr, operator]
                                  for layer in encoder.head) or "none"),
        ("Normalised (unit length)", "yes" if encoder.normalize else "no"),
        ("Dimension", str(encoder.embedding_dim) + ("" if request.dim is None else
                                                     f" (`export --dim {request.dim}`: the first {request.dim} "
                                                     "dimensions of the model's vectors, the last Dense layer)")),
        ("Max sequence length", str(encoder.max_length)),
        ("Similarity", "cosine"),
        ("Weights", request.dtype),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return f"## Model\n\n| | |\n|---|---|\n{table}"


def _training_section(source: LoadedSource) -> str:
    if source.run is None:
        return "## Training\n\nNot trained by sentadapt: this is an export of an existing model."
    config = source.run.config
    train = config.get("train") or {}
    data = [f"- Training data: {some_of([f'`{c}`' for c in config.get('corpus') or []]) or 'unknown'}"]
    data.append(f"- Dev set (model selection): `{config.get('dev') or 'none (the last step is kept)'}`")
    if source.run.metrics:
        metrics = source.run.metrics
        data.append(f"- Steps: {metrics.get('steps')} of {metrics.get('total_steps')}; exported step: {source.step}")
        last = (metrics.get("decisions") or [{}])[-1]
        if last.get("by") == "sentadapt decide":  # decided after training, on labels of its own
            labels = last.get("labels") or {}
            data.append(f"- Decided on (`sentadapt decide`): `{labels.get('file') or metrics.get('dev')}`"
                        + (f", {labels['pairs']} labelled pairs" if labels.get("pairs") else ""))
    data.append(f"- Batch size {train.get('batch_size')}, learning rate {train.get('lr')}, "
                f"max length {train.get('max_length')}, seed {train.get('seed')}")
    if train.get("lora_r"):
        data.append(f"- LoRA adapters: rank {train['lora_r']}, alpha {train.get('lora_alpha') or 2 * train['lora_r']}, "
                    f"on `{train.get('lora_targets')}` (base weights frozen; merged into these weights unless "
                    "exported with --adapters-only)")
    return (f"## Training\n\nRecipe **{config.get('recipe')}** on base model `{config.get('base')}`.\n\n"
            + "\n".join(data) + f"\n\nThe run's full configuration (`config.yaml`):\n\n```yaml\n"
            f"{source.run.config_text.rstrip()}\n```")


def _results_section(source: LoadedSource) -> str:
    metrics = source.run.metrics if source.run else None
    if not metrics or metrics.get("best_score") is None:
        return "## Results\n\nNo STS results were recorded for this model; score it with `sentadapt eval`."
    base, best = metrics.get("base_score"), metrics.get("best_score")
    gain = f" ({best - base:+.2f})" if isinstance(base, (int, float)) and isinstance(best, (int, float)) else ""
    decision = decision_of(metrics)
    return (f"## Results\n\n{metrics.get('dev_metric', 'Spearman x100 of cosine')} on `{metrics.get('dev')}`:\n\n"
            f"| model | score |\n|---|---|\n| base model | {_score(base)} |\n"
            f"| this model (step {metrics.get('best_step')}) | {_score(best)}{gain} |\n\n"
            f"Decision: **{decision.decision or 'unknown'}**, by the {decision.rule or 'strict'} rule "
            f"({decision.reason}).")


def _score(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "—"


def _usage_section(request: ExportRequest, encoder: Encoder, base: str) -> str:
    if request.adapters_only:
        from sentadapt.exporting.adapters import usage

        return usage(base)
    if request.format == "sentence-transformers":
        return "## Usage\n\n" + _st_usage() + "\n\n" + _transformers_usage(encoder, with_head_note=True)
    if request.format == "hf":
        return ("## Usage\n\nThe Hugging Face format has no place for the pooling: apply it as below (it is "
                "what sentadapt verified this export against).\n\n" + _transformers_usage(encoder)
                + f"\n\nWith sentadapt: `sentadapt eval {Path(request.output).name} --pooling {encoder.pooling_name}`.")
    return "## Usage\n\n" + _onnx_usage(request, encoder)


def _st_usage() -> str:
    return ("With sentence-transformers:\n\n```python\nfrom sentence_transformers import SentenceTransformer\n\n"
            "model = SentenceTransformer(\"PATH\")\nvectors = model.encode([\"A man is playing a guitar.\", "
            "\"Someone plays music.\"])\nprint(model.similarity(vectors[:1], vectors[1:]))\n```")


def _transformers_usage(encoder: Encoder, with_head_note: bool = False) -> str:
    from sentadapt.model.backbone import loader_name

    pooling = encoder.pooling
    if pooling.layers:
        weights = pooling.weights or (1.0,) * len(pooling.layers)
        total = sum(weights)
        mix = " + ".join(f"{w / total:g} * out.hidden_states[{layer}]" for layer, w in zip(pooling.layers, weights))
        tokens, hidden = f"tokens = {mix}", ", output_hidden_states=True"
    else:
        tokens, hidden = "tokens = out.last_hidden_state", ""
    pool = {"cls": "vectors = tokens[:, 0]",
            "mean": "vectors = (tokens * mask).sum(1) / mask.sum(1)",
            "max": "vectors = tokens.masked_fill(mask == 0, float(\"-inf\")).amax(1)",
            # the last 1 of each row's mask, whichever side the tokenizer pads
            "lasttoken": "last = mask.shape[1] - 1 - mask.squeeze(-1).flip(1).argmax(1)\n"
                         "vectors = tokens[torch.arange(len(tokens)), last]"}[pooling.token]
    loader = loader_name(encoder.backbone.config)  # AutoModel, or T5EncoderModel for a T5 (no decoder)
    lines = [
        "import torch", f"from transformers import {loader}, AutoTokenizer", "",
        "tokenizer = AutoTokenizer.from_pretrained(\"PATH\")", f"model = {loader}.from_pretrained(\"PATH\").eval()",
        "sentences = [\"A man is playing a guitar.\", \"Someone plays music.\"]",
        f"batch = tokenizer(sentences, padding=True, truncation=True, max_length={encoder.max_length}, "
        "return_tensors=\"pt\")",
        "with torch.no_grad():", f"    out = model(**batch{hidden})",
        tokens, "mask = batch[\"attention_mask\"].unsqueeze(-1).to(tokens.dtype)", pool,
    ]
    if encoder.normalize:
        lines.append("vectors = torch.nn.functional.normalize(vectors, dim=-1)")
    note = ""
    if with_head_note and len(encoder.head):
        note = ("\n\nThe Dense layers after pooling live in the `*_Dense/` folders; plain transformers does not apply "
                "them, so use sentence-transformers (or the ONNX export) for this model.")
    return "With transformers (pooling written out):\n\n```python\n" + "\n".join(lines) + "\n```" + note


def _onnx_usage(request: ExportRequest, encoder: Encoder) -> str:
    from sentadapt.exporting.onnx import DESCRIPTION_FILE, INT8_FILE, MODEL_FILE, OUTPUT_NAME

    files = f"`{MODEL_FILE}` (fp32)" + (f" and `{INT8_FILE}` (dynamic int8 weights)" if request.quantize else "")
    return (
        f"Files: {files}, the tokenizer, and `{DESCRIPTION_FILE}`. The graph is the **whole pipeline** (backbone, "
        f"pooling `{encoder.pooling_name}`, Dense head, normalisation): inputs `input_ids` and `attention_mask` "
        f"(int64, [batch, sequence]), output `{OUTPUT_NAME}` (float32, [batch, {encoder.embedding_dim}]) — no "
        "pooling code needed.\n\n```python\nimport onnxruntime\nfrom transformers import AutoTokenizer\n\n"
        "tokenizer = AutoTokenizer.from_pretrained(\"PATH\")\n"
        f"session = onnxruntime.InferenceSession(\"PATH/{MODEL_FILE}\", providers=[\"CPUExecutionProvider\"])\n"
        f"batch = tokenizer([\"A man is playing a guitar.\"], padding=True, truncation=True, "
        f"max_length={encoder.max_length}, return_tensors=\"np\")\n"
        f"(vectors,) = session.run([\"{OUTPUT_NAME}\"], {{\"input_ids\": batch[\"input_ids\"], "
        "\"attention_mask\": batch[\"attention_mask\"]})\n```\n\n"
        "It is not a sentence-transformers ONNX backend folder (that backend expects the backbone alone and "
        "pools in torch); use the sentence-transformers export for `SentenceTransformer(...)`."
    )


def _licence_text(source: LoadedSource, licence: str | None) -> str:
    if licence:
        return (f"The base model `{source.base_model}` is released under `{licence}` (from its model card); this "
                "derived model follows the base model's licence.")
    return (f"The licence of the base model `{source.base_model}` was not found (no local model card naming one); "
            "check it before distributing this model.")
