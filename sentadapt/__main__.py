"""`sentadapt` (the console script) and `python -m sentadapt ...` (also what `accelerate launch -m sentadapt adapt ...`
runs). The stop signals are caught from the first moment, before the command line's modules (typer, rich, torch)
load: Ctrl-C, SIGTERM or SIGUSR1 at any moment of any command ends it with one line and exit 128 + the signal
(130 for Ctrl-C), never a traceback from a half-imported module. Imports nothing heavy itself."""

from __future__ import annotations

import sys

from sentadapt.stopping import exit_as_stopped, interrupted_line, received_signal, stop_signals_raise


def main() -> None:
    stop_signals_raise()
    try:
        from sentadapt.cli import main as command_line
    except KeyboardInterrupt:  # while the command line's modules load: nothing has started yet
        sys.stderr.write(f"Error: {interrupted_line()}\n")
        exit_as_stopped(128 + received_signal())
    try:
        command_line()
    except SystemExit as done:
        if isinstance(done.code, int):
            exit_as_stopped(done.code)  # returns unless the command was stopped by a signal
        raise


if __name__ == "__main__":
    main()
