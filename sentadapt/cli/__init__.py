"""The `sentadapt` command line. Importing this module must not import torch (keeps `--help` fast)."""

from __future__ import annotations

import typer

from sentadapt import __version__
from sentadapt.cli import cache
from sentadapt.cli._common import SentadaptCommand, SentadaptGroup
from sentadapt.cli.adapt import AdaptCommand, adapt_command
from sentadapt.cli.decide import decide_command
from sentadapt.cli.diagnose import diagnose_command
from sentadapt.cli.eval import eval_command
from sentadapt.cli.export import export_command
from sentadapt.cli.pairs import pairs_command

app = typer.Typer(
    name="sentadapt",
    help="Adapt sentence-embedding models to your domain with contrastive learning, and prove the gain.",
    no_args_is_help=True,
    add_completion=False,
    cls=SentadaptGroup,
    pretty_exceptions_show_locals=False,
)
app.command(name="adapt", cls=AdaptCommand)(adapt_command)
app.command(name="eval", cls=SentadaptCommand)(eval_command)
app.command(name="pairs", cls=SentadaptCommand)(pairs_command)
app.command(name="decide", cls=SentadaptCommand)(decide_command)
app.command(name="export", cls=SentadaptCommand)(export_command)
app.command(name="diagnose", cls=SentadaptCommand)(diagnose_command)
app.add_typer(cache.app, name="cache")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sentadapt {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """sentadapt: adapt | eval | diagnose | export sentence-embedding models; pairs: a dev set to label."""
