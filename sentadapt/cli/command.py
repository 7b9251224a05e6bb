"""The classes of every `sentadapt` command and group: a flag (`--dry-run`) shows no `<bool>` type, as it takes no
value; `--flag=true|false` (yes/no, on/off, 1/0), also with the value as the next word, turns it on or leaves it out
instead of taking `true` for the corpus (a file of that name stays a file); the top-level list gives a command's
first sentence on one line, not its docstring's hard line breaks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

from sentadapt.options import FALSE_WORDS, TRUE_WORDS


class PlainFlags:
    """Flags (--help, --version, --dry-run) shown without a type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        for param in self.params:  # type: ignore[attr-defined]
            _shown_plain(param)

    def get_help_option(self, ctx: Any) -> Any:
        return _shown_plain(super().get_help_option(ctx))  # type: ignore[misc]


class SentadaptCommand(PlainFlags, TyperCommand):
    # an option whose value may be left out (typer cannot declare one): option → (its value when bare, the value it
    # may be followed by); any other next word is not its value
    optional_values: ClassVar[dict[str, tuple[str, str]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.help and not self.short_help:
            self.short_help = first_sentence(self.help)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        flags = {name for param in self.params if _is_flag(param) for name in param.opts}
        out: list[str] = []
        index = 0
        while index < len(args):
            arg, following = args[index], args[index + 1] if index + 1 < len(args) else ""
            name, equals, value = arg.partition("=")
            if arg == "--":
                out += args[index:]
                break
            if arg in self.optional_values and following != self.optional_values[arg][1]:
                out.append(f"{arg}={self.optional_values[arg][0]}")
            elif equals and name in flags:
                out += _flag_value(name, value)
            elif arg in flags and following.lower() in TRUE_WORDS | FALSE_WORDS and not Path(following).exists():
                out += _flag_value(arg, following)
                index += 1
            else:
                out.append(arg)
            index += 1
        return super().parse_args(ctx, out)


class SentadaptGroup(PlainFlags, TyperGroup):
    """`sentadapt` and `sentadapt cache`."""


def _is_flag(param: Any) -> bool:  # an on/off option without a --no- form (typer's bool options)
    return bool(getattr(param, "is_flag", False)) and not getattr(param, "secondary_opts", None)


def _shown_plain(param: Any) -> Any:
    if param is not None and _is_flag(param):
        param.metavar = ""  # typer shows no type for an empty metavar
    return param


def _flag_value(flag: str, value: str) -> list[str]:
    if value.lower() in TRUE_WORDS | FALSE_WORDS:
        return [flag] if value.lower() in TRUE_WORDS else []
    raise typer.BadParameter(f"a flag takes no value ('{value}'); write {flag} to turn it on, or leave it out",
                             param_hint=f"'{flag}'")


def first_sentence(text: str) -> str:  # the help's first sentence (of its first paragraph), on one line
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.;])(\s|$)", paragraph)
    return (match.group(1) if match else paragraph).rstrip(";.") + "."
