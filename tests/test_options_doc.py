"""docs/options.md is generated from the code (tools/options_doc.py): it fails here when it is stale."""

from __future__ import annotations

from dataclasses import dataclass

from sentadapt.config.schema import FLAT_KEYS, setting
from tools import options_doc


def test_options_reference_is_up_to_date() -> None:
    current = options_doc.OUTPUT.read_text(encoding="utf-8")
    assert current == options_doc.render(), f"docs/options.md is stale: run {options_doc.COMMAND}"


def test_reference_names_every_command_option_and_set_key() -> None:
    text = options_doc.render()
    for heading in ("## `sentadapt adapt`", "## `sentadapt eval`", "## `sentadapt export`", "## `sentadapt pairs`",
                    "## `sentadapt diagnose`", "## `sentadapt cache info`", "### Recipe `consert`"):
        assert heading in text
    for option in ("`--max-steps`", "`--dev`", "`--decision`", "`--format`, `-f`", "`--bootstrap`"):
        assert f"| {option} |" in text
    for key in FLAT_KEYS:  # every training setting by its flat key, grouped or not
        assert f"| `{key}` |" in text, f"--set {key} is missing"
    assert "| `optim` |" not in text  # a group is not a key


def test_a_fields_help_is_its_row() -> None:
    @dataclass
    class Sample:
        width: int = setting(3, "How wide.")
        # a comment is for whoever reads the code, not the reference
        plain: str = "x"

    rows = options_doc.config_rows(Sample)
    assert [(row.name, row.type, row.default, row.help) for row in rows] == [("`width`", "int", "`3`", "How wide."),
                                                                             ("`plain`", "str", "`x`", "")]


def test_every_setting_is_described() -> None:
    """Each --set key and recipe setting has its help (the one place its description is written)."""
    from sentadapt.recipes import RECIPES

    blank = [row.name for row in options_doc.training_rows() if not row.help]
    for name in ("consert", "sg-opt", "clsr"):
        blank += [f"{name}.{row.name}" for row in options_doc.config_rows(RECIPES.get(name).spec.settings)
                  if not row.help]
    assert blank == []
