"""Stopping a run on request: Ctrl-C (SIGINT) and the signals schedulers send before they kill a job.

SLURM (`--signal`, preemption, time limits) and Kubernetes (pod deletion, node drain) send SIGTERM, or
SIGUSR1 where configured, then SIGKILL after a grace period. Every one of them is handled as Ctrl-C is:
the first asks the loop to finish the current optimizer step, write a checkpoint and exit; a second one
stops at once. The process exits with 128 + the signal number, the shell's convention for "ended by
signal N" (130 for SIGINT, 143 for SIGTERM, 138 for SIGUSR1), so a job script can tell a preempted run
(checkpoint written, resume it) from a failed one (exit 1 or 2).

The handler only sets a flag. The loop reads it at step boundaries through `StopRequest.agreed`, which
combines the flags of all processes: ranks stop at the same step even when only one got the signal.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from sentadapt.errors import SentadaptError
from sentadapt.stopping.process import STOP_SIGNALS, interrupt, pending_signal

# The signals that ask for a clean stop (sentadapt.stopping.process: the same ones outside a run), in the order a
# combined request is named by (highest number wins).


def exit_code_for(signum: int) -> int:
    """128 + the signal number: what a shell reports for a process ended by that signal."""
    return 128 + signum


class TrainingInterrupted(SentadaptError):
    """Stopped on request (Ctrl-C, SIGTERM, SIGUSR1): a checkpoint was written; the message says how to resume."""

    exit_code = exit_code_for(signal.SIGINT)

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = exit_code_for(signum)

    def resuming(self, trained: Path, output: Path, prefix: str = "") -> TrainingInterrupted:
        """The same stop, saying to resume `output` where it said `trained`: a staged run or a `--recipe auto` run
        goes on from its own folder, not from the stage or the candidate that was training (resumed alone, a stage
        would train on as a run of its own, inside itself)."""
        message = str(self).replace(f"--resume --output {trained}", f"--resume --output {output}")
        return TrainingInterrupted(prefix + message, self.signum)


class StopAtStepBoundary(KeyboardInterrupt):
    """The loop's own stop, raised at a step boundary on a request: the state is exactly a step's, so the loop writes
    a checkpoint. Any other KeyboardInterrupt in a step (a second signal, mid-step or mid-evaluation) stops at once
    and writes nothing: the model, the optimizer and the RNG are part-way through a step, and saved under the last
    step's number they would rewrite a complete checkpoint with a state no uninterrupted run passes through."""


def describe(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class _SignalHandlers:
    """The stop signals' handlers installed (main thread only: signal.signal refuses elsewhere) while the `with`
    block runs, the previous ones put back after; `signum` is the signal received (0: none)."""

    def __init__(self) -> None:
        self.signum = 0
        self._previous: dict[int, Any] = {}

    def _install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        raise NotImplementedError


class StopRequest(_SignalHandlers):
    """Catch the stop signals for the duration of a `with` block; `signum` is the first one received (0: none).

    Handlers can only be installed from the main thread; elsewhere (a run started from a worker thread)
    the block catches nothing and training cannot be stopped by signal.
    """

    def __init__(self, on_first: Callable[[str], None]) -> None:
        super().__init__()
        self._on_first = on_first

    def __enter__(self) -> StopRequest:
        self.signum = 0
        self._install()
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum:
            interrupt(signum, frame)  # the second request: stop at once (once an import under way has returned)
            return
        self.signum = signum
        if signum == signal.SIGINT:
            self._on_first("interrupt: finishing this step, then writing a checkpoint (Ctrl-C again to stop at once)")
        else:
            self._on_first(f"{describe(signum)} received: finishing this step, then writing a checkpoint (a second "
                           "signal stops at once)")

    def agreed(self, combine_max: Callable[[int], int]) -> int:
        """The signal every process acts on: the highest number any process received (0: carry on).

        `combine_max` reduces an int over all processes with max (identity for one process).
        """
        return combine_max(self.signum)


class StopPoll:
    """At a step boundary: did any process get a stop signal? All processes get the same answer.

    One process reads its own flag every step (no device involved). Several agree over a collective
    (`combine_max`), which waits for the device: only every `check_every` steps and at step 1, where the step
    records are read back anyway."""

    def __init__(self, request: StopRequest, processes: int, combine_max: Callable[[int], int],
                 check_every: int) -> None:
        self.request, self.processes = request, processes
        self.combine_max, self.check_every = combine_max, check_every
        self.agreed_signal = 0  # what every process acts on (0: carry on)

    def requested(self, step: int) -> bool:
        if self.processes == 1:
            self.agreed_signal = self.request.signum
        elif step % self.check_every == 0 or step == 1:
            self.agreed_signal = self.request.agreed(self.combine_max)
        return self.agreed_signal != 0

    @property
    def signum(self) -> int:
        """The signal to name when the run stops: the agreed one, else this process's own (0: none)."""
        return self.agreed_signal or self.request.signum


def stopped_by(signum: int, step: int, checkpoint: Path, output: Path) -> TrainingInterrupted:
    """The error a stopped run ends with: what stopped it, where the checkpoint is, how to go on."""
    signum = signum or signal.SIGINT  # a KeyboardInterrupt raised outside the handler
    if signum == signal.SIGINT:
        what = f"interrupted at step {step}"
    else:
        what = f"stopped by {describe(signum)} at step {step} (exit code {exit_code_for(signum)})"
    return TrainingInterrupted(f"{what}; checkpoint saved to {checkpoint}; resume with: sentadapt adapt --resume "
                               f"--output {output}", signum)


class StopAtOnce(_SignalHandlers):
    """Before training starts (models loading, the corpus being prepared, the base scored) there is no step to
    finish: the stop signals raise KeyboardInterrupt at once, and `signum` says which one came (0: none). The
    loop's StopRequest takes over while it trains and puts these handlers back after. Main thread only."""

    def __enter__(self) -> StopAtOnce:
        self.signum = pending_signal()  # one that came while the command was importing and was swallowed
        self._install()
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        interrupt(signum, frame)  # at once, or once an import under way has returned

    def stop_if_requested(self) -> None:
        """At a safe point (a stage loaded, before it trains): raise KeyboardInterrupt when a signal came and its
        interrupt was swallowed — Python prints and ignores an exception raised inside a finalizer (`__del__`, as
        a tokenizer's regex objects run while loading), and the run would otherwise train on to the end."""
        if self.signum:
            raise KeyboardInterrupt


def stopped_early(signum: int, output: Path, resumable: bool) -> TrainingInterrupted:
    """The error of a run stopped outside a training step (while loading, or by a second signal): one line that
    says what happened and what to run next."""
    signum = signum or signal.SIGINT
    what = "interrupted"
    if signum != signal.SIGINT:
        what = f"stopped by {describe(signum)} (exit code {exit_code_for(signum)})"
    if resumable:
        return TrainingInterrupted(f"{what}; resume from the last checkpoint with: sentadapt adapt --resume --output "
                                   f"{output}", signum)
    return TrainingInterrupted(f"{what} before the first checkpoint (while loading); nothing to resume: run the same "
                               f"command again (or add --resume auto) to start it over", signum)
