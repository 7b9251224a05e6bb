"""`--help` at the width of a default terminal (80 columns) shows the default model's id whole."""

from __future__ import annotations

import itertools

import pytest
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.model.resolve import DEFAULT_BASE_MODEL


@pytest.mark.parametrize("command", ["adapt", "diagnose"])
def test_help_at_80_columns_names_the_default_model_unbroken(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) == 80  # rendered at 80 columns, not at some wider default
    assert any(DEFAULT_BASE_MODEL in line for line in lines), result.stdout



@pytest.mark.parametrize("command", ["adapt", "eval", "diagnose", "export", "pairs", "decide"])
def test_no_help_text_is_cut_at_80_columns(command: str) -> None:
    """Rich crops a word longer than the help column with '…' (e.g. 'cls|mean|max|last2avg|firstlast')."""
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    cut = [line for line in result.stdout.splitlines() if "…" in line]
    assert not cut, cut


def test_the_command_list_gives_each_command_a_whole_sentence() -> None:
    """Click cuts a command's line at its first '. ' ('e.g. ' ended decide's in the middle of a parenthesis)."""
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    text = " ".join(line.strip("│ ") for line in result.stdout.splitlines())
    assert "decide Decide again whether to use the run's model, on new labels, without training: pairs chosen by " \
           "`sentadapt pairs --run RUN` or any labelled pairs. export" in " ".join(text.split())


def test_adapt_help_states_each_default_once_and_says_where_the_recipes_are_shown() -> None:
    result = CliRunner().invoke(app, ["adapt", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    plain = " ".join(result.stdout.replace("│", " ").split())
    assert "(default 0.2)" not in plain and "held to a share of it). [default: 0.2]" in plain
    for flag in ("--max-steps", "--batch-size", "--lr", "--eval-every"):
        described = plain.split(f" {flag} ", 1)[1].split("--dry-run", 1)[0]  # its text, up to --dry-run
        assert "Default:" in described and len(described) < 200, described
    assert "in-batch negatives + 1" not in plain
    # a training flag no recipe or preset sets shows its setting's default; one they set shows none (the config's)
    assert "Seed of data order and augmentations. [default: (42)]" in plain
    assert "(overrides --epochs). [default" not in plain and "[default: (1.0)]" not in plain  # --epochs: recipes'


@pytest.mark.parametrize("command", ["adapt", "eval", "diagnose", "export", "pairs", "decide", "cache"])
def test_no_help_paragraph_breaks_mid_sentence_at_80_columns(command: str) -> None:
    """Issue 82: `pairs --help` broke a paragraph after "each" (a docstring's line break kept by rich): above the
    option panels, a line well short of the width is the end of a paragraph (a blank line follows)."""
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    lines = lines[:next(i for i, line in enumerate(lines) if line.startswith("╭"))]
    short = [line for line, after in itertools.pairwise(lines) if line.strip() and after.strip() and len(line) < 60
             and not line.lstrip().startswith("Usage:")]
    assert not short, short
