"""`sentadapt eval`: STS12–16, STS-B, SICK-R and your own pairs, reranking and retrieval sets, with 95 % CIs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import console, draw, friendly_errors, note, progress_bar, render_even_if_unsaved
from sentadapt.evaluation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, STS_AGGREGATE
from sentadapt.options import TEST_SPLIT, VECTOR_DTYPE

if TYPE_CHECKING:
    from sentadapt.evaluation.evaluate import EvalResult


@friendly_errors
def eval_command(
    models: list[str] = typer.Argument(..., help="Model folders, run directories or Hub ids (several → compared)."),
    sts: str | None = typer.Option(None, "--sts", help="'all' or a comma list of tasks (sts12, sts13, sts14, sts15, "
                                   "sts16, stsb, sickr). Default: all (unless a task file is given)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", envvar="SENTADAPT_DATA_DIR",
        help="Folder of STS JSON Lines files (stsb.test.jsonl, ...). Default: MTEB datasets on the Hub (online).",
    ),
    pairs: list[Path] = typer.Option(
        [], "--pairs", help="Your pairs (.tsv .csv .jsonl .parquet): sentence1, sentence2 and score (STS: Spearman) or "
                            "label 0/1 (pair classification: AP, F1, accuracy). Repeatable."
    ),
    rerank: list[Path] = typer.Option(
        [], "--rerank", help='Reranking JSON Lines {"query", "positive": [...], "negative": [...]} (or '
                             '"candidates" + "positive"): MAP, MRR@10, nDCG@10. Repeatable.'
    ),
    retrieval: list[Path] = typer.Option(
        [], "--retrieval", help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv): nDCG@10, MRR@10, "
                                "Recall@10/@100, MAP@100. Repeatable."
    ),
    task: str | None = typer.Option(
        None, "--task", help="Force the task type of the --pairs files: sts | pair-classification."
    ),
    split: str = typer.Option(TEST_SPLIT, "--split", help="test | dev (STS: STS-B and SICK-R only; retrieval: "
                                                      "qrels/SPLIT.tsv)."),
    aggregate: str = typer.Option(STS_AGGREGATE, "--aggregate", help="STS: all (one correlation per task) | mean | "
                                                                     "wmean of subsets."),
    bootstrap: int = typer.Option(BOOTSTRAP_RESAMPLES, "--bootstrap", min=0, help=(
        "Resamples for each model's 95 % percentile CI (and a Δ of best-threshold F1/accuracy). 0 = no CIs.")),
    seed: int = typer.Option(BOOTSTRAP_SEED, "--seed", help="Seed of the bootstrap resamples."),
    cache_embeddings: bool = typer.Option(
        False, "--cache-embeddings", help="Keep each model's vectors on disk ($SENTADAPT_CACHE), keyed by its "
                                          "weights, pooling, max length and the texts (large corpora)."
    ),
    pooling: str | None = typer.Option(None, "--pooling",
                                       help="Override pooling: cls | mean | max | last2avg | firstlast | lasttoken."),
    prompt: str | None = typer.Option(
        None, "--prompt", help="Prompt name (or none) for both sentences of --pairs and STS. Default: the model's "
                               "default_prompt_name."),
    query_prompt: str | None = typer.Option(
        None, "--query-prompt", help="Prompt name (or none) for reranking and retrieval queries. Default: the "
                                     "model's 'query' prompt."),
    document_prompt: str | None = typer.Option(
        None, "--document-prompt", help="Prompt name (or none) for reranking candidates and retrieval documents. "
                                        "Default: the model's 'document', 'passage' or 'corpus' prompt."),
    batch_size: int = shared.batch_size(),
    max_length: int | None = shared.max_length(),
    dtype: str = typer.Option(
        VECTOR_DTYPE, "--dtype", help="fp32 | bf16 | fp16: bf16/fp16 encode with a copy of the weights cast once to "
                                      "that type (pooling in fp32; faster on GPUs). fp16 needs CUDA; on the CPU use "
                                      "bf16."
    ),
    device: str | None = shared.device(),
    dims: str | None = typer.Option(None, "--dims", help="Also score at these sizes (each vector's prefix, as "
                                    "truncate_dim), e.g. 384,192,96: a row each, Δ against the first model's whole."),
    quantize: str | None = typer.Option(None, "--quantize", help="Also at these precisions: none,int8,binary "
                                        "(quantize_embeddings; binary by Hamming distance)."),
    calibration: Path | None = typer.Option(None, "--calibration", help="int8 ranges from these sentences (one per "
                                            "line, a sample of your corpus). Default: the evaluated sentences."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the results (with CIs) as JSON here."),
    show_subsets: bool = typer.Option(False, "--subsets", help="Also print per-subset STS scores."),
    trust_remote_code: bool = shared.trust_remote_code(),
    allow_pickle: bool = shared.allow_pickle(),
) -> None:
    """Score models side by side: a column per model with its 95 % CI, Δ against the first model with its
    paired 95 % CI (* when it excludes 0)."""
    options = {name: value for name, value in locals().items() if name != "show_subsets"}  # = evaluate's keywords
    from sentadapt.api import evaluate

    render_even_if_unsaved(lambda: evaluate(**options, progress=progress_bar, note=note),
                           lambda result: _render(result, show_subsets))


def _render(result: EvalResult, show_subsets: bool = False) -> None:
    """A table per evaluator, the data it came from and, with CIs, how to read them: all on stdout (the footnotes
    belong to the table: `eval ... > scores.txt` keeps them)."""
    for table, line in result.fitted_tables(console.width, show_subsets):
        console.print(draw(table))
        console.print(escape(line), highlight=False)  # wrapped at the terminal's width, as the table is
    if result.bootstrap:
        console.print(escape(result.intervals_note()), highlight=False)
