"""`sentadapt pairs`: sentence pairs from your corpus for you to label, spread over the base model's similarity range
(the dev set that decides whether an adapted model is used)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import friendly_errors, note, progress_bar, say
from sentadapt.pairs import DEFAULT_SAMPLE, PAIRS_SEED


@friendly_errors
def pairs_command(
    corpus: list[str] = typer.Argument(None, show_default=False,
                                       help="Text files (one sentence per line; .gz, .jsonl .csv .tsv .parquet "
                                            "with --text-column), folders of them or a Hub dataset id: what `adapt` "
                                            "reads."),
    candidates: Path | None = typer.Option(None, "--candidates", help="Choose among these pairs instead of a corpus "
                                           "(.tsv .csv .jsonl .parquet: sentence1, sentence2; others are kept)."),
    teacher: str | None = typer.Option(None, "--teacher", help="Before training: choose the pairs where this "
                                       "teacher and the base model disagree (each row gets its weight)."),
    run: Path | None = typer.Option(None, "--run", help="After training: choose the pairs where this run's model "
                                    "and its base disagree; then `sentadapt decide RUN --dev FILE`."),
    base: str | None = typer.Option(None, "--base", show_default=False,
                                    help="The base model you will adapt: folder or Hub id (its cosines spread the "
                                         "pairs; default: named above; with --run, the run's)."),
    n: int = typer.Option(200, "-n", help="Pairs to propose (each sentence is used once: needs 2·n sentences)."),
    output: Path = typer.Option(..., "--output", "-o", help="The file to label: .tsv or .csv."),
    seed: int = typer.Option(PAIRS_SEED, "--seed", help="Seed of the sentence sample and of the pairs chosen."),
    sample: int = typer.Option(DEFAULT_SAMPLE, "--sample", help="Sentences drawn from the corpus and encoded (at "
                                                                "least 3·n are)."),
    text_column: str | None = typer.Option(None, "--text-column", help="Column of .jsonl .csv .tsv .parquet corpora."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --output file."),
    batch_size: int = shared.batch_size(),
    max_length: int | None = shared.max_length(),
    device: str | None = shared.device(),
    trust_remote_code: bool = shared.trust_remote_code(),
    allow_pickle: bool = shared.allow_pickle(),
) -> None:
    """Propose N sentence pairs from your corpus for you to label (1/0 or a score): near-duplicates, borderline
    and unrelated pairs alike, so the dev set can tell a better model from a worse one. Then pass the labelled
    file to `sentadapt adapt --dev FILE` (or `sentadapt eval MODEL --pairs FILE`).

    With --teacher (before training) or --run (after it) the pairs are chosen where the two models disagree, each
    with its weight: a more precise estimate of the Δ from as many labels (docs/decision.md). The default base model is
    sentence-transformers/all-MiniLM-L6-v2, as for `adapt`."""
    from sentadapt.api import ChosenPairs, propose_pairs

    if not corpus and candidates is None:
        raise typer.BadParameter("pass a CORPUS, or --candidates FILE", param_hint="CORPUS")
    result = propose_pairs(corpus or [], base, n, output, seed=seed, sample=sample, batch_size=batch_size,
                           max_length=max_length, device=device, text_column=text_column, overwrite=overwrite,
                           trust_remote_code=trust_remote_code, allow_pickle=allow_pickle, candidates=candidates,
                           teacher=teacher, run=run, progress=progress_bar)
    if not isinstance(result, ChosenPairs):
        note(escape(result.sampled_note()))
    say(result.lines())
