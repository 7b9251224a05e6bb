"""Follow one `sentadapt adapt --teacher T --dev d.tsv` run from the CLI to the saved model, and count how often the
reader of the code has to go back to a file already left (issue 59's measure of how tangled the flow is).

    python -m tools.walk                 # this checkout
    python -m tools.walk --source DIR    # another checkout of sentadapt (e.g. a git worktree of an older commit)

The walk is every sentadapt function in the order it is first called (a function called again, in a loop or from
elsewhere, is not a new stop: a reader reads it once), with tiny random models (tests/conftest.build_tiny_bert), 2
steps, a 3-layer teacher and an 8-pair dev file. From that sequence of files:
- stops: the file changes along it (a stop is a new file the reader opens to follow the call),
- returns: the stops into a file already read before (not the one just left's caller chain: any earlier file),
- files: how many files the walk touches.

`--teacher-way` lists the files a reader goes through to follow the teacher from cli/adapt.py to the loss: every
package file on the call stack, from the command's function down, where the teacher is met — its preset, its source
checked and resolved, its table built, its blend, the distillation term built and first computed (TEACHER_STOPS).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
PAIRS = [("the server is down", "the server is not running", 4.5), ("the backup failed", "the backup job failed", 4.0),
         ("a man plays guitar", "a man plays music", 3.5), ("a woman cooks", "a person is cooking", 3.0),
         ("the dog runs", "a cat runs", 2.0), ("dns timeout", "the red car is big", 0.0),
         ("login failed", "the password is new", 1.5), ("the red car is big", "a big red car", 5.0)]


# where the teacher is met on its way (file, function): the union of the package files on their call stacks is the
# teacher's way (issue 69: readable in at most 12 files)
TEACHER_STOPS = {("recipes/presets.py", "with_teacher"), ("teacher/table.py", "resolve_source"),
                 ("teacher/table.py", "teacher_table"), ("teacher/table.py", "with_blend"),
                 ("train/distill.py", "build_distillation"), ("train/distill.py", "Distillation.terms")}


def import_every_module(package: Path) -> None:
    """Import each module of the package before the walk starts, so that what module bodies run (registrations,
    decorators, dataclasses) is never counted, wherever a module happens to be imported first: the walk is the run's
    calls only, the same whichever command modules import what at start-up. A module needing a missing optional
    package (onnx, matplotlib) is left out."""
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages([str(package)], prefix=f"{package.name}."):
        if not module.name.endswith("__main__"):
            with contextlib.suppress(ImportError):
                importlib.import_module(module.name)


def first_calls(package: Path, argv: list[str], way: set[str] | None = None) -> list[tuple[str, str]]:
    """(file relative to the package, function) of every package function in the order of its first call; `way`
    (when given) gets the package files on the call stacks of TEACHER_STOPS."""
    from typer.testing import CliRunner

    from sentadapt.cli import app

    import_every_module(package)
    seen: set[Any] = set()
    order: list[tuple[str, str]] = []
    root = str(package) + os.sep

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(root) or code in seen:
            return
        seen.add(code)
        order.append((code.co_filename[len(root):], code.co_qualname))
        if way is not None and order[-1] in TEACHER_STOPS:
            caller = frame
            while caller is not None and caller.f_code.co_qualname != "adapt_command":  # up to the command
                if caller.f_code.co_filename.startswith(root):
                    way.add(caller.f_code.co_filename[len(root):])
                caller = caller.f_back
            way.add("cli/adapt.py")

    sys.setprofile(profile)
    try:
        result = CliRunner().invoke(app, argv, catch_exceptions=False)
    finally:
        sys.setprofile(None)
    if result.exit_code != 0:
        raise SystemExit(f"the walked run failed ({result.exit_code}): {result.output[-2000:]}")
    return order


def measure(order: list[tuple[str, str]]) -> dict[str, int]:
    files = [path for path, _ in order]
    stops = returns = 0
    visited = {files[0]} if files else set()
    for previous, current in itertools.pairwise(files):
        if current == previous:
            continue
        stops += 1
        returns += current in visited
        visited.add(current)
    return {"functions": len(order), "stops": stops, "returns": returns, "files": len(set(files))}


def walk(package: Path) -> tuple[list[tuple[str, str]], set[str]]:
    """The walked run's first calls, and the files on the teacher's way."""
    from tests.conftest import build_tiny_bert

    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        base, teacher = build_tiny_bert(folder / "base"), build_tiny_bert(folder / "teacher", layers=3, seed=1)
        corpus = folder / "corpus.txt"
        corpus.write_text("".join(f"the server {i} is down\n" for i in range(40)))
        dev = folder / "dev.tsv"
        dev.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in PAIRS))
        way: set[str] = set()
        order = first_calls(package, ["adapt", str(corpus), "--base", str(base), "--teacher", str(teacher), "--dev",
                                      str(dev), "--output", str(folder / "run"), "--max-steps", "2", "--batch-size",
                                      "8", "--max-length", "16", "--eval-every", "1", "--set", "teacher_check=off"],
                            way)
    return order, way


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=REPOSITORY, help="the checkout whose sentadapt is walked")
    parser.add_argument("--list", action="store_true", help="print the walk, one function per line")
    parser.add_argument("--teacher-way", action="store_true", help="print the files on the teacher's way")
    args = parser.parse_args(argv)
    source = args.source.resolve()
    # the walked checkout's sentadapt (and its tests.conftest's tiny models) first, whatever the working directory
    sys.path[:] = [str(source), *(path for path in sys.path if path not in ("", ".", str(REPOSITORY)))]
    import sentadapt

    package = Path(sentadapt.__file__).resolve().parent
    if package.parent != source:
        raise SystemExit(f"imported sentadapt from {package}, not from {source}")
    order, way = walk(package)
    if args.list:
        print("\n".join(f"{path}: {name}" for path, name in order))
    if args.teacher_way:
        print(f"the teacher's way, {len(way)} files:", ", ".join(sorted(way)))
    print(measure(order))
    return 0


if __name__ == "__main__":
    sys.exit(main())
