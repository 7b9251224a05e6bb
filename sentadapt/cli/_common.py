"""What every command shares: consoles, one-line errors, progress bars.

Without a terminal — stderr a log file, a pipe, a batch job's output — progress bars and the live training line
draw nothing (rich would fill a log with redraws). Instead a plain line says what is going on every
HEARTBEAT_S seconds of a command (`heartbeat`): the current progress bar's count, the training line's fields, or that
the command is still working. A job's log then never goes quiet for longer than that; a reader sees where it is.
`SENTADAPT_HEARTBEAT_S` sets the interval (the tests set it high, or low to watch it)."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from sentadapt.errors import ResultNotWritten, SentadaptError
from sentadapt.stopping.process import interrupted_line, received_signal, told
from sentadapt.text_tables import Cell, TextTable, fit, min_width, only_numbers
from sentadapt.train.status_line import clock_text

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


# ------------------------------------------------------------------- the heartbeat, without a terminal


HEARTBEAT_S = 20.0  # under 30 s: a log shows a line at least every half minute of long work
Describe = Callable[[], str]


def heartbeat_seconds() -> float:
    value = os.environ.get("SENTADAPT_HEARTBEAT_S", "")
    return float(value) if value.replace(".", "", 1).isdigit() else HEARTBEAT_S


class Heartbeat:
    """A daemon thread that prints the current activity's description every `every` seconds."""

    def __init__(self, console: Console, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.console, self.every, self.clock = console, every, clock
        self.started = clock()
        self.activities: list[Describe] = []  # innermost last
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="sentadapt-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def line(self) -> str:
        if self.activities:
            return self.activities[-1]()
        return f"still working ({clock_text(self.clock() - self.started)} since the command started)"

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.console.print(self.line(), highlight=False, soft_wrap=True)
            except Exception:  # a line that cannot be described or printed must not kill the command
                continue


_current: list[Heartbeat] = []


@contextmanager
def heartbeat(console: Console) -> Iterator[None]:
    """For the command's duration, when `console` is not a terminal."""
    if console.is_terminal or _current:
        yield
        return
    beat = Heartbeat(console, heartbeat_seconds())
    _current.append(beat)
    beat.start()
    try:
        yield
    finally:
        beat.stop()
        _current.remove(beat)


@contextmanager
def activity(describe: Describe) -> Iterator[None]:
    """What the heartbeat says while the block runs (nothing happens without a heartbeat)."""
    if not _current:
        yield
        return
    beat = _current[-1]
    beat.activities.append(describe)
    try:
        yield
    finally:
        if describe in beat.activities:
            beat.activities.remove(describe)
