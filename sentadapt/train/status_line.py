"""The training progress line's content, laid out for a width: which fields a user watches, in what order, on how
many lines (the CLI draws it with rich: cli/adapt.py; a log gets the same fields as plain text).

A line is built at each refresh from the width offered: the fields a user watches — step, loss, dev score, ETA —
are always shown whole; elapsed time, examples/s, learning rate, the loss's parts and a bar are added, in that
order, while they fit. Below the width of the four essential fields the line wraps rather than losing characters.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

BAR_MIN, BAR_MAX = 10, 40  # a bar narrower than 10 cells says nothing; wider than 40 only takes room
SEPARATOR = "  "


def clock_text(seconds: float | None) -> str:
    """H:MM:SS, as rich's time columns show it; '-:--:--' while unknown."""
    if seconds is None:
        return "-:--:--"
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


@dataclass
class StatusLine:
    """What the line shows: its fields, by name."""

    total: int = 0
    step: int = 0
    loss: float | None = None
    parts: dict[str, float] = field(default_factory=dict)
    lr: float | None = None
    examples_per_s: float | None = None
    dev: str = "–"
    elapsed: float = 0.0
    remaining: float | None = None
    # the clocks' inputs (not shown): when this process started training and took its last step, at which step it
    # started (a resumed run's earlier steps took no time here), the mean seconds per step since (None: no step yet)
    started: float = 0.0
    last_step_at: float = 0.0
    start_step: int = 0
    seconds_per_step: float | None = None

    def stepped(self, step: int, lr: float, examples_per_s: float, now: float) -> None:
        """Every step: plain assignments (a live display redraws the line at its own pace)."""
        self.step, self.lr, self.examples_per_s, self.last_step_at = step, lr, examples_per_s, now
        done = step - self.start_step
        # the mean pace since start, evaluations included, so the ETA covers the evaluations still to come
        self.seconds_per_step = (now - self.started) / done if done > 0 else None

    def tick(self, now: float) -> None:
        """The clocks up to date: elapsed, and the ETA counted down since the last step (they move on through an
        evaluation, when no step is taken)."""
        self.elapsed = now - self.started
        if self.seconds_per_step is not None:
            left = (self.total - self.step) * self.seconds_per_step
            self.remaining = max(0.0, left - (now - self.last_step_at))

    def segments(self, width: int, measure: Callable[[str], int] = len) -> list[list[tuple[str, str]]]:
        """The line laid out for a terminal `width` cells wide (`layout`): per line, (text, style) pieces — the
        fields plain (style ""), separators between them, the bar as its done and left cells in rich's bar styles
        ("━" done, "─" left: readable in a log too)."""
        fields = self.fields()
        lines, bar_width = layout(fields, width, measure)
        done = round((max(0.0, min(1.0, self.step / self.total)) if self.total else 0.0) * bar_width)
        drawn: list[list[tuple[str, str]]] = []
        for names in lines:
            pieces: list[tuple[str, str]] = []
            for index, name in enumerate(names):
                pieces += [(SEPARATOR, "")] if index else []
                pieces += ([("━" * done, "bar.complete"), ("─" * (bar_width - done), "bar.back")] if name == "bar"
                           else [(fields[name], "")])
            drawn.append(pieces)
        return drawn

    def plain(self) -> str:
        """The fields as one line of plain text (what a log gets)."""
        return SEPARATOR.join(self.fields().values())

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

ESSENTIAL = ("step", "loss", "dev", "eta")
OPTIONAL = ("elapsed", "speed", "lr", "parts")  # added in this order while they fit
ORDER = ("step", "bar", "loss", "parts", "lr", "speed", "dev", "elapsed", "eta")


def layout(fields: dict[str, str], width: int, measure: Callable[[str], int] = len,
           ) -> tuple[list[list[str]], int]:
    """Which fields go on which line, and the bar's width (0: none) for a terminal `width` cells wide.

    One line: the essentials, then the optional fields that still fit, in line order, and a bar of
    BAR_MIN..BAR_MAX cells in the room left. When even the essentials do not fit on one line they go on
    as many lines as needed, each field whole (only a field wider than the terminal itself is folded).
    `measure`: a text's width in cells (the terminal's own count; len for plain text).
    """

    def length(names: list[str]) -> int:
        return sum(measure(fields[name]) for name in names) + len(SEPARATOR) * (len(names) - 1)

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
