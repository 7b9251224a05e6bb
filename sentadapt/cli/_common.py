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

from sentadapt.errors import SentadaptError

console = Console()  # results (stdout)
err_console = Console(stderr=True)  # progress, notes and errors (stderr), so stdout stays pipeable

F = TypeVar("F", bound=Callable[..., Any])


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

    return wrapper  # type: ignore[return-value]


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
