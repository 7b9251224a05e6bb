"""The training progress line keeps step, loss, dev and ETA whole at any terminal width."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from sentadapt.cli.adapt import RichReporter, TrainingStatus
from sentadapt.train.status_line import clock_text

ESSENTIALS = ("step 104/1000", "loss 0.1234", "dev 80.12 ★", "ETA 1:44:25")


def busy_status() -> TrainingStatus:
    """A CLSR-like step: two loss parts, every field filled in, ETA over an hour (the widest clock)."""
    return TrainingStatus(total=1000, step=104, loss=0.1234, parts={"contrastive": 0.1, "classifier": 0.0234},
                          lr=3e-5, examples_per_s=512.4, dev="80.12 ★", elapsed=754.0, remaining=6265.0)


def render(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text().rstrip("\n").split("\n")


def test_at_80_columns_step_loss_dev_and_eta_are_whole_on_one_line() -> None:
    lines = render(busy_status(), 80)
    assert len(lines) == 1, lines
    assert len(lines[0]) <= 80
    for text in ESSENTIALS:
        assert text in lines[0], (text, lines[0])
    assert "…" not in lines[0]
    assert "0:12:34" in lines[0]  # elapsed fits too; the loss parts do not, so they are left out
    assert "contrastive" not in lines[0]


def test_a_wide_terminal_shows_every_field_and_a_bar() -> None:
    (line,) = render(busy_status(), 160)
    for text in (*ESSENTIALS, "contrastive 0.1000 classifier 0.0234", "lr 3.00e-05", "512 ex/s", "0:12:34"):
        assert text in line, (text, line)
    bar = re.search("━*─+", line)
    assert bar is not None and 10 <= len(bar[0]) <= 40
    assert bar[0].count("━") == round(0.104 * len(bar[0]))  # step 104 of 1000 done
    assert line.index("step") < line.index("━━━━─") < line.index("loss") < line.index("dev") < line.index("ETA")


@pytest.mark.parametrize("width", [60, 50, 40])
def test_narrower_terminals_drop_detail_first_then_wrap_without_cutting(width: int) -> None:
    lines = render(busy_status(), width)
    assert all(len(line) <= width for line in lines)
    joined = " ".join(line.strip() for line in lines)
    for text in ESSENTIALS:
        assert text in joined, (text, lines)
    assert "…" not in joined
    if width >= 60:
        assert len(lines) == 1 and "lr" not in lines[0]


def test_clock_text_matches_rich_time_columns() -> None:
    assert clock_text(6265.0) == "1:44:25"
    assert clock_text(59.6) == "0:01:00"
    assert clock_text(None) == "-:--:--"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_reporter_eta_is_the_mean_pace_of_this_process_and_dev_shows_after_an_evaluation() -> None:
    clock, out = FakeClock(), io.StringIO()
    console = Console(width=80, file=out, color_system=None)
    reporter = RichReporter(console=console, clock=clock)
    reporter.start(total_steps=1000, start_step=500)  # resumed at step 500
    clock.now += 100.0
    reporter.advance(600, 1e-5, 64.0)  # 100 steps in 100 s → 400 steps left ≈ 400 s
    (line,) = render(reporter, 80)
    assert "loss –" in line  # nothing read back from the device yet
    reporter.losses(600, 0.5, {"loss": 0.5})
    reporter.evaluation(600, 81.234, 81.234, improved=True)
    (line,) = render(reporter, 80)
    assert "step 600/1000" in line and "loss 0.5000" in line and "ETA 0:06:40" in line
    assert "dev 81.23 ★" in line and "0:01:40" in line
    clock.now += 30.0  # an evaluation or a checkpoint: no step, but the clocks move on
    (line,) = render(reporter, 80)
    assert "0:02:10" in line and "ETA 0:06:10" in line
    reporter.finish()
    printed = out.getvalue()
    assert "step 600: dev 81.23 (best 81.23) — saved" in printed
    assert printed.endswith("ETA 0:06:10\n")  # a non-terminal stderr (a log file) gets the final line once


def test_before_the_first_step_the_eta_is_unknown_not_zero() -> None:
    (line,) = render(TrainingStatus(total=1000, step=0), 80)
    assert "step 0/1000" in line and "ETA -:--:--" in line and "loss –" in line and "dev –" in line


def test_the_library_lays_out_the_line_the_cli_draws_and_keeps_its_clocks() -> None:
    """status_line.StatusLine owns the line's pieces and its pace (issue 69: the CLI only draws them)."""
    status = busy_status()
    (pieces,) = status.segments(160)
    assert "".join(text for text, _ in pieces) == render(status, 160)[0]
    assert {style for _, style in pieces} == {"", "bar.complete", "bar.back"}
    clock = TrainingStatus(total=100, step=10, started=50.0, last_step_at=50.0, start_step=10)
    clock.stepped(20, 1e-5, 8.0, now=70.0)  # 10 steps in 20 s → 80 steps left = 160 s
    clock.tick(now=75.0)
    assert (clock.elapsed, clock.remaining, clock.seconds_per_step) == (25.0, 155.0, 2.0)
    assert clock.plain().startswith("step 20/100  loss –  lr 1.00e-05  8 ex/s  dev –  0:00:25  ETA 0:02:35")
