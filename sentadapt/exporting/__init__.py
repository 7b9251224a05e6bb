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

`export(source, output, format=..., ...)` is the public call (`sentadapt.export`, `sentadapt.api.export`). The
package is called `exporting`, not `export`, because Python binds an imported subpackage as an attribute of its
parent: a package `sentadapt.export` would hide the function of the same name.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

from sentadapt.data.textfile import text_lines
from sentadapt.errors import ConfigError, DataError, ExportError
from sentadapt.events import Note, quiet
from sentadapt.exporting.pipeline import run_export
from sentadapt.exporting.request import (
    CHECKPOINT_CHOICES,
    DEFAULT_CHECKPOINT,
    DEFAULT_FORMAT,
    EXPORT_DTYPES,
    FORMATS,
    QUANTIZATIONS,
    Check,
    ExportRequest,
    ExportResult,
)
from sentadapt.options import VECTOR_DTYPE, check_writable_place, checked
from sentadapt.registry import unknown_name_message
from sentadapt.storage.ownership import check_replaceable, foreign_in_export
from sentadapt.storage.run_folder import is_export_folder

__all__ = ["FORMATS", "Check", "ExportRequest", "ExportResult", "check_request", "export", "export_model",
           "read_sentences", "require_packages"]

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
    if request.adapters_only and (request.format == "onnx" or request.dtype != "fp32" or request.pooling
                                  or request.normalize or request.checkpoint != "best"):
        raise ConfigError("--adapters-only: writes the published LoRA adapters as trained, which load onto the base "
                          "with its own pooling; drop --format onnx, --dtype, --pooling, --normalize and --checkpoint")
    if request.dim is not None:
        if request.dim < 1:
            raise ConfigError(f"--dim: {request.dim} is not a size; give a positive number of dimensions")
        if request.format == "hf" or request.adapters_only:
            raise ConfigError("--dim: the hf format and --adapters-only hold no pooling to truncate after; use "
                              "--format sentence-transformers or onnx")
    if request.checkpoint not in ("best", "last") and not request.checkpoint.isdigit():
        raise ConfigError(f"--checkpoint: '{request.checkpoint}' is not {CHECKPOINT_CHOICES}")
    _check_output(request)


def _check_output(request: ExportRequest) -> None:
    output = Path(request.output)
    if output.exists() and not output.is_dir():
        raise ExportError(f"{output}: exists and is not a folder; choose another output")
    replacing = output.is_dir() and any(output.iterdir())
    if replacing and not request.overwrite:
        raise ExportError(f"{output}: not empty; pass --overwrite to replace it")
    check_writable_place(str(output), output)
    source = Path(request.source).expanduser()
    if source.exists():
        source, target = source.resolve(), output.resolve()
        if target == source or target in source.parents:
            raise ExportError(f"{output}: would replace the source {request.source}; choose another output")
    if replacing:
        check_replaceable(str(output), output, "an earlier `sentadapt export`", is_export_folder,
                          foreign_in_export)


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
    return run_export(request, note or quiet, sentences)


@checked({"source": "SOURCE", "output": "OUTPUT"})
def export(
    source: str | Path,
    output: str | Path,
    *,
    format: str = DEFAULT_FORMAT,
    dtype: str = VECTOR_DTYPE,
    pooling: str | None = None,
    normalize: bool = False,
    quantize: str | None = None,
    checkpoint: str | int = DEFAULT_CHECKPOINT,
    sentences: str | Path | Sequence[str] | None = None,
    overwrite: bool = False,
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    adapters_only: bool = False,
    dim: int | None = None,
    note: Note | None = None,
) -> ExportResult:
    """Export a run directory or model (what `sentadapt export` does; the keywords are its options) into `output`
    as sentence-transformers, hf or onnx, verified against sentadapt's encoder on `sentences` (a file with one per
    line, a list, or None: a built-in sample). `adapters_only`: a LoRA run's adapters alone, in peft's layout.
    `dim`: the model outputs its vectors' first `dim` coordinates (a size `eval --dims` or a --matryoshka run's
    table chose), normalised after the cut when the model normalises.
    Bad options raise `ConfigError` / `ExportError` before torch loads."""
    request = ExportRequest(str(source), Path(output), format, dtype, pooling, normalize, quantize, str(checkpoint),
                            overwrite, trust_remote_code, allow_pickle, adapters_only, dim)
    check_request(request)  # before torch is imported: a typo fails at once
    texts = read_sentences(sentences) if isinstance(sentences, (str, Path)) else sentences
    return export_model(request, note=note, sentences=texts)


def read_sentences(path: str | Path) -> list[str]:
    """`--sentences FILE`: one sentence per line, blank lines skipped; read as every text file is (data/textfile.py:
    .gz, a BOM, CRLF; UTF-16, binary and invalid UTF-8 refused with the line)."""
    try:
        texts = [line.strip() for _number, line in text_lines(Path(path)) if line.strip()]
    except DataError as error:
        raise DataError(f"--sentences {error}") from None
    if not texts:
        raise DataError(f"--sentences {path}: no sentences (one per line)")
    return texts

