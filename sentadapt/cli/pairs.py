"""`sentadapt pairs`: sentence pairs from your corpus for you to label, spread over the base model's similarity range
(the dev set that decides whether an adapted model is used)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import console, friendly_errors, note, progress_bar
from sentadapt.pairs import PAIRS_SEED

if TYPE_CHECKING:
    from sentadapt.pairs.chosen import ChosenPairs
    from sentadapt.pairs.devset import ProposedPairs

BAR_WIDTH = 30


@friendly_errors
def pairs_command(
    corpus: list[str] = typer.Argument(None, show_default=False,
                                       help="Text files (one sentence per line; .gz, .jsonl/.csv/.tsv with "
                                            "--text-column) or a Hub dataset id: what `adapt` reads."),
    candidates: Path | None = typer.Option(None, "--candidates", help="Choose among these pairs instead of a corpus "
                                           "(.tsv/.csv/.jsonl with sentence1, sentence2; other columns are kept)."),
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
    sample: int = typer.Option(4000, "--sample", help="Sentences drawn from the corpus and encoded "
                                                             "(at least 3·n are)."),
    text_column: str | None = typer.Option(None, "--text-column", help="Column of .jsonl/.csv/.tsv corpora."),
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
    _render_chosen(result) if isinstance(result, ChosenPairs) else _render(result)


def _render(result: ProposedPairs) -> None:
    """How many pairs, the cosine range they cover with the count per bin, where the file is, what to do next."""
    note(f"corpus: {result.corpus.summary()}; {result.sampled} sentences sampled and encoded with {result.model} "
         f"(pooling {result.pooling})")
    edges, counts = result.edges, result.counts
    console.print(f"wrote {len(result)} pairs to label to [bold]{escape(str(result.path))}[/]; base-model cosine "
                  f"{result.cosines.min():.2f} to {result.cosines.max():.2f}, pairs per bin:", highlight=False,
                  soft_wrap=True)
    widest = max(int(counts.max()), 1)
    for index in reversed(range(len(counts))):  # most similar first, as a person reads a histogram of pairs
        bar = "█" * round(BAR_WIDTH * int(counts[index]) / widest)
        console.print(f"  {edges[index]:+.2f} … {edges[index + 1]:+.2f}  {int(counts[index]):4d}  {bar}",
                      highlight=False)
    _print_next(result.next_command)


def _render_chosen(result: ChosenPairs) -> None:
    """How many pairs among how many candidates, chosen how, where the file and its design are, what to do next."""
    how = {"teacher": f"where {result.base} and the teacher {result.guide_model} disagree most",
           "run": f"where the run {result.guide_model} and its base {result.base} disagree most",
           None: "uniformly at random"}[result.guide]
    console.print(f"wrote {len(result)} pairs to label to [bold]{escape(str(result.path))}[/], chosen among "
                  f"{len(result.candidates)} candidates ({escape(result.candidates.source)}) {escape(how)}",
                  highlight=False, soft_wrap=True)
    if result.short_of:
        console.print(f"note: {result.short_of} candidates (5·n) were wanted; the corpus's distinct sentences give "
                      f"{len(result.candidates)} disjoint pairs (each sentence in one pair). Fewer candidates "
                      "leave less room to choose: more text would sharpen the estimate", highlight=False,
                      soft_wrap=True)
    if result.weights is not None:
        console.print(f"each row's weight (1 / its chance of being chosen) runs from {result.weights.min():.2f} to "
                      f"{result.weights.max():.2f}; keep the column: the decision reads it. Design: "
                      f"{escape(str(result.design_path))}", highlight=False, soft_wrap=True)
    _print_next(result.next_command)


def _print_next(command: str) -> None:
    console.print("next: fill in the label column (1 = same meaning, 0 = different, or a score such as 0-5) in "
                  "every row, delete rows you cannot judge, then:", highlight=False, soft_wrap=True)
    console.print(f"  {escape(command)}", highlight=False, soft_wrap=True)
