"""`--help` at the width of a default terminal (80 columns) shows the default model's id whole."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.resolve import DEFAULT_BASE_MODEL


@pytest.mark.parametrize("command", ["adapt", "diagnose"])
def test_help_at_80_columns_names_the_default_model_unbroken(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) == 80  # rendered at 80 columns, not at some wider default
    assert any(DEFAULT_BASE_MODEL in line for line in lines), result.stdout



@pytest.mark.parametrize("command", ["adapt", "eval", "diagnose", "export"])
def test_no_help_text_is_cut_at_80_columns(command: str) -> None:
    """Rich crops a word longer than the help column with '…' (e.g. 'cls|mean|max|last2avg|firstlast')."""
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    cut = [line for line in result.stdout.splitlines() if "…" in line]
    assert not cut, cut
