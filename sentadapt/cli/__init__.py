"""The `sentadapt` command line. Importing this module must not import torch (keeps `--help` fast)."""

from __future__ import annotations

import typer

from sentadapt import __version__
from sentadapt.cli import adapt as adapt_command
from sentadapt.cli import cache as cache_command
from sentadapt.cli import decide as decide_command
from sentadapt.cli import diagnose as diagnose_command
from sentadapt.cli import eval as eval_command
from sentadapt.cli import export as export_command
from sentadapt.cli import pairs as pairs_command
from sentadapt.cli.command import SentadaptCommand, SentadaptGroup

app = typer.Typer(
    name="sentadapt",
    help="Adapt sentence-embedding models to your domain with contrastive learning, and prove the gain.",
    no_args_is_help=True,
    add_completion=False,
    cls=SentadaptGroup,
    pretty_exceptions_show_locals=False,
)
app.command(name="adapt", cls=adapt_command.AdaptCommand)(adapt_command.adapt)
app.command(name="eval", cls=SentadaptCommand)(eval_command.eval_models)
app.command(name="pairs", cls=SentadaptCommand)(pairs_command.pairs)
app.command(name="decide", cls=SentadaptCommand)(decide_command.decide)
app.command(name="export", cls=SentadaptCommand)(export_command.export)
app.command(name="diagnose", cls=SentadaptCommand)(diagnose_command.diagnose)
app.add_typer(cache_command.app, name="cache")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sentadapt {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """sentadapt: adapt | eval | diagnose | export sentence-embedding models; pairs: a dev set to label."""


def main() -> None:
    app()
