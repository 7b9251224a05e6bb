"""Each command's options are one table (issue 85): `sentadapt eval|diagnose|export|pairs|decide` are built from their
module's OPTIONS, whose rows are named by the library call's keywords, so a script and a shell get the same run: every
keyword of `evaluate`/`diagnose`/`export`/`propose_pairs`/`decide_again` is a row, every row (but what the command's
rendering reads) a keyword, each with the call's default. (`adapt`'s table: tests/run/test_adapt_options.py.)"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sentadapt.cli import app

CALLBACKS = {"progress", "note"}  # what the command passes itself: its progress bars and notes


def _tables() -> dict[str, tuple[Any, Any]]:
    from sentadapt.cli import decide, diagnose, eval, export, pairs
    from sentadapt.diagnostics.analysis import diagnose as diagnose_call
    from sentadapt.evaluation.evaluate import evaluate
    from sentadapt.exporting import export as export_call
    from sentadapt.pairs.labelling import propose_pairs
    from sentadapt.run.redecide import decide_again

    return {"eval": (eval.OPTIONS, evaluate), "diagnose": (diagnose.OPTIONS, diagnose_call),
            "export": (export.OPTIONS, export_call), "pairs": (pairs.OPTIONS, propose_pairs),
            "decide": (decide.OPTIONS, decide_again)}


def _default(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


@pytest.mark.parametrize("command", ["eval", "diagnose", "export", "pairs", "decide"])
def test_a_commands_table_is_its_library_calls_keywords_with_their_defaults(command: str) -> None:
    table, call = _tables()[command]
    keywords = inspect.signature(call).parameters
    rows = {option.name: option for option in table if not option.renders}
    assert set(keywords) - CALLBACKS == set(rows), f"{command}: the table and {call.__name__} differ"
    compared = 0
    for name, option in rows.items():
        if keywords[name].default is inspect.Parameter.empty or option.default is ...:
            continue  # required on one side at least (pairs' -n has the command's default of 200)
        assert _default(option.default) == _default(keywords[name].default), f"{command}: {name}"
        compared += 1
    assert compared >= 5  # the comparison ran over the command's options, not none of them


@pytest.mark.parametrize("command", ["eval", "diagnose", "export", "pairs", "decide"])
def test_the_command_offers_every_row_of_its_table_in_order(command: str) -> None:
    table, _ = _tables()[command]
    command_object = next(c for c in app.registered_commands if c.name == command)
    assert list(inspect.signature(command_object.callback).parameters) == [option.name for option in table]
    help_text = CliRunner().invoke(app, [command, "--help"], terminal_width=200).output
    for option in table:
        assert option.argument or (option.flags or ("--" + option.name.replace("_", "-"),))[0] in help_text
