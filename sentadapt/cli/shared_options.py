"""A command's options, declared once as a table of `Option` rows (as `adapt`'s are in run/adapt_options.py): the
command's typer signature is built from it, and the parsed values go to its library call as they are, so each row's
name IS the call's keyword. tests/cli/test_cli_defaults.py reads every table against its call: each keyword is a row,
each row a keyword (but the rendering ones), with the call's default. Also the rows several commands share."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import typer

from sentadapt import options as spelled


@dataclass(frozen=True)
class Option:
    """One option: the library keyword `name`, the type typer parses, its default (`...`: required) and help; the
    flag is `--name` with dashes unless `flags` says; `argument`: positional; `renders`: read by the command's
    rendering, not passed to the call; `typer`: typer's own settings (min, envvar, show_default, metavar)."""

    name: str
    type: Any
    default: Any
    help: str
    flags: tuple[str, ...] = ()
    argument: bool = False
    renders: bool = False
    typer: dict[str, Any] = field(default_factory=dict)

    def parameter(self) -> inspect.Parameter:
        default = list(self.default) if isinstance(self.default, tuple) else self.default  # typer's lists are lists
        if self.argument:
            info = typer.Argument(default, help=self.help, **self.typer)
        else:
            flags = self.flags or ("--" + self.name.replace("_", "-"),)
            info = typer.Option(default, *flags, help=self.help, **self.typer)
        return inspect.Parameter(self.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=self.type)


def signature(options: Sequence[Option]) -> inspect.Signature:
    """The typer signature of a command declared by `options`, in their order."""
    return inspect.Signature([option.parameter() for option in options])


def split(options: dict[str, Any], table: Sequence[Option]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parsed values as (the library call's keywords, the rendering's)."""
    rendering = {option.name for option in table if option.renders}
    return {k: v for k, v in options.items() if k not in rendering}, {k: options[k] for k in rendering}


def batch_size(default: int = spelled.ENCODE_BATCH_SIZE) -> Option:
    return Option("batch_size", int, default, "Sentences encoded at once.", typer={"min": 1})


MAX_LENGTH = Option("max_length", int | None, None, "Default: the model's max_seq_length.", typer={"min": 8})
DEVICE = Option("device", str | None, None, "cpu, cuda, cuda:1 ... Default: cuda if available.")
# what every command that loads a model lets the user allow, last in its table
SAFETY = (Option("trust_remote_code", bool, False, spelled.TRUST_REMOTE_CODE_HELP, (spelled.TRUST_REMOTE_CODE,)),
          Option("allow_pickle", bool, False, spelled.ALLOW_PICKLE_HELP, (spelled.ALLOW_PICKLE,)))
