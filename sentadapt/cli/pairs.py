"""`sentadapt pairs`: sentence pairs from your corpus for you to label, spread over the base model's similarity range
(the dev set that decides whether an adapted model is used)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import friendly_errors, note, progress_bar, say
from sentadapt.cli.shared_options import Option
from sentadapt.pairs import DEFAULT_SAMPLE, PAIRS_SEED

OPTIONS = (  # sentadapt.propose_pairs's keywords
    Option("corpus", list[str], None, "Text files (one sentence per line; .gz, .jsonl .csv .tsv .parquet with "
           "--text-column), folders of them or a Hub dataset id: what `adapt` reads. With --run: the run's.",
           argument=True, typer={"show_default": False}),
    Option("candidates", Path | None, None, "Choose among these pairs instead of a corpus (.tsv .csv .jsonl "
           ".parquet: sentence1, sentence2; others are kept)."),
    Option("teacher", str | None, None, "Before training: choose the pairs where this teacher and the base model "
           "disagree (each row gets its weight)."),
    Option("run", Path | None, None, "After training: choose the pairs where this run's model and its base "
           "disagree; then `sentadapt decide RUN --dev FILE`."),
    Option("model", str | None, None, "The base model you will adapt: folder or Hub id (its cosines spread the "
           "pairs; default: named above; with --run, the run's).", ("--base",), typer={"show_default": False}),
    Option("n", int, 200, "Pairs to propose (each sentence is used once: needs 2·n sentences).", ("-n",)),
    Option("output", Path, ..., "The file to label: .tsv or .csv.", ("--output", "-o")),
    Option("seed", int, PAIRS_SEED, "Seed of the sentence sample and of the pairs chosen."),
    Option("sample", int, DEFAULT_SAMPLE, "Sentences drawn from the corpus and encoded (at least 3·n are)."),
    Option("text_column", str | None, None, "Column of .jsonl .csv .tsv .parquet corpora."),
    Option("overwrite", bool, False, "Replace an existing --output file."),
    shared.batch_size(),
    shared.MAX_LENGTH,
    shared.DEVICE,
    *shared.SAFETY,
)


@friendly_errors
def pairs_command(**options: Any) -> None:
    """Propose N sentence pairs from your corpus for you to label (1/0 or a score): near-duplicates, borderline
    and unrelated pairs alike, so the dev set can tell a better model from a worse one. Then pass the labelled
    file to `sentadapt adapt --dev FILE` (or `sentadapt eval MODEL --pairs FILE`).

    With --teacher (before training) or --run (after it) the pairs are chosen where the two models disagree, each
    with its weight: a more precise estimate of the Δ from as many labels (docs/decision.md). The default base model is
    sentence-transformers/all-MiniLM-L6-v2, as for `adapt`."""
    from sentadapt.api import ChosenPairs, propose_pairs

    if not options["corpus"] and options["candidates"] is None and options["run"] is None:
        raise typer.BadParameter("pass a CORPUS, or --candidates FILE", param_hint="CORPUS")
    result = propose_pairs(**{**options, "corpus": options["corpus"] or []}, progress=progress_bar)
    if not isinstance(result, ChosenPairs):
        note(escape(result.sampled_note()))
    say(result.lines())


pairs_command.__signature__ = shared.signature(OPTIONS)  # type: ignore[attr-defined]
