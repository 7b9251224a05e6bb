"""What every command shares: consoles, one-line errors, progress bars."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from sentadapt.errors import ResultNotWritten, SentadaptError
from sentadapt.tables import TextTable

TONES = {"good": "green", "bad": "red", "dim": "dim", "strong": "bold", "best": "bold green", "warn": "yellow"}

console = Console()  # results (stdout)
err_console = Console(stderr=True)  # progress, notes and errors (stderr), so stdout stays pipeable

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
INTERRUPTED = "interrupted (Ctrl-C) before the command finished; run it again"
INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, the shell's convention


def friendly_errors(command: F) -> F:
    """Turn SentadaptError into `Error: ...` on one line and a non-zero exit; bugs keep their traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except SentadaptError as error:
            # escaped: messages quote user text and names like [CLS] or 'sentadapt[plot]', which are not markup
            err_console.print(f"[bold red]Error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=error.exit_code) from None
        except KeyboardInterrupt:  # Ctrl-C outside what the library handles itself: one line, not click's "Aborted!"
            err_console.print(f"[bold red]Error:[/] {INTERRUPTED}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=INTERRUPTED_EXIT_CODE) from None

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
    if not err_console.is_terminal:
        yield lambda _n: None
        return
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=True,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def note(message: str) -> None:
    err_console.print(message, highlight=False, soft_wrap=True)


def draw(table: TextTable, width: int | None = None) -> Table:
    """A library table (sentadapt.tables) as a rich Table: tones become colours; cell text is never markup.

    Numbers are never cut: a number column (right-aligned) is as wide as its widest cell. When the table is wider
    than the terminal (`width`, default the console's), the names give way instead: an interval moves under its
    value ("76.04" above "[72.10, 80.00]") and a long name in a number column's header (a model's path) is shortened
    to its last path components or an ellipsis in the middle; label columns wrap."""
    width = width or console.width
    headers = [column.header for column in table.columns]
    texts = [[cell.text for cell in row.cells] for row in table.rows]
    numbers = [column.right for column in table.columns]
    shortened = False
    if _natural_width(headers, texts) > width:
        texts = [[_interval_below(text) if numbers[i] else text for i, text in enumerate(row)] for row in texts]
        share = _name_share(headers, texts, numbers, width)
        headers = [_shorten_header(header, max(_widest(texts, i), share)) if numbers[i] else header
                   for i, header in enumerate(headers)]
        shortened = True
    drawn = Table(title=escape(table.title), caption=escape(table.caption) if table.caption else None,
                  show_header=table.show_header)
    for index, column in enumerate(table.columns):
        # a whole column is as wide as its widest cell, a number column as its widest number (a sparkline may
        # fold); rich narrows the other columns to fit
        widest = _widest(texts, index, numbers_only=not column.whole) if column.whole or column.right else None
        if widest is not None and shortened:  # the shortened name fits on its line(s) above the numbers
            widest = max(widest, *(len(line) for line in headers[index].split("\n")))
        drawn.add_column(escape(headers[index]), justify="right" if column.right else "left",
                         overflow="fold" if column.fold or column.right else "ellipsis", no_wrap=column.whole,
                         min_width=widest)
    for row, row_texts in zip(table.rows, texts):
        cells = [f"[{TONES[c.tone]}]{escape(text)}[/]" if c.tone else escape(text)
                 for c, text in zip(row.cells, row_texts)]
        drawn.add_row(*cells, style=TONES.get(row.tone), end_section=row.section_end)
    return drawn


NAME_FLOOR = 8  # a shortened name keeps at least this many characters, however narrow its numbers
LABEL_SHARE = 24  # a label column (a figure's name) is counted this wide when names share the width left


NUMBER = re.compile(r"[-+−\d.,\[\]\s*★—%]*")  # a value, an interval, a Δ with its * or ★ (not a sparkline)


def _widest(texts: list[list[str]], index: int, numbers_only: bool = False) -> int:
    return max((len(line) for row in texts if index < len(row) for line in row[index].split("\n")
                if not numbers_only or NUMBER.fullmatch(line)), default=0)


def _natural_width(headers: list[str], texts: list[list[str]]) -> int:
    """The width rich needs for the table unwrapped: each column's widest line, its padding and a rule."""
    widths = [max(max((len(line) for line in header.split("\n")), default=0), _widest(texts, index))
              for index, header in enumerate(headers)]
    return sum(widths) + 3 * len(widths) + 1


def _interval_below(text: str) -> str:
    """"76.04 [72.10, 80.00]" → the value, then its interval on the next line (both whole)."""
    value, sep, interval = text.partition(" [")
    return f"{value}\n[{interval}" if sep else text


def _name_share(headers: list[str], texts: list[list[str]], numbers: list[bool], width: int) -> int:
    """How wide a number column's name may be: the terminal's width left after the padding and the label columns
    (each counted at most LABEL_SHARE wide: they wrap), shared by the number columns; at least NAME_FLOOR."""
    labels = sum(min(_widest(texts, i), LABEL_SHARE) for i, number in enumerate(numbers) if not number)
    left = width - 3 * len(headers) - 1 - labels
    return max(NAME_FLOOR, left // max(1, sum(numbers)))


def _shorten_header(header: str, limit: int) -> str:
    """The header's name (its longest line: a model's path) shortened; a short label beside it ("norm",
    "[mean]") is kept as it is."""
    lines = header.split("\n")
    longest = max(lines, key=len)
    return "\n".join(shorten_name(line, limit) if line is longest else line for line in lines)


def shorten_name(name: str, limit: int) -> str:
    """A name (a model's path) in at most `limit` characters: its last path components ("…/runs/x"), else the
    last component with an ellipsis in the middle ("parap…l3-v2"). Names are shortened, never numbers."""
    if len(name) <= limit:
        return name
    parts = [part for part in name.replace("\\", "/").split("/") if part]
    for count in range(len(parts) - 1, 0, -1):
        tail = "…/" + "/".join(parts[-count:])
        if len(tail) <= limit:
            return tail
    last = parts[-1] if parts else name
    if len(last) <= limit:
        return last
    keep = limit - 1
    return last[: (keep + 1) // 2] + "…" + last[len(last) - keep // 2:]
