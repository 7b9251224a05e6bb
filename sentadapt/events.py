"""The callbacks through which the library reports what happens, defined once for every module: the library prints
nothing (only `cli/` talks to the terminal), so a long step takes a `Progress` and a message takes a `Note`.

    note("corpus cache: hit")                          # one line for a person (the CLI prints it on stderr)
    with progress("tokenizing", total) as advance:     # the CLI's progress_bar; the API's default shows nothing
        advance(n)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

Note = Callable[[str], None]
Advance = Callable[[int], None]  # advance(n): n more units done
Progress = Callable[[str, int], AbstractContextManager[Advance]]  # (description, total) → yields advance


def quiet(_message: str) -> None:
    """The default note: a library call prints nothing."""


def _ignore(_done: int) -> None:
    return None


@contextmanager
def no_progress(_description: str, _total: int) -> Iterator[Advance]:
    """A `Progress` that shows nothing, for code that always advances a bar."""
    yield _ignore


@contextmanager
def progress_step(progress: Progress | None, description: str, total: int) -> Iterator[Advance | None]:
    """`progress(description, total)` when the caller gave one (yields its advance), else nothing (yields None):
    for code that skips the per-item bookkeeping when nobody watches."""
    if progress is None:
        yield None
        return
    with progress(description, total) as advance:
        yield advance
