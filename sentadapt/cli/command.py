"""The class of every `sentadapt` command: how flags are shown and parsed, and the line a command gets in the
top-level list.

- A flag (`--dry-run`, `--overwrite`) takes no value, so its help shows no `<bool>` type that suggests one.
- `--flag=true` / `--flag=false` (and yes/no, on/off, 1/0) are read as the flag on or left out, as many tools
  accept; `--flag true` with the value as the next word is read the same, instead of taking `true` for the corpus
  (a file of that name is still a file). Any other value is a one-line error naming the flag.
- The top-level list shows a command's first sentence on one line, not its docstring's hard line breaks.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})


class SentadaptCommand(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _flag_shown_plain(param)
        if self.help and not self.short_help:
            self.short_help = first_sentence(self.help)

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_shown_plain(super().get_help_option(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self._flags_with_values(args))

    def _flags_with_values(self, args: list[str]) -> list[str]:
        flags = {name for param in self.params if _is_flag(param) for name in param.opts}
        out: list[str] = []
        skip = False
        for index, arg in enumerate(args):
            if skip:
                skip = False
                continue
            if arg == "--":
                out += args[index:]
                break
            name, equals, value = arg.partition("=")
            if equals and name in flags:
                out += _flag_value(name, value)
                continue
            following = args[index + 1] if index + 1 < len(args) else None
            if (arg in flags and following is not None and following.lower() in TRUE_WORDS | FALSE_WORDS
                    and not Path(following).exists()):
                out += _flag_value(arg, following)
                skip = True
                continue
            out.append(arg)
        return out


class SentadaptGroup(TyperGroup):
    """The top-level `sentadapt` and `sentadapt cache`: their flags (--help, --version) shown without a type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _flag_shown_plain(param)

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_shown_plain(super().get_help_option(ctx))


def _flag_shown_plain(param: Any) -> Any:
    if param is not None and _is_flag(param):
        param.metavar = ""  # typer shows no type for an empty metavar
    return param


def _is_flag(param: Any) -> bool:
    """An on/off option without an --no- form (typer's bool options)."""
    return bool(getattr(param, "is_flag", False)) and not getattr(param, "secondary_opts", None)


def _flag_value(flag: str, value: str) -> list[str]:
    if value.lower() in TRUE_WORDS:
        return [flag]
    if value.lower() in FALSE_WORDS:
        return []
    raise typer.BadParameter(f"a flag takes no value ('{value}'); write {flag} to turn it on, or leave it out",
                             param_hint=f"'{flag}'")


def first_sentence(text: str) -> str:
    """The help's first sentence (of its first paragraph), on one line."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.;])(\s|$)", paragraph)
    return (match.group(1) if match else paragraph).rstrip(";.") + "."
