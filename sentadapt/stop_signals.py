"""A stop signal outside a training step (which train/signals.py handles): Ctrl-C (SIGINT), SIGTERM or SIGUSR1
raises KeyboardInterrupt at once, and which signal came is remembered, so that the command ends with one line and
exit 128 + that signal whatever it was doing: importing its modules, loading a model, evaluating, exporting.
Standard library only: installed before anything else loads (sentadapt/__main__.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
_received: list[int] = []  # the last stop signal raised as KeyboardInterrupt
_told: list[bool] = []  # the command printed its error line (cli/_common.friendly_errors)


def _raise(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


def stop_signals_raise() -> None:
    """From now on a stop signal raises KeyboardInterrupt. A signal the parent ignores stays ignored (`nohup`, a
    background job of a non-interactive shell); handlers can only be set from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise)


def pending_signal() -> int:
    """A stop signal already raised as KeyboardInterrupt while the command still runs (0: none): something swallowed
    the interrupt — Python prints and ignores an exception raised inside a finalizer (`__del__`) — so whoever checks
    at a safe point must stop for it."""
    return _received[-1] if _received else 0


def received_signal() -> int:
    """The stop signal that ended the command (SIGINT when KeyboardInterrupt came from elsewhere)."""
    return _received[-1] if _received else signal.SIGINT


def interrupted_line() -> str:
    """What a command stopped by a signal before it finished says, in one line."""
    signum = received_signal()
    if signum == signal.SIGINT:
        return "interrupted (Ctrl-C) before the command finished; run it again"
    return (f"stopped by {signal.Signals(signum).name} (exit code {128 + signum}) before the command finished; "
            "run it again")


def told() -> None:
    """The command has printed its one error line: nothing more is to be said on the way out."""
    _told.append(True)


def was_told() -> bool:
    return bool(_told)


def stopped_by_signal(code: int) -> bool:
    """An exit code that says a stop signal ended the command (128 + one of STOP_SIGNALS)."""
    return code in {128 + signum for signum in STOP_SIGNALS}


def exit_as_stopped(code: int) -> None:
    """End a command stopped by a signal with exit `code` (128 + the signal), at once; returns for any other code.

    Why not `sys.exit(code)`: when the KeyboardInterrupt was raised inside code that Python runs from a string
    (`exec` of a string, as dataclasses and some C extensions do while importing), CPython marks it as unhandled
    for good, and at exit kills its own process with SIGINT whatever exit code was asked for: a job script would
    see -2 (or 130 for a SIGTERM) instead of 143. The command's own cleanup (locks, the run set aside by
    --overwrite) ran before this point; only the interpreter's shutdown is skipped."""
    if not stopped_by_signal(code):
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said there
            stream.flush()
    os._exit(code)
