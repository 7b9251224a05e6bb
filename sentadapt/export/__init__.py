"""`sentadapt export`: turn a run directory or any model into what a user deploys, and prove it.

Formats:
- `sentence-transformers`: built from sentence-transformers' own module classes, saved with its `save()`;
- `hf`: an `AutoModel`-loadable backbone + tokenizer, the pooling written in the model card;
- `onnx`: the whole pipeline (backbone, pooling, Dense head, normalisation) as one graph that maps
  `input_ids`, `attention_mask` to `sentence_embedding`, optionally with a dynamic int8 copy.

Every export is built in a temporary folder next to OUT, verified against sentadapt's own encoder on
the same sentences, and only then renamed into place; a failed check leaves OUT as it was. This is
the only package that imports sentence_transformers, onnx and onnxruntime (all optional extras).
Importing it does not import torch, so the CLI can reject bad options at once.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

from sentadapt.errors import ConfigError, ExportError
from sentadapt.export.pipeline import run_export
from sentadapt.export.request import (
    CHECKPOINT_CHOICES,
    EXPORT_DTYPES,
    FORMATS,
    QUANTIZATIONS,
    Check,
    ExportRequest,
    ExportResult,
    Note,
)
from sentadapt.registry import unknown_name_message

__all__ = ["FORMATS", "Check", "ExportRequest", "ExportResult", "Note", "check_request", "export_model",
           "require_packages"]

# format → (importable module, pip extra that installs it)
REQUIRED_PACKAGES: dict[str, list[tuple[str, str]]] = {
    "sentence-transformers": [("sentence_transformers", "export")],
    "hf": [],
    "onnx": [("onnx", "onnx"), ("onnxruntime", "onnx"), ("onnxscript", "onnx")],
}


def check_request(request: ExportRequest) -> None:
    """Option checks that need no model (and no torch): a mistake fails before anything loads."""
    if request.format not in FORMATS:
        raise ConfigError(unknown_name_message("format", request.format, list(FORMATS)))
    if request.dtype not in EXPORT_DTYPES:
        raise ConfigError(f"--dtype: '{request.dtype}' is not one of {', '.join(EXPORT_DTYPES)}")
    if request.dtype != "fp32" and request.format == "onnx":
        raise ConfigError("--dtype fp16 applies to the sentence-transformers and hf formats; "
                          "for a smaller ONNX model use --quantize int8")
    if request.quantize is not None:
        if request.quantize not in QUANTIZATIONS:
            raise ConfigError(unknown_name_message("quantization", request.quantize, list(QUANTIZATIONS)))
        if request.format != "onnx":
            raise ConfigError("--quantize int8 applies to --format onnx only")
    if request.checkpoint not in ("best", "last") and not request.checkpoint.isdigit():
        raise ConfigError(f"--checkpoint: '{request.checkpoint}' is not {CHECKPOINT_CHOICES}")
    _check_output(request)


def _check_output(request: ExportRequest) -> None:
    output = Path(request.output)
    if output.exists() and not output.is_dir():
        raise ExportError(f"{output}: exists and is not a folder; choose another output")
    if output.is_dir() and any(output.iterdir()) and not request.overwrite:
        raise ExportError(f"{output}: not empty; pass --overwrite to replace it")
    source = Path(request.source).expanduser()
    if source.exists():
        source, target = source.resolve(), output.resolve()
        if target == source or target in source.parents:
            raise ExportError(f"{output}: would replace the source {request.source}; choose another output")


def require_packages(format_name: str) -> None:
    """Import the format's optional packages now, so a missing one is one line before any model loads."""
    for module, extra in REQUIRED_PACKAGES[format_name]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise ExportError(f"--format {format_name} needs the package '{module}', which is not installed: "
                              f"pip install 'sentadapt[{extra}]'") from None


def export_model(request: ExportRequest, note: Note | None = None, sentences: Sequence[str] | None = None,
                 ) -> ExportResult:
    """Write the export to `request.output` atomically, verified on `sentences` (default: a built-in sample)."""
    check_request(request)
    require_packages(request.format)
    return run_export(request, note or (lambda _message: None), sentences)
