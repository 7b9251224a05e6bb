"""`adapt --dry-run` prints a config file: valid YAML at any terminal width and path length (`--dry-run > run.yaml`).

Run as a real command in a fresh interpreter, as a user would: rich reads COLUMNS when its console is created, so an
in-process run could not narrow the terminal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

LENGTH = 200


def _long_output(tmp_path: Path) -> Path:
    """A 200-character output path with spaces (YAML folds those) and an emoji code (rich would replace it)."""
    stem = str(tmp_path / "run dir :rocket: ")
    assert len(stem) < LENGTH, stem
    path = Path(stem + "x" * (LENGTH - len(stem)))
    assert len(str(path)) == LENGTH
    return path


def _dry_run(columns: int, *args: str) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "24"}
    result = subprocess.run([sys.executable, "-m", "sentadapt", "adapt", *args, "--dry-run"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_dry_run_is_valid_yaml_at_width_40_with_a_200_character_path(corpus: Path, tiny_model_dir: Path,
                                                                      tmp_path: Path) -> None:
    output = _long_output(tmp_path)
    args = (str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", "none")
    narrow = _dry_run(40, *args)
    printed = yaml.safe_load(narrow)
    assert printed["output"] == str(output) and printed["corpus"] == [str(corpus)]
    assert printed["base"] == str(tiny_model_dir) and printed["recipe"] == "consert"
    assert _dry_run(1000, *args) == narrow  # nothing in it depends on the terminal
    assert not output.exists()


def test_auto_dry_run_is_valid_yaml_at_width_40_with_a_200_character_path(corpus: Path, pairs_tsv: Path,
                                                                           tiny_model_dir: Path,
                                                                           tmp_path: Path) -> None:
    train_pairs = tmp_path / "train-pairs.tsv"
    train_pairs.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"the server {i} is down\tserver {i} is not running\t4.5\n" for i in range(40)))
    output = _long_output(tmp_path)
    args = (str(corpus), str(train_pairs), "--recipe", "auto", "--base", str(tiny_model_dir), "--dev",
            str(pairs_tsv), "--output", str(output), "--max-steps", "4", "--candidates",
            "consert:batch_size=8,clsr:batch_size=8")
    narrow = _dry_run(40, *args)
    documents = list(yaml.safe_load_all(narrow))
    assert [d["recipe"] for d in documents] == ["consert", "clsr"]
    assert [d["corpus"] for d in documents] == [[str(corpus)], [str(train_pairs)]]
    assert all(d["output"].startswith(str(output) + os.sep) and d["dev"] == str(pairs_tsv) for d in documents)
    assert _dry_run(1000, *args) == narrow
    assert not output.exists()
