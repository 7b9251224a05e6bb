"""docs/options.md is generated from the code (tools/options_doc.py): it fails here when it is stale."""

from __future__ import annotations

from dataclasses import dataclass

from sentadapt.config.schema import FLAT_KEYS
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


def test_a_fields_comment_is_its_help() -> None:
    @dataclass
    class Sample:
        # the comment above,
        # on two lines
        width: int = 3  # and the one beside
        plain: str = "x"

    assert options_doc.field_comments(Sample) == {"width": "the comment above, on two lines and the one beside",
                                                  "plain": ""}
    rows = options_doc.config_rows(Sample)
    assert [(row.name, row.type, row.default) for row in rows] == [("`width`", "int", "`3`"), ("`plain`", "str", "`x`")]
