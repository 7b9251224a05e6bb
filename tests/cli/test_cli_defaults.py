"""Each command's defaults are its library call's (issue 59, item 5): `sentadapt eval|diagnose|export|pairs|decide`
and `evaluate`/`diagnose`/`export`/`propose_pairs`/`decide_again` give the same value to every option both have, so
a script and a shell get the same run. (`adapt` is built from one option table: tests/run/test_adapt_options.py.)"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

# CLI parameter → library keyword where the names differ; CLI-only options (rendering) are listed as None
RENAMED = {"export_format": "format", "base": "model", "show_subsets": None, "require_improvement": None}


def _default(parameter: inspect.Parameter) -> Any:
    value = getattr(parameter.default, "default", parameter.default)  # typer's OptionInfo / ArgumentInfo
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return str(value) if isinstance(value, Path) else value


def _pairs() -> list[tuple[str, Any, Any]]:
    from sentadapt.cli.decide import decide_command
    from sentadapt.cli.diagnose import diagnose_command
    from sentadapt.cli.eval import eval_command as eval_models
    from sentadapt.cli.export import export_command
    from sentadapt.cli.pairs import pairs_command
    from sentadapt.diagnostics.analysis import diagnose
    from sentadapt.evaluation.evaluate import evaluate
    from sentadapt.exporting import export
    from sentadapt.pairs.labelling import propose_pairs
    from sentadapt.run.redecide import decide_again

    return [("eval", eval_models, evaluate), ("diagnose", diagnose_command, diagnose),
            ("export", export_command, export), ("pairs", pairs_command, propose_pairs),
            ("decide", decide_command, decide_again)]


@pytest.mark.parametrize("command", ["eval", "diagnose", "export", "pairs", "decide"])
def test_every_option_of_a_command_has_its_library_calls_default(command: str) -> None:
    _, cli, library = next(pair for pair in _pairs() if pair[0] == command)
    options = inspect.signature(inspect.unwrap(cli)).parameters
    keywords = inspect.signature(library).parameters
    compared = 0
    for name, parameter in options.items():
        keyword = RENAMED.get(name, name)
        if keyword is None:
            continue
        assert keyword in keywords, f"{command}: --{name} has no keyword in {library.__name__}"
        if keywords[keyword].default is inspect.Parameter.empty or _default(parameter) is ...:
            continue  # required on both sides
        assert _default(parameter) == _default(keywords[keyword]), f"{command}: {name}"
        compared += 1
    assert compared >= 5  # the comparison ran over the command's options, not none of them
