"""The range checks typer makes on the command line, for the public calls (sentadapt.api), so that a call from
Python is refused with the line the CLI prints. (The callbacks they share with the CLI: sentadapt.events.)"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import os
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sentadapt.errors import ConfigError, ResultNotWritten

T = TypeVar("T")

# The safety flags of every command that loads a model, spelled once (the CLI's options, adapt's run spec and the
# errors that name them all use these)
TRUST_REMOTE_CODE, TRUST_REMOTE_CODE_HELP = "--trust-remote-code", "Allow model code from the Hub."
ALLOW_PICKLE, ALLOW_PICKLE_HELP = "--allow-pickle", "Allow pickle (.bin) weights you trust."

# Defaults that commands, library calls and the layers under them share, each written once here (the test of
# tests/test_architecture.py fails on a literal default written in two modules); a package's own defaults live in
# its __init__ (evaluation/, diagnostics/, pairs/) or beside their owner.
ENCODE_BATCH_SIZE = 128  # sentences encoded at once: eval, the dev set, decide, pairs, cached vectors
VECTOR_DTYPE = "fp32"  # the vectors' precision: eval --dtype, export --dtype, Encoder.encode
TEST_SPLIT = "test"  # the split scored when none is named (STS, BEIR folders, task files)
DEFAULT_ENCODING_ERRORS = "strict"  # invalid UTF-8 in a text file: stop and name the line (adapt --encoding-errors)
# Tokens' work one more CPU training pass costs (model/length_chunks.py) where a run times nothing (several
# processes): a / b of `seconds = a + b · tokens` fitted on an Intel machine (bench/bench_length_chunks.py --fit: 85-120
# with AVX-512 kernels, 51-61 with AVX2 alone); one process times its own CPU since issue 84 (train/pass_costs.py).
PASS_OVERHEAD_TOKENS = 100
# a vectors file's fields (.jsonl keys, .parquet columns): what embeddings APIs return (--set teacher_text_field)
TEXT_FIELD, VECTOR_FIELD = "text", "embedding"
# the words a yes/no value may be written with (--set lora=yes, a YAML string, `--flag off`)
TRUE_WORDS, FALSE_WORDS = frozenset({"true", "yes", "on", "1"}), frozenset({"false", "no", "off", "0"})
F = TypeVar("F", bound=Callable[..., Any])


def check_at_least(option: str, value: int | None, minimum: int) -> None:
    """The check typer makes for `min=` options (`--batch-size 0`), with the message the CLI prints."""
    if value is not None and value < minimum:
        raise ConfigError(f"Invalid value for '{option}': Input should be greater than or equal to {minimum}")


def check_writable_place(label: str, path: str | Path) -> None:
    """The nearest existing folder on the way to `path` must be a writable directory (`label`: "--json out.json")."""
    parent = Path(path)
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{label}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{label}: {parent} is not writable")


def check_output_file(option: str, path: str | Path | None, example: str) -> None:
    """Before the work starts: a file option (`--json`) names a file that can be written, not a folder.
    `example`: a file name to suggest inside a folder given by mistake (e.g. "eval.json")."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a directory; pass a file name, e.g. {path / example}")
    check_writable_place(f"{option} {path}", path.parent)


def check_output_folder(option: str, path: str | Path | None) -> None:
    """Before the work starts: a folder option (`--plot`) does not name a file and can be made and written."""
    if path is None:
        return
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file; pass a folder (made if missing)")
    check_writable_place(f"{option} {path}", path)


def save_result(option: str, path: str | Path, result: object, write: Callable[[], T]) -> T:
    """Write a finished result's file (`write()`); a write that fails anyway (the disk filled up, the folder
    vanished) raises ResultNotWritten carrying `result`, so the work is never lost to a traceback."""
    try:
        return write()
    except OSError as error:
        reason = error.strerror or str(error)
        raise ResultNotWritten(f"{option} {path}: could not be written ({reason}); the results are complete but not "
                               f"saved there; run again with another {option}", result) from None


# ------------------------------------------------------------------------------- the public calls' arguments
# The CLI's parser makes sure that `--batch-size` is a whole number and CORPUS a list of paths; a Python caller has
# no parser, so the public calls check their arguments' types against their own annotations with `checked`.


def checked(names: dict[str, str] | None = None) -> Callable[[F], F]:
    """Check a public call's arguments against its type annotations before it runs: a wrong type is a ConfigError
    naming the CLI option (`names`: parameter → option where it is not `--param-name`), and a single path or
    string given where a list is expected becomes a list of one (what `pairs="dev.tsv"` means)."""

    def decorate(function: F) -> F:
        signature = inspect.signature(function)
        hints: dict[str, Any] = {}

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not hints:  # resolved on the first call: the annotations are strings until the module is loaded
                hints.update(typing.get_type_hints(function))
            bound = signature.bind(*args, **kwargs)
            for name, value in bound.arguments.items():
                if name in hints:
                    option = (names or {}).get(name, f"--{name.replace('_', '-')}")
                    bound.arguments[name] = conform(option, value, hints[name])
            return function(*bound.args, **bound.kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def conform(option: str, value: Any, hint: Any) -> Any:
    """`value` if it matches `hint`, a one-item list for a lone item where a list is expected, else ConfigError."""
    if _matches(value, hint):
        return Path(value) if hint is Path and isinstance(value, str) else value  # the call may use .suffix
    for member in _members(hint):
        if _is_sequence_hint(member) and _matches([value], member):
            return [value]
    raise ConfigError(f"Invalid value for '{option}': expected {_describe(hint)}, got {type(value).__name__} "
                      f"{_short(value)}")


def _members(hint: Any) -> tuple[Any, ...]:
    return typing.get_args(hint) if _is_union(hint) else (hint,)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _is_sequence_hint(hint: Any) -> bool:
    return typing.get_origin(hint) in (list, tuple, collections.abc.Sequence)


def _matches(value: Any, hint: Any) -> bool:
    if hint is Any or hint is object:
        return True
    if _is_union(hint):
        return any(_matches(value, member) for member in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint in (Path, os.PathLike):
        return isinstance(value, (str, os.PathLike))
    if _is_sequence_hint(hint):
        if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, collections.abc.Sequence):
            return False
        items = [item for item in typing.get_args(hint) if item is not Ellipsis]
        return not items or all(_matches(element, items[0]) for element in value)
    origin = typing.get_origin(hint) or hint
    if origin is collections.abc.Callable:
        return callable(value)
    return True  # types the CLI never passes a user's text into (classes, records): not checked here


def _describe(hint: Any) -> str:
    if _is_union(hint):
        parts = list(dict.fromkeys(_describe(m) for m in typing.get_args(hint) if m is not type(None)))
        if "a path" in parts and "a string" in parts:  # a path is given as a string: say path once
            parts.remove("a string")
        return " or ".join(parts)
    if _is_sequence_hint(hint):
        items = [item for item in typing.get_args(hint) if item is not Ellipsis]
        return f"a list of {_plural(_describe(items[0]))}" if items else "a list"
    origin = typing.get_origin(hint) or hint
    return {bool: "True or False", int: "a whole number", float: "a number", str: "a string", Path: "a path",
            os.PathLike: "a path", collections.abc.Callable: "a function"}.get(origin, getattr(hint, "__name__", "?"))


def _plural(description: str) -> str:
    """"a path or a string" → "paths or strings"."""
    return " or ".join(part.removeprefix("a ") + "s" for part in description.split(" or "))


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
