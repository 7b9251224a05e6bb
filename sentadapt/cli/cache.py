"""`sentadapt cache info|clear`: where the corpus and embedding caches are, how big, and removing them."""

from __future__ import annotations

import typer
from rich.markup import escape

from sentadapt.cli._common import SentadaptCommand, SentadaptGroup, console, draw, friendly_errors, note

app = typer.Typer(help="The on-disk cache: prepared corpora, frozen embeddings, CPU timings ($SENTADAPT_CACHE).",
                  no_args_is_help=True, cls=SentadaptGroup)


@app.command("info", cls=SentadaptCommand)
@friendly_errors
def info() -> None:
    """Where the cache is, each entry, what it holds and its size."""
    from sentadapt.data.cache_contents import cache_entries, cache_summary, cache_table

    if entries := cache_entries():
        console.print(draw(cache_table(entries)))
    console.print(escape(cache_summary(entries)), highlight=False)


@app.command("clear", cls=SentadaptCommand)
@friendly_errors
def clear() -> None:
    """Remove every prepared corpus, cached embedding and CPU timing (they are rebuilt when next needed)."""
    from sentadapt.data.cache_contents import clear_cache, cleared_line

    note(cleared_line(*clear_cache()))
