"""`sentadapt export`: a run directory or model → sentence-transformers, Hugging Face or ONNX, verified."""

from __future__ import annotations

from pathlib import Path

import typer

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import friendly_errors, note, say
from sentadapt.exporting.request import DEFAULT_CHECKPOINT, DEFAULT_FORMAT
from sentadapt.options import VECTOR_DTYPE


@friendly_errors
def export_command(
    source: str = typer.Argument(..., help="A run directory (sentadapt adapt --output), a model folder or a Hub id."),
    output: Path = typer.Argument(..., help="Folder to write (built next to it, then renamed into place)."),
    export_format: str = typer.Option(DEFAULT_FORMAT, "--format", "-f",
                                      help="sentence-transformers | hf | onnx."),
    dtype: str = typer.Option(VECTOR_DTYPE, "--dtype",
                              help="fp32 | fp16 (weights cast; sentence-transformers and hf)."),
    pooling: str | None = typer.Option(None, "--pooling", help=(
        "Override the pooling: cls | mean | max | last2avg | firstlast | lasttoken.")),
    normalize: bool = typer.Option(False, "--normalize", help="Add L2 normalisation (unit-length vectors)."),
    quantize: str | None = typer.Option(None, "--quantize", help="int8: also write a dynamic int8 ONNX model."),
    checkpoint: str = typer.Option(DEFAULT_CHECKPOINT, "--checkpoint", help="For run directories: best | last | STEP."),
    sentences: Path | None = typer.Option(
        None, "--sentences", help="Verify on these sentences (one per line) instead of a built-in sample."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a non-empty OUTPUT."),
    trust_remote_code: bool = shared.trust_remote_code(),
    allow_pickle: bool = shared.allow_pickle(),
    adapters_only: bool = typer.Option(False, "--adapters-only", help="A --lora run's adapters alone (peft), "
                                                                      "to load onto its base; default: merged."),
    dim: int | None = typer.Option(None, "--dim", help="Ship the vectors' first N dimensions (eval --dims)."),
) -> None:
    """Export a model, then prove the export gives the same vectors as sentadapt's encoder."""
    options = dict(locals())  # the parameters: export()'s keywords, one spelling (`format` is a builtin here)
    from sentadapt.api import export as run_export

    say(run_export(**{"format" if name == "export_format" else name: value for name, value in options.items()},
                   note=note).lines())
