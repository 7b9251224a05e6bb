"""`sentadapt cache info|clear`: where the corpus and embedding caches are, how big, and removing them."""

from __future__ import annotations

import typer
from rich.table import Table

from sentadapt.cli._common import console, friendly_errors, note
from sentadapt.cli.command import SentadaptCommand, SentadaptGroup

app = typer.Typer(help="The on-disk cache of prepared corpora and frozen embeddings ($SENTADAPT_CACHE).",
                  no_args_is_help=True, cls=SentadaptGroup)


@app.command("info", cls=SentadaptCommand)
@friendly_errors
def info() -> None:
    """Where the cache is, each entry and its size."""
    from sentadapt.data.prepare import cache_dir, cache_entries

    entries = cache_entries()
    table = Table(title=f"sentadapt cache: {cache_dir()}")
    table.add_column("kind")
    table.add_column("entry")
    table.add_column("size", justify="right")
    for entry in entries:
        table.add_row(entry.kind, entry.path.name, _size(entry.bytes))
    if entries:
        console.print(table)
    total = sum(entry.bytes for entry in entries)
    console.print(f"{len(entries)} entries, {_size(total)} in {cache_dir()} (set $SENTADAPT_CACHE to move it; "
                  "`sentadapt cache clear` removes it)", highlight=False)


@app.command("clear", cls=SentadaptCommand)
@friendly_errors
def clear() -> None:
    """Remove every prepared corpus and cached embedding (they are rebuilt when next needed)."""
    from sentadapt.data.prepare import cache_dir, clear_cache

    count, size = clear_cache()
    note(f"removed {count} entries ({_size(size)}) from {cache_dir()}")


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000  # type: ignore[assignment]
    return f"{count} B"  # pragma: no cover
