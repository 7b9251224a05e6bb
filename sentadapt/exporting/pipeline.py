"""One export: load the source, take reference vectors, write the format into a temporary folder,
verify it there, add the model card, then rename the folder into place (nothing is left on failure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sentadapt.events import Note
from sentadapt.exporting.request import Check, ExportRequest, ExportResult

if TYPE_CHECKING:
    import torch

    from sentadapt.model.encoder import Encoder

Writer = Callable[["Encoder", Path, ExportRequest, list[str], "torch.Tensor", Note], list[Check]]


def _writer(request: ExportRequest) -> Writer:
    format_name = request.format
    if request.adapters_only:
        from sentadapt.exporting.adapters import write_adapters

        return write_adapters
    if format_name == "sentence-transformers":
        from sentadapt.exporting.st import write_sentence_transformers

        return write_sentence_transformers
    if format_name == "hf":
        from sentadapt.exporting.hf import write_hf

        return write_hf
    from sentadapt.exporting.onnx import write_onnx

    return write_onnx


def run_export(request: ExportRequest, note: Note, sentences: Sequence[str] | None) -> ExportResult:
    from sentadapt.exporting.card import model_card
    from sentadapt.exporting.origin import load_source
    from sentadapt.exporting.verify import SAMPLE_SENTENCES
    from sentadapt.storage.durable import atomic_folder

    source = load_source(request, note)
    encoder = source.encoder
    if request.dim is not None:
        encoder.keep_prefix(request.dim)
        note(f"--dim {request.dim}: the model outputs the first {request.dim} of its vectors' coordinates"
             + (", then normalises them" if encoder.normalize else ""))
    texts = list(sentences if sentences is not None else SAMPLE_SENTENCES)
    # fp32, the vectors every format must reproduce; without a prompt, as the hf and onnx formats hold none
    reference = encoder.encode(texts, prompt="")
    output = Path(request.output)
    result = ExportResult(output, request.format, request.dtype, source.description, encoder.pooling_name,
                          encoder.embedding_dim)
    write = _writer(request)
    manifest = {"format": "lora-adapters" if request.adapters_only else request.format, "dtype": request.dtype,
                "source": source.description}
    with atomic_folder(output, manifest) as folder:
        result.checks = write(encoder, folder, request, texts, reference, note)
        (folder / "README.md").write_text(model_card(request, source, encoder), encoding="utf-8")
    result.files = sorted(str(p.relative_to(output)) for p in output.rglob("*") if p.is_file())
    return result
