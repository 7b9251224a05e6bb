"""`sentadapt diagnose`: why a model's sentence space is weak — and, with --compare, whether adaptation fixed it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import console, draw, friendly_errors, note, progress_bar, render_even_if_unsaved
from sentadapt.cli.shared_options import Option
from sentadapt.diagnostics import DIAGNOSE_BATCH_SIZE, SAMPLE_SEED, SAMPLE_SENTENCES, TOPK_MAX, TOPK_STS
from sentadapt.model.resolve import DEFAULT_BASE_MODEL

if TYPE_CHECKING:
    from sentadapt.diagnostics.analysis import DiagnoseResult

OPTIONS = (  # sentadapt.diagnose's keywords
    Option("model", str, DEFAULT_BASE_MODEL, "Model folder, `sentadapt adapt` run directory or Hub id (default: "
           "named above).", argument=True, typer={"show_default": False}),
    Option("compare", str | None, None, "A second model: every figure side by side, with Δ."),
    Option("corpus", Path | None, None, "Your text, one sentence per line: a file or a folder."),
    Option("pairs", Path | None, None, "Labelled pairs (.tsv .csv .jsonl .parquet: sentence1, sentence2, score); "
           "instead of STS."),
    Option("sample", int, SAMPLE_SENTENCES, "Sentences drawn from the corpus (seeded)."),
    Option("data_dir", Path | None, None, "Folder of STS JSON Lines files: STS-B test (top-k), STS-B dev (layers, "
           "alignment).", typer={"envvar": "SENTADAPT_DATA_DIR"}),
    Option("sts", str, TOPK_STS, "Top-k on STS-B test only (stsb) or all 7 STS test sets (all)."),
    Option("report", str | None, None, "Comma list of anisotropy, spectrum, alignment, frequency, topk, layers. "
           "Default: all that have their data."),
    Option("max_k", int, TOPK_MAX, "Top-k curve: remove up to this many frequent tokens.", typer={"min": 1}),
    Option("json_out", Path | None, None, "Write every figure as JSON (docs/diagnostics.md).", ("--json",)),
    Option("plot", Path | None, None, "Write PNG plots into this folder (needs matplotlib)."),
    Option("seed", int, SAMPLE_SEED, "Seed of the sentence sample and the k-NN token sample."),
    shared.batch_size(DIAGNOSE_BATCH_SIZE),
    shared.MAX_LENGTH,
    shared.DEVICE,
    *shared.SAFETY,
)


@friendly_errors
def diagnose_command(**options: Any) -> None:
    """Anisotropy, isotropy, spectrum, alignment/uniformity, frequency bias, top-k token removal, layer sweep.

    MODEL defaults to sentence-transformers/all-MiniLM-L6-v2, the default base model of `adapt`.

    With no --corpus, --pairs or STS data, a small sample shipped with sentadapt (IT-support text) is used.
    """
    from sentadapt.api import diagnose

    render_even_if_unsaved(lambda: diagnose(**options, progress=progress_bar, note=note), _render)


diagnose_command.__signature__ = shared.signature(OPTIONS)  # type: ignore[attr-defined]


def _render(result: DiagnoseResult) -> None:
    console.print(draw(result.summary_table()))
    for name, line in result.verdict_lines():
        console.print(f"  [bold]{escape(name)}[/]: {escape(line)}", highlight=False)
    tables = result.report_tables()
    if "anisotropy" in tables:
        console.print(draw(tables.pop("anisotropy")))
    for line in result.spectrum_lines():  # the spectrum is one sparkline per model, after the per-layer table
        console.print(escape(line), highlight=False)
    for table in tables.values():
        console.print(draw(table))
