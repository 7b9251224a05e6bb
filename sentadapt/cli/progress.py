"""The training progress line of `sentadapt adapt`, drawn with rich at the terminal's width (its content and layout:
train/status_line.py), and the reporter that keeps it live while the loop trains."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

from sentadapt.cli._common import activity, err_console
from sentadapt.train.status_line import StatusLine, clock_text

__all__ = ["RichReporter", "TrainingStatus", "clock_text"]


class TrainingStatus(StatusLine):
    """The status line as a rich renderable, laid out for the width it is rendered at."""

    def render(self, width: int) -> Text:
        text = Text(no_wrap=True, overflow="fold")
        for number, pieces in enumerate(self.segments(width, cell_len)):
            text.append("\n" if number else "")
            for piece, style in pieces:
                text.append(piece, style)
        return text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.render(options.max_width)


class RichReporter:
    """The loop's reporter for a terminal: one live status line on stderr, messages printed above it.

    The clocks tick at every refresh, not only at steps, so they keep moving through an evaluation."""

    def __init__(self, console: Console | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console or err_console
        self.clock = clock
        self.status = TrainingStatus()
        self.live: Live | None = None
        self._activity = ExitStack()  # the heartbeat's activity while training, without a terminal

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self.status.tick(self.clock())
        yield from self.status.__rich_console__(console, options)

    def message(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)  # rich keeps the live line below it

    def start(self, total_steps: int, start_step: int) -> None:
        now = self.clock()
        self.status = TrainingStatus(total_steps, start_step, started=now, last_step_at=now, start_step=start_step)
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=False)
        self.live.start()
        if not self.console.is_terminal:  # Live draws nothing in a log: the heartbeat prints the line instead
            self._activity.enter_context(activity(self.plain_line))

    def plain_line(self) -> str:
        """The training line's fields as plain text, clocks up to date (what the heartbeat prints in a log)."""
        self.status.tick(self.clock())
        return self.status.plain()

    def advance(self, step: int, lr: float, examples_per_s: float) -> None:
        self.status.stepped(step, lr, examples_per_s, self.clock())  # rich's Live redraws 4 times a second at most

    def losses(self, step: int, loss: float, parts: dict[str, float]) -> None:
        self.status.loss, self.status.parts = loss, parts

    def evaluation(self, step: int, score: float, best: float, improved: bool) -> None:
        self.status.dev = f"{score:.2f}" + (" ★" if improved else "")
        self.message(f"step {step}: dev {score:.2f} (best {best:.2f})" + (" — saved" if improved else ""))

    def finish(self) -> None:
        self._activity.close()
        if self.live is not None:
            self.live.stop()
            self.live = None
            if not self.console.is_interactive and not self.console.is_jupyter:
                self.console.print()  # as rich's Progress does: end the final line in a log file or a pipe
