"""`sentadapt` (the console script) and `python -m sentadapt ...` (also what `accelerate launch -m sentadapt adapt ...`
runs). The stop signals are caught from the first moment, before the command line's modules (typer, rich, torch)
load: Ctrl-C, SIGTERM or SIGUSR1 at any moment of any command ends it with one line and exit 128 + the signal
(130 for Ctrl-C), never a traceback from a half-imported module. Imports nothing heavy itself."""

from __future__ import annotations

import sys

from sentadapt.stopping.process import (
    exit_as_stopped,
    interrupted_line,
    received_signal,
    stop_signals_raise,
    stopped_by_signal,
    was_told,
)


def main() -> None:
    stop_signals_raise()
    try:
        from sentadapt.cli import app

        app()
    except KeyboardInterrupt:  # while the modules load, or while typer builds the command: nothing has started
        stopped(None)
    except SystemExit as done:
        if isinstance(done.code, int) and stopped_by_signal(done.code):
            stopped(done.code)  # typer also turns a KeyboardInterrupt outside the command into a silent exit 130
        raise


def stopped(code: int | None) -> None:
    """End with the one line and 128 + the signal; a command that said its line chose its code (a training run
    stopped by SIGTERM exits 143 through its own handler)."""
    if was_told() and code is not None:
        exit_as_stopped(code)
    sys.stderr.write(f"Error: {interrupted_line()}\n")
    exit_as_stopped(128 + received_signal())


if __name__ == "__main__":
    main()
