"""What every command shares: the command and group classes, consoles, one-line errors, progress bars.

The classes: a flag (`--dry-run`) shows no `<bool>` type, as it takes no value; `--flag=true|false` (yes/no, on/off,
1/0), also with the value as the next word, turns it on or leaves it out instead of taking `true` for the corpus (a
file of that name stays a file); the top-level list gives a command's first sentence on one line, not its
docstring's hard line breaks.

Without a terminal — stderr a log file, a pipe, a batch job's output — progress bars and the live training line
draw nothing (rich would fill a log with redraws). Instead a plain line says what is going on every
HEARTBEAT_S seconds of a command (`heartbeat`): the current progress bar's count, the training line's fields, or that
the command is still working. A job's log then never goes quiet for longer than that; a reader sees where it is.
`SENTADAPT_HEARTBEAT_S` sets the interval (the tests set it high, or low to watch it)."""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from sentadapt.errors import ResultNotWritten, SentadaptError
from sentadapt.options import FALSE_WORDS, TRUE_WORDS
from sentadapt.stopping.process import interrupted_line, received_signal, told
from sentadapt.text_tables import Cell, TextTable, fit, min_width, only_numbers, unwrapped
from sentadapt.train.status_line import clock_text

# ------------------------------------------------------------ consoles, one-line errors, progress bars


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
            told(error.exit_code)
            err_console.print(f"[bold red]Error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=error.exit_code) from None
        except KeyboardInterrupt:  # a stop signal outside what the library handles itself: one line, not "Aborted!"
            told(128 + received_signal())
            err_console.print(f"[bold red]Error:[/] {escape(interrupted_line())}", highlight=False, soft_wrap=True)
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
                  show_header=table.show_header, min_width=min(len(table.title), width or console.width))  # title whole
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


# ----------------------------------------------------------------------- the command and group classes


class PlainFlags:
    """Flags (--help, --version, --dry-run) shown without a type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["help"] = unwrapped(kwargs["help"]) if kwargs.get("help") else kwargs.get("help")
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        for param in self.params:  # type: ignore[attr-defined]
            _shown_plain(param)

    def get_help_option(self, ctx: Any) -> Any:
        return _shown_plain(super().get_help_option(ctx))  # type: ignore[misc]


class SentadaptCommand(PlainFlags, TyperCommand):
    # an option whose value may be left out (typer cannot declare one): option → (its value when bare, the value it
    # may be followed by); any other next word is not its value
    optional_values: ClassVar[dict[str, tuple[str, str]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.help and not self.short_help:
            self.short_help = first_sentence(self.help)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        flags = {name for param in self.params if _is_flag(param) for name in param.opts}
        out: list[str] = []
        index = 0
        while index < len(args):
            arg, following = args[index], args[index + 1] if index + 1 < len(args) else ""
            name, equals, value = arg.partition("=")
            if arg == "--":
                out += args[index:]
                break
            if arg in self.optional_values and following != self.optional_values[arg][1]:
                out.append(f"{arg}={self.optional_values[arg][0]}")
            elif equals and name in flags:
                out += _flag_value(name, value)
            elif arg in flags and following.lower() in TRUE_WORDS | FALSE_WORDS and not Path(following).exists():
                out += _flag_value(arg, following)
                index += 1
            else:
                out.append(arg)
            index += 1
        return super().parse_args(ctx, out)


class SentadaptGroup(PlainFlags, TyperGroup):
    """`sentadapt` and `sentadapt cache`."""


def _is_flag(param: Any) -> bool:  # an on/off option without a --no- form (typer's bool options)
    return bool(getattr(param, "is_flag", False)) and not getattr(param, "secondary_opts", None)


def _shown_plain(param: Any) -> Any:
    if param is not None and _is_flag(param):
        param.metavar = ""  # typer shows no type for an empty metavar
    return param


def _flag_value(flag: str, value: str) -> list[str]:
    if value.lower() in TRUE_WORDS | FALSE_WORDS:
        return [flag] if value.lower() in TRUE_WORDS else []
    raise typer.BadParameter(f"a flag takes no value ('{value}'); write {flag} to turn it on, or leave it out",
                             param_hint=f"'{flag}'")


def first_sentence(text: str) -> str:  # the help's first sentence (of its first paragraph), on one line
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.;])(\s|$)", paragraph)
    return (match.group(1) if match else paragraph).rstrip(";.") + "."
