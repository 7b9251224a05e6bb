"""A stop signal outside a training step (which stopping/training.py handles): Ctrl-C (SIGINT), SIGTERM or SIGUSR1
raises KeyboardInterrupt at once, and which signal came is remembered, so that the command ends with one line and
exit 128 + that signal whatever it was doing: importing its modules, loading a model, evaluating, exporting.
A signal that comes while a module is being imported waits until the import returns: a KeyboardInterrupt raised in
Python code that a C++ extension runs while it initialises (torch.distributed's `_c10d_init`) aborts the whole
process ("terminate called after throwing an instance of 'pybind11::error_already_set'", exit -6), and a
half-imported module breaks whatever runs on the way out. Standard library only: installed before anything else
loads (sentadapt/__main__.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
_received: list[int] = []  # the last stop signal raised as KeyboardInterrupt
_told: list[bool] = []  # the command printed its error line (cli/_common.friendly_errors)
# How often a signal held back during an import is sent again to see whether the import has returned, and how long it
# may wait: torch imports in 1-3 s on 2 cores; an import still running after 10 s (a hung filesystem) is interrupted.
RETRY_S, WAIT_AT_MOST_S = 0.05, 10.0


class _HeldBack:
    """The stop signal held back while a module imports (0: none), since when, whether a resend is scheduled and
    when the last one was sent (a chain of resends is one hold; one that was not continued is over)."""

    signum = 0
    since = 0.0
    resend_scheduled = False
    sent_at = 0.0
    raised = 0  # the last stop signal raised as KeyboardInterrupt by any stop handler


def _raise(signum: int, frame: FrameType | None) -> None:
    interrupt(signum, frame, remember=True)


def interrupt(signum: int, frame: FrameType | None, remember: bool = False) -> None:
    """Raise KeyboardInterrupt for the stop signal `signum` (`remember`: as the command's stop, pending_signal),
    unless `frame` is inside an import: then the signal is held and sent again every RETRY_S until the import has
    returned (or WAIT_AT_MOST_S has passed), and whichever handler is installed by then acts on it. Every stop
    handler that raises calls this."""
    if _importing(frame) and _hold(signum):
        return
    _HeldBack.signum, _HeldBack.raised = 0, signum
    if remember:
        _received.append(signum)
    raise KeyboardInterrupt


def _hold(signum: int) -> bool:
    """Hold `signum` and send it again in RETRY_S; False when it has been held for WAIT_AT_MOST_S already."""
    now = time.monotonic()
    if not (_HeldBack.signum and (_HeldBack.resend_scheduled or now - _HeldBack.sent_at < 1.0)):
        _HeldBack.since = now  # a new hold
    elif now - _HeldBack.since >= WAIT_AT_MOST_S:
        return False
    _HeldBack.signum = signum
    _resend_later()
    return True


def _importing(frame: FrameType | None) -> bool:
    """Whether `frame` runs inside an import (importlib's frames are on its stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _resend_later() -> None:
    """Send the held-back signal again in RETRY_S: its handler then runs again, after the import if it has returned.
    One resend scheduled at a time (a second Ctrl-C meanwhile changes nothing), none once the signal was acted on."""
    if _HeldBack.resend_scheduled:
        return

    def resend() -> None:
        _HeldBack.resend_scheduled = False
        if _HeldBack.signum:
            _HeldBack.sent_at = time.monotonic()
            os.kill(os.getpid(), _HeldBack.signum)

    _HeldBack.resend_scheduled = True
    timer = threading.Timer(RETRY_S, resend)
    timer.daemon = True
    timer.start()


def stop_signals_raise() -> None:
    """From now on a stop signal raises KeyboardInterrupt. A signal the parent ignores stays ignored (`nohup`, a
    background job of a non-interactive shell); handlers can only be set from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    sys.unraisablehook = _quiet_about_interrupts(sys.unraisablehook)
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise)


def _quiet_about_interrupts(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """`hook`, except for a KeyboardInterrupt raised inside a finalizer or a weakref callback, where Python cannot
    raise it and would print "Exception ignored in ..." with a traceback and carry on: the signal is sent again
    instead (RETRY_S later), and raised where it can be."""

    def quiet(unraisable: Any) -> object:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            return hook(unraisable)
        _hold(_HeldBack.raised or signal.SIGINT)
        return None

    return quiet


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Stop signals wait while a few statements must run all or none (a lock file created and its pid written): one
    that comes meanwhile is noted and sent again once they have run, to the handler that was there before. Handlers
    and not the thread's signal mask: torch's worker threads would take a signal the main thread blocks, and Python
    runs every handler in the main thread anyway. A no-op off the main thread, where handlers cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: came.append(signum)) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():  # None: a handler set outside Python; the default stands in
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if came:
            signal.raise_signal(came[0])


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


def told(code: int = 1) -> None:
    """The command prints its one error line now and exits with `code`: nothing more is to be said on the way out.
    Ending for a stop signal (128 + N), it ignores any later one: a third Ctrl-C while it exits changes nothing
    (without this, one landing after the line killed the interpreter mid-exit: exit status -2 instead of 130).
    Handlers: the main thread's only."""
    _told.append(True)
    if stopped_by_signal(code) and threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


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
