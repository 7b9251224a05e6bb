"""`sentadapt export`: a run directory or model → sentence-transformers, Hugging Face or ONNX, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import friendly_errors, note, say
from sentadapt.cli.shared_options import Option
from sentadapt.exporting.request import DEFAULT_CHECKPOINT, DEFAULT_FORMAT
from sentadapt.options import VECTOR_DTYPE

OPTIONS = (  # sentadapt.export's keywords
    Option("source", str, ..., "A run directory (sentadapt adapt --output), a model folder or a Hub id.",
           argument=True),
    Option("output", Path, ..., "Folder to write (built next to it, then renamed into place).", argument=True),
    Option("format", str, DEFAULT_FORMAT, "sentence-transformers | hf | onnx.", ("--format", "-f")),
    Option("dtype", str, VECTOR_DTYPE, "fp32 | fp16 (weights cast; sentence-transformers and hf)."),
    Option("pooling", str | None, None, "Override the pooling: cls | mean | max | last2avg | firstlast | lasttoken."),
    Option("normalize", bool, False, "Add L2 normalisation (unit-length vectors)."),
    Option("quantize", str | None, None, "int8: also write a dynamic int8 ONNX model."),
    Option("checkpoint", str, DEFAULT_CHECKPOINT, "For run directories: best | last | STEP."),
    Option("sentences", Path | None, None, "Verify on these sentences (one per line) instead of a built-in sample."),
    Option("overwrite", bool, False, "Replace a non-empty OUTPUT."),
    *shared.SAFETY,
    Option("adapters_only", bool, False, "A --lora run's adapters alone (peft), to load onto its base; default: "
           "merged."),
    Option("dim", int | None, None, "Ship the vectors' first N dimensions (eval --dims)."),
)


@friendly_errors
def export_command(**options: Any) -> None:
    """Export a model, then prove the export gives the same vectors as sentadapt's encoder."""
    from sentadapt.api import export

    say(export(**options, note=note).lines())


export_command.__signature__ = shared.signature(OPTIONS)  # type: ignore[attr-defined]
