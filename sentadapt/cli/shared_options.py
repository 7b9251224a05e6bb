"""The options several commands share, declared once: flag, help and checks; and every command's defaults, taken
from its library call's signature (`keyword_defaults`), so each is written once and a script and a shell get the same
run (tests/cli/test_cli_defaults.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer

from sentadapt.options import ALLOW_PICKLE, ALLOW_PICKLE_HELP, TRUST_REMOTE_CODE, TRUST_REMOTE_CODE_HELP


def keyword_defaults(call: Callable[..., Any]) -> dict[str, Any]:
    """The defaults of a library call's parameters, by name: what the command's options default to."""
    return {name: parameter.default for name, parameter in inspect.signature(call).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


def batch_size(default: int = 128) -> Any:
    return typer.Option(default, "--batch-size", min=1, help="Sentences encoded at once.")


def max_length() -> Any:
    return typer.Option(None, "--max-length", min=8, help="Default: the model's max_seq_length.")


def device() -> Any:
    return typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... Default: cuda if available.")


def trust_remote_code() -> Any:
    return typer.Option(False, TRUST_REMOTE_CODE, help=TRUST_REMOTE_CODE_HELP)


def allow_pickle() -> Any:
    return typer.Option(False, ALLOW_PICKLE, help=ALLOW_PICKLE_HELP)
