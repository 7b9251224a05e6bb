"""`sentadapt eval`: STS12–16, STS-B, SICK-R and your own pairs, reranking and retrieval sets, with 95 % CIs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import console, draw, friendly_errors, note, progress_bar, render_even_if_unsaved
from sentadapt.cli.shared_options import Option
from sentadapt.evaluation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, STS_AGGREGATE
from sentadapt.options import TEST_SPLIT, VECTOR_DTYPE

if TYPE_CHECKING:
    from sentadapt.evaluation.evaluate import EvalResult

OPTIONS = (  # sentadapt.evaluate's keywords, and the rendering's --subsets
    Option("models", list[str], ..., "Model folders, run directories or Hub ids (several → compared).", argument=True),
    Option("sts", str | None, None, "'all' or a comma list of tasks (sts12, sts13, sts14, sts15, sts16, stsb, "
           "sickr). Default: all (unless a task file is given)."),
    Option("data_dir", Path | None, None, "Folder of STS JSON Lines files (stsb.test.jsonl, ...). Default: MTEB "
           "datasets on the Hub (online).", typer={"envvar": "SENTADAPT_DATA_DIR"}),
    Option("pairs", list[Path], (), "Your pairs (.tsv .csv .jsonl .parquet): sentence1, sentence2 and score (STS: "
           "Spearman) or label 0/1 (pair classification: AP, F1, accuracy). Repeatable."),
    Option("rerank", list[Path], (), 'Reranking JSON Lines {"query", "positive": [...], "negative": [...]} (or '
           '"candidates" + "positive"): MAP, MRR@10, nDCG@10. Repeatable.'),
    Option("retrieval", list[Path], (), "BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv): nDCG@10, "
           "MRR@10, Recall@10/@100, MAP@100. Repeatable."),
    Option("task", str | None, None, "Force the task type of the --pairs files: sts | pair-classification."),
    Option("split", str, TEST_SPLIT, "test | dev (STS: STS-B and SICK-R only; retrieval: qrels/SPLIT.tsv)."),
    Option("aggregate", str, STS_AGGREGATE, "STS: all (one correlation per task) | mean | wmean of subsets."),
    Option("bootstrap", int, BOOTSTRAP_RESAMPLES, "Resamples for each model's 95 % percentile CI (and a Δ of "
           "best-threshold F1/accuracy). 0 = no CIs.", typer={"min": 0}),
    Option("seed", int, BOOTSTRAP_SEED, "Seed of the bootstrap resamples."),
    Option("cache_embeddings", bool, False, "Keep each model's vectors on disk ($SENTADAPT_CACHE), keyed by its "
           "weights, pooling, max length and the texts (large corpora)."),
    Option("pooling", str | None, None, "Override pooling: cls | mean | max | last2avg | firstlast | lasttoken."),
    Option("prompt", str | None, None, "Prompt name (or none) for both sentences of --pairs and STS. Default: the "
           "model's default_prompt_name."),
    Option("query_prompt", str | None, None, "Prompt name (or none) for reranking and retrieval queries. Default: "
           "the model's 'query' prompt."),
    Option("document_prompt", str | None, None, "Prompt name (or none) for reranking candidates and retrieval "
           "documents. Default: the model's 'document', 'passage' or 'corpus' prompt."),
    shared.batch_size(),
    shared.MAX_LENGTH,
    Option("dtype", str, VECTOR_DTYPE, "fp32 | bf16 | fp16: bf16/fp16 encode with a copy of the weights cast once "
           "to that type (pooling in fp32; faster on GPUs). fp16 needs CUDA; on the CPU use bf16."),
    shared.DEVICE,
    Option("dims", str | None, None, "Also score at these sizes (each vector's prefix, as truncate_dim), e.g. "
           "384,192,96: a row each, Δ against the first model's whole."),
    Option("quantize", str | None, None, "Also at these precisions: none,int8,binary (quantize_embeddings; binary "
           "by Hamming distance)."),
    Option("calibration", Path | None, None, "int8 ranges from these sentences (one per line, a sample of your "
           "corpus). Default: the evaluated sentences."),
    Option("json_out", Path | None, None, "Also write the results (with CIs) as JSON here.", ("--json",)),
    Option("show_subsets", bool, False, "Also print per-subset STS scores.", ("--subsets",), renders=True),
    *shared.SAFETY,
)


@friendly_errors
def eval_command(**options: Any) -> None:
    """Score models side by side: a column per model with its 95 % CI, Δ against the first model with its
    paired 95 % CI (* when it excludes 0)."""
    from sentadapt.api import evaluate

    keywords, rendering = shared.split(options, OPTIONS)
    render_even_if_unsaved(lambda: evaluate(**keywords, progress=progress_bar, note=note),
                           lambda result: _render(result, **rendering))


eval_command.__signature__ = shared.signature(OPTIONS)  # type: ignore[attr-defined]


def _render(result: EvalResult, show_subsets: bool = False) -> None:
    """A table per evaluator, the data it came from and, with CIs, how to read them: all on stdout (the footnotes
    belong to the table: `eval ... > scores.txt` keeps them)."""
    for table, line in result.fitted_tables(console.width, show_subsets):
        console.print(draw(table))
        console.print(escape(line), highlight=False)  # wrapped at the terminal's width, as the table is
    if result.bootstrap:
        console.print(escape(result.intervals_note()), highlight=False)
