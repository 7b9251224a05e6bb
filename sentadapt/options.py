"""The range checks typer makes on the command line, for the public calls (sentadapt.api), so that a call from
Python is refused with the line the CLI prints. (The callbacks they share with the CLI: sentadapt.events.)"""

from __future__ import annotations

from sentadapt.errors import ConfigError


def check_at_least(option: str, value: int | None, minimum: int) -> None:
    """The check typer makes for `min=` options (`--batch-size 0`), with the message the CLI prints."""
    if value is not None and value < minimum:
        raise ConfigError(f"Invalid value for '{option}': Input should be greater than or equal to {minimum}")
