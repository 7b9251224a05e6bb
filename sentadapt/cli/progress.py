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

from sentadapt.cli._common import err_console
from sentadapt.cli.heartbeat import activity
from sentadapt.train.status_line import SEPARATOR, StatusLine, clock_text, layout

__all__ = ["RichReporter", "TrainingStatus", "clock_text"]


class TrainingStatus(StatusLine):
    """The status line as a rich renderable, laid out for the width it is rendered at."""

    def render(self, width: int) -> Text:
        fields = self.fields()
        lines, bar_width = layout(fields, width, cell_len)
        text = Text(no_wrap=True, overflow="fold")
        for number, names in enumerate(lines):
            if number:
                text.append("\n")
            for index, name in enumerate(names):
                if index:
                    text.append(SEPARATOR)
                if name == "bar":
                    fraction = max(0.0, min(1.0, self.step / self.total)) if self.total else 0.0
                    done = round(fraction * bar_width)
                    text.append("━" * done, "bar.complete")  # rich's bar colours; "─" keeps it readable in logs
                    text.append("─" * (bar_width - done), "bar.back")
                else:
                    text.append(fields[name])
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
        self.started = self.last_step_at = 0.0
        self.start_step = 0
        self.seconds_per_step: float | None = None
        self._activity = ExitStack()  # the heartbeat's activity while training, without a terminal

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self._tick()
        yield from self.status.__rich_console__(console, options)

    def _tick(self) -> None:
        """The clocks up to date: elapsed, and the ETA counted down since the last step."""
        now = self.clock()
        self.status.elapsed = now - self.started
        if self.seconds_per_step is not None:
            left = (self.status.total - self.status.step) * self.seconds_per_step
            self.status.remaining = max(0.0, left - (now - self.last_step_at))

    def message(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)  # rich keeps the live line below it

    def start(self, total_steps: int, start_step: int) -> None:
        self.status = TrainingStatus(total=total_steps, step=start_step)
        self.started = self.last_step_at = self.clock()
        self.start_step, self.seconds_per_step = start_step, None
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=False)
        self.live.start()
        if not self.console.is_terminal:  # Live draws nothing in a log: the heartbeat prints the line instead
            self._activity.enter_context(activity(self.plain_line))

    def plain_line(self) -> str:
        """The training line's fields as plain text, clocks up to date (what the heartbeat prints in a log)."""
        self._tick()
        return SEPARATOR.join(self.status.fields().values())

    def advance(self, step: int, lr: float, examples_per_s: float) -> None:
        """Every step: plain assignments; rich's Live thread redraws the line 4 times a second at most."""
        status = self.status
        status.step, status.lr, status.examples_per_s = step, lr, examples_per_s
        self.last_step_at = self.clock()
        done = step - self.start_step  # a resumed run's earlier steps took no time in this process
        # the mean pace since start, evaluations included, so the ETA covers the evaluations still to come
        self.seconds_per_step = (self.last_step_at - self.started) / done if done > 0 else None

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
