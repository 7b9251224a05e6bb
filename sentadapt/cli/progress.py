"""The training progress line of `sentadapt adapt`, laid out for the terminal's width.

A rich `Progress` row is a grid of fixed columns that rich crops from the right when the terminal is
narrow, so at 80 columns the ETA and the step count lost their tails (`step 104/1…`, `ETA 0:00:…`).
Here the line is built at each refresh from the width rich offers: the fields a user watches —
step, loss, dev score, ETA — are always shown whole; elapsed time, examples/s, learning rate, the
loss's parts and a bar are added, in that order, while they fit. Below the width of the four
essential fields the line wraps rather than losing characters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

from sentadapt.cli._common import err_console
from sentadapt.cli.heartbeat import activity

BAR_MIN, BAR_MAX = 10, 40  # a bar narrower than 10 cells says nothing; wider than 40 only takes room
SEPARATOR = "  "


def clock_text(seconds: float | None) -> str:
    """H:MM:SS, as rich's time columns show it; '-:--:--' while unknown."""
    if seconds is None:
        return "-:--:--"
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


@dataclass
class TrainingStatus:
    """What the line shows; a rich renderable whose layout depends on the width it is rendered at."""

    total: int = 0
    step: int = 0
    loss: float | None = None
    parts: dict[str, float] = field(default_factory=dict)
    lr: float | None = None
    examples_per_s: float | None = None
    dev: str = "–"
    elapsed: float = 0.0
    remaining: float | None = None

    def fields(self) -> dict[str, str]:
        """Every field, by name, in the order they appear on the line."""
        loss = "–" if self.loss is None else f"{self.loss:.4f}"
        shown = {
            "step": f"step {self.step}/{self.total}",
            "loss": f"loss {loss}",
            "parts": " ".join(f"{name} {value:.4f}" for name, value in self.parts.items()) if len(self.parts) > 1
            else "",
            "lr": "" if self.lr is None else f"lr {self.lr:.2e}",
            "speed": "" if self.examples_per_s is None else f"{self.examples_per_s:.0f} ex/s",
            "dev": f"dev {self.dev}",
            "elapsed": clock_text(self.elapsed),
            "eta": f"ETA {clock_text(self.remaining)}",
        }
        return {name: text for name, text in shown.items() if text}

    def render(self, width: int) -> Text:
        fields = self.fields()
        lines, bar_width = layout(fields, width)
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


ESSENTIAL = ("step", "loss", "dev", "eta")
OPTIONAL = ("elapsed", "speed", "lr", "parts")  # added in this order while they fit
ORDER = ("step", "bar", "loss", "parts", "lr", "speed", "dev", "elapsed", "eta")


def layout(fields: dict[str, str], width: int) -> tuple[list[list[str]], int]:
    """Which fields go on which line, and the bar's width (0: none) for a terminal `width` cells wide.

    One line: the essentials, then the optional fields that still fit, in line order, and a bar of
    BAR_MIN..BAR_MAX cells in the room left. When even the essentials do not fit on one line they go on
    as many lines as needed, each field whole (only a field wider than the terminal itself is folded).
    """

    def length(names: list[str]) -> int:
        return sum(cell_len(fields[name]) for name in names) + len(SEPARATOR) * (len(names) - 1)

    chosen = [name for name in ESSENTIAL if name in fields]
    if length(chosen) > width:
        lines: list[list[str]] = [[]]
        for name in chosen:
            if lines[-1] and length([*lines[-1], name]) > width:
                lines.append([])
            lines[-1].append(name)
        return lines, 0
    for name in OPTIONAL:
        if name in fields and length([*chosen, name]) <= width:
            chosen.append(name)
    room = width - length(chosen) - len(SEPARATOR)
    bar_width = min(room, BAR_MAX) if room >= BAR_MIN else 0
    if bar_width:
        chosen.append("bar")
    return [[name for name in ORDER if name in chosen]], bar_width


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
