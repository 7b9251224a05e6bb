"""What the public calls (sentadapt.api) share with the CLI: the progress and note callbacks, and the range checks
typer makes on the command line, so that a call from Python is refused with the line the CLI prints."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from sentadapt.errors import ConfigError

Note = Callable[[str], None]  # one line for a person (the CLI prints it on stderr)
# (description, total) → a context manager yielding advance(n): the CLI's progress_bar
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


def quiet(_message: str) -> None:
    """The default note: a library call prints nothing."""


@contextmanager
def progress_step(progress: Progress | None, description: str, total: int) -> Iterator[Callable[[int], None] | None]:
    """`progress(description, total)` when the caller gave one (yields its advance), else nothing (yields None)."""
    if progress is None:
        yield None
        return
    with progress(description, total) as advance:
        yield advance


def check_at_least(option: str, value: int | None, minimum: int) -> None:
    """The check typer makes for `min=` options (`--batch-size 0`), with the message the CLI prints."""
    if value is not None and value < minimum:
        raise ConfigError(f"Invalid value for '{option}': Input should be greater than or equal to {minimum}")
