"""What every command shares: consoles, one-line errors, progress bars."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from sentadapt.cli.heartbeat import activity, heartbeat
from sentadapt.errors import ResultNotWritten, SentadaptError
from sentadapt.stopping.process import interrupted_line, received_signal, told
from sentadapt.text_tables import Cell, TextTable, fit, min_width, only_numbers

TONES = {"good": "green", "bad": "red", "dim": "dim", "strong": "bold", "best": "bold green", "warn": "yellow"}

console = Console()  # results (stdout)
err_console = Console(stderr=True)  # progress, notes and errors (stderr), so stdout stays pipeable

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


def friendly_errors(command: F) -> F:
    """Turn SentadaptError into `Error: ...` on one line and a non-zero exit; bugs keep their traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with heartbeat(err_console):  # without a terminal: a plain line every 20 s of long work
                return command(*args, **kwargs)
        except SentadaptError as error:
            # escaped: messages quote user text and names like [CLS] or 'sentadapt[plot]', which are not markup
            err_console.print(f"[bold red]Error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
            told()
            raise typer.Exit(code=error.exit_code) from None
        except KeyboardInterrupt:  # a stop signal outside what the library handles itself: one line, not "Aborted!"
            err_console.print(f"[bold red]Error:[/] {escape(interrupted_line())}", highlight=False, soft_wrap=True)
            told()
            raise typer.Exit(code=128 + received_signal()) from None

    return wrapper  # type: ignore[return-value]


def render_even_if_unsaved(call: Callable[[], R], render: Callable[[R], None]) -> None:
    """Run the command's library call and render its result. When the work finished but its file could not be
    written, the result is still rendered first; the error line follows (friendly_errors prints it)."""
    try:
        result = call()
    except ResultNotWritten as error:
        render(error.result)  # type: ignore[arg-type]
        raise
    render(result)


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A transient progress bar on stderr; yields `advance(n)`. Not drawn when stderr is not a terminal (logs,
    pipes), where rich would leave an empty line behind."""
    if not err_console.is_terminal:  # the heartbeat says how far it got, every 20 s
        done = [0]

        def advance(n: int) -> None:
            done[0] += n

        with activity(lambda: f"{description}: {done[0]:,}/{total:,} ({100 * done[0] / max(total, 1):.0f} %)"):
            yield advance
        return
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=True,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def note(message: str) -> None:
    err_console.print(message, highlight=False, soft_wrap=True)


def say(lines: list[str] | list[Cell]) -> None:
    """A result's lines on stdout, as they are (never markup), a Cell's tone as its colour."""
    for line in lines:
        text, tone = (line.text, line.tone) if isinstance(line, Cell) else (line, "")
        console.print(f"[{TONES[tone]}]{escape(text)}[/]" if tone else escape(text), highlight=False, soft_wrap=True)


def draw(table: TextTable, width: int | None = None) -> Table:
    """A library table (sentadapt.text_tables) as a rich Table: tones become colours; cell text is never markup.
    Fitted to the terminal (`width`, default the console's) by `fit`: names give way, numbers are never cut (a
    column of numbers never wraps, so rich narrows the labels, not every column evenly, which cut a Δ's bracket)."""
    fitted = fit(table, width or console.width)
    drawn = Table(title=escape(table.title), caption=escape(table.caption) if table.caption else None,
                  show_header=table.show_header)
    for index, column in enumerate(fitted.columns):
        drawn.add_column(escape(column.header), justify="right" if column.right else "left",
                         overflow="fold" if column.fold or column.right else "ellipsis",
                         no_wrap=column.whole or (column.right and only_numbers(fitted, index)),
                         min_width=min_width(fitted, index, fitted is not table))
    for row in fitted.rows:
        cells = [f"[{TONES[c.tone]}]{escape(c.text)}[/]" if c.tone else escape(c.text) for c in row.cells]
        drawn.add_row(*cells, style=TONES.get(row.tone), end_section=row.section_end)
    return drawn
