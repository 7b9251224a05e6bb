"""Without a terminal — stderr a log file, a pipe, a batch job's output — progress bars and the live training line
draw nothing (rich would fill a log with redraws). Instead a plain line says what is going on every
HEARTBEAT_S seconds of a command: the current progress bar's count, the training line's fields, or that the
command is still working. A job's log then never goes quiet for longer than that; a reader sees where it is.

`SENTADAPT_HEARTBEAT_S` sets the interval (the tests set it high, or low to watch it)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

from sentadapt.train.status_line import clock_text

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
