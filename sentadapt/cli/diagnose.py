"""`sentadapt diagnose`: why a model's sentence space is weak — and, with --compare, whether adaptation fixed it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import console, draw, friendly_errors, note, progress_bar, render_even_if_unsaved
from sentadapt.diagnostics import DIAGNOSE_BATCH_SIZE, SAMPLE_SEED, SAMPLE_SENTENCES, TOPK_MAX, TOPK_STS
from sentadapt.model.resolve import DEFAULT_BASE_MODEL

if TYPE_CHECKING:
    from sentadapt.diagnostics.analysis import DiagnoseResult


@friendly_errors
def diagnose_command(
    model: str = typer.Argument(DEFAULT_BASE_MODEL, show_default=False,
                                help="Model folder, `sentadapt adapt` run directory or Hub id (default: "
                                     "named above)."),
    compare: str | None = typer.Option(None, "--compare", help="A second model: every figure side by side, with Δ."),
    corpus: Path | None = typer.Option(None, "--corpus", help="Your text, one sentence per line: a file or a folder."),
    pairs: Path | None = typer.Option(
        None, "--pairs", help="Labelled pairs (.tsv .csv .jsonl .parquet: sentence1, sentence2, score); instead of STS."
    ),
    sample: int = typer.Option(SAMPLE_SENTENCES, "--sample", help="Sentences drawn from the corpus (seeded)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", envvar="SENTADAPT_DATA_DIR",
        help="Folder of STS JSON Lines files: STS-B test (top-k), STS-B dev (layers, alignment).",
    ),
    sts: str = typer.Option(TOPK_STS, "--sts", help="Top-k on STS-B test only (stsb) or all 7 STS test sets (all)."),
    report: str | None = typer.Option(
        None, "--report", help="Comma list of anisotropy, spectrum, alignment, frequency, topk, layers. Default: all "
        "that have their data.",
    ),
    max_k: int = typer.Option(TOPK_MAX, "--max-k", min=1, help="Top-k curve: remove up to this many frequent tokens."),
    json_out: Path | None = typer.Option(None, "--json", help="Write every figure as JSON (docs/diagnostics.md)."),
    plot: Path | None = typer.Option(None, "--plot", help="Write PNG plots into this folder (needs matplotlib)."),
    seed: int = typer.Option(SAMPLE_SEED, "--seed", help="Seed of the sentence sample and the k-NN token sample."),
    batch_size: int = shared.batch_size(DIAGNOSE_BATCH_SIZE),
    max_length: int | None = shared.max_length(),
    device: str | None = shared.device(),
    trust_remote_code: bool = shared.trust_remote_code(),
    allow_pickle: bool = shared.allow_pickle(),
) -> None:
    """Anisotropy, isotropy, spectrum, alignment/uniformity, frequency bias, top-k token removal, layer sweep.

    MODEL defaults to sentence-transformers/all-MiniLM-L6-v2, the default base model of `adapt`.

    With no --corpus, --pairs or STS data, a small sample shipped with sentadapt (IT-support text) is used.
    """
    options = dict(locals())  # the parameters: diagnose()'s keywords, one spelling
    from sentadapt.api import diagnose as run_diagnose

    render_even_if_unsaved(lambda: run_diagnose(**options, progress=progress_bar, note=note), _render)


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
