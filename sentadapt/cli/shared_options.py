"""The options several commands share, declared once: flag, help and checks. Each command passes its own default
where they differ (`--batch-size`); tests/cli/test_cli_defaults.py holds every default equal to the library call's."""

from __future__ import annotations

from typing import Any

import typer

from sentadapt.options import (
    ALLOW_PICKLE,
    ALLOW_PICKLE_HELP,
    ENCODE_BATCH_SIZE,
    TRUST_REMOTE_CODE,
    TRUST_REMOTE_CODE_HELP,
)


def batch_size(default: int = ENCODE_BATCH_SIZE) -> Any:
    return typer.Option(default, "--batch-size", min=1, help="Sentences encoded at once.")


def max_length() -> Any:
    return typer.Option(None, "--max-length", min=8, help="Default: the model's max_seq_length.")


def device() -> Any:
    return typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... Default: cuda if available.")


def trust_remote_code() -> Any:
    return typer.Option(False, TRUST_REMOTE_CODE, help=TRUST_REMOTE_CODE_HELP)


def allow_pickle() -> Any:
    return typer.Option(False, ALLOW_PICKLE, help=ALLOW_PICKLE_HELP)
