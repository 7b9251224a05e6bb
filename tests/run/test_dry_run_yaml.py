"""`adapt --dry-run` prints the run's config: valid YAML at any terminal width and path length (`--dry-run >
run.yaml`), whose recipe, train and recipe_args sections are a `--config` file.

Run as a real command in a fresh interpreter, as a user would: rich reads COLUMNS when its console is created, so an
in-process run could not narrow the terminal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
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


def _sources(text: str) -> dict[str, str]:
    """`section.key` (or a run option's name) → the comment after it, for each value the dry run annotated."""
    sources, section = {}, ""
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            section = line.partition(":")[0]
        value, hash_mark, comment = line.partition("  # ")
        if hash_mark and not line.startswith("#"):
            sources[f"{section}.{value.strip().partition(':')[0]}" if line.startswith("  ") else section] = comment
    return sources


def test_dry_run_says_which_layer_set_each_value(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Issue 69: default < paper < preset < the --config file < flag < --set, each value annotated with the layer that
    set it last; the comments leave a YAML document that loads as the config."""
    config_file = tmp_path / "mine.yaml"
    config_file.write_text("recipe: consert\ntrain:\n  lr: 3e-5\n  batch_size: 16\n  lora: {r: 8}\n"
                           "recipe_args:\n  temperature: 0.07\n")
    text = _dry_run(80, str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev",
                    "none", "--config", str(config_file), "--batch-size", "8", "--set", "warmup_ratio=0.2")
    sources = _sources(text)
    assert {key: sources[key] for key in ("train.lr", "train.lora_r", "recipe_args.temperature", "train.batch_size",
                                          "train.warmup_ratio", "train.seed", "train.max_length")} == {
        "train.lr": "mine.yaml", "train.lora_r": "mine.yaml", "recipe_args.temperature": "mine.yaml",
        "train.batch_size": "flag", "train.warmup_ratio": "--set", "train.seed": "default", "train.max_length": "paper"}
    printed = yaml.safe_load(text)
    assert printed["train"]["lr"] == 3e-5 and printed["train"]["batch_size"] == 8
    assert printed["recipe_args"]["temperature"] == 0.07 and printed["train"]["lora_r"] == 8
    options = {"recipe", "base", "dev", "dev_metric", "data_dir", "text_column", "encoding_errors", "streaming",
               "num_proc", "decision", "risk", "teacher", "prompt"}  # the run's own: a flag or its default
    assert set(sources) == {f"train.{key}" for key in printed["train"]} | {
        f"recipe_args.{key}" for key in printed["recipe_args"]} | options
    assert {key: sources[key] for key in ("recipe", "base", "dev", "decision", "risk", "teacher")} == {
        "recipe": "mine.yaml", "base": "flag", "dev": "flag", "decision": "default", "risk": "default",
        "teacher": "default"}


def test_an_auto_config_file_lists_its_candidates_and_each_candidate_value_says_so(
        corpus: Path, pairs_tsv: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """docs/usage.md: a `recipe: auto` config file with a `train:` section and a `candidates:` list (refused as an
    unknown key before); a candidate's own setting is annotated `candidate`, the file's `train:` values by its name."""
    config_file = tmp_path / "auto.yaml"
    config_file.write_text("recipe: auto\ntrain:\n  lr: 3e-5\ncandidates: [consert, 'consert:lr=1e-5']\n")
    text = _dry_run(80, str(corpus), "--recipe", "auto", "--base", str(tiny_model_dir), "--dev", str(pairs_tsv),
                    "--output", str(tmp_path / "run"), "--max-steps", "4", "--config", str(config_file))
    documents = text.split("\n---\n")
    assert [yaml.safe_load(d)["train"]["lr"] for d in documents] == [3e-5, 1e-5]
    assert [_sources(d)["train.lr"] for d in documents] == ["auto.yaml", "candidate"]
    assert [_sources(d)["train.max_steps"] for d in documents] == ["flag", "flag"]
    assert [(_sources(d)["recipe"], _sources(d)["dev"]) for d in documents] == [("candidate", "flag")] * 2


def test_a_single_recipe_config_file_with_candidates_is_refused(corpus: Path, tiny_model_dir: Path,
                                                                tmp_path: Path) -> None:
    config_file = tmp_path / "mine.yaml"
    config_file.write_text("recipe: consert\ncandidates: [consert]\n")
    result = subprocess.run([sys.executable, "-m", "sentadapt", "adapt", str(corpus), "--base", str(tiny_model_dir),
                             "--output", str(tmp_path / "run"), "--config", str(config_file), "--dry-run"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and not result.stdout
    assert result.stderr == (f"Error: {config_file}: candidates: a list for recipe: auto; drop it, or set recipe: "
                             "auto\n")


def test_a_resumed_run_says_its_values_come_from_its_config_yaml(tmp_path: Path) -> None:
    from sentadapt.config.merging import dry_run_yaml, load_run_config, save_run_config, train_config
    from sentadapt.config.schema import RunConfig
    from sentadapt.recipes import RECIPES

    recipe = RECIPES.get("consert")
    saved = RunConfig(recipe="consert", base="m", corpus=["c.txt"], output="o", train=train_config(lr=3e-5),
                      recipe_args=recipe.spec.settings(), sources={"train.lr": "flag"})
    save_run_config(saved, tmp_path / "config.yaml")
    loaded = load_run_config(tmp_path / "config.yaml", {"consert": recipe.spec.settings})
    text = dry_run_yaml(loaded)
    assert set(_sources(text).values()) == {"config.yaml"}
    assert yaml.safe_load(text) == saved.to_dict() and loaded == saved  # sources are not saved nor compared


def test_a_value_with_a_line_break_or_a_hash_keeps_the_dry_run_valid_yaml() -> None:
    """A comment after the first line of a text that goes on would be part of the text: such a value is left
    without one, and every other value keeps its own."""
    from sentadapt.config.merging import dry_run_yaml, train_config
    from sentadapt.config.schema import RunConfig
    from sentadapt.recipes import RECIPES

    recipe = RECIPES.get("consert")
    config = RunConfig(recipe="consert", base="m", corpus=["c.txt"], output="o",
                       train=train_config(lora_targets="query\nkey", teacher_text_field="a # b"),
                       recipe_args=recipe.spec.settings(),
                       sources={"train.lora_targets": "flag", "train.distill": "--set"})
    text = dry_run_yaml(config)
    assert yaml.safe_load(text) == config.to_dict()
    sources = _sources(text)
    assert "train.lora_targets" not in sources and sources["train.teacher_text_field"] == "default"
    assert sources["train.distill"] == "--set" and sources["recipe_args.temperature"] == "default"


def test_a_dry_runs_whole_output_given_as_a_config_file_names_the_run_option_to_move(
        corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """`--dry-run > run.yaml` then `--config run.yaml`: one line that says `base` (the first run option in it) goes on
    the command line and which sections to keep, not "Unknown top-level key 'base'"; those sections are accepted."""
    args = [str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev", "none"]
    whole = tmp_path / "run.yaml"
    whole.write_text(_dry_run(80, *args, "--batch-size", "8"))
    result = subprocess.run([sys.executable, "-m", "sentadapt", "adapt", *args, "--config", str(whole), "--dry-run"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr == (f"Error: {whole}: 'base' is a run option, not a config file's: give it on the command "
                             "line (--base); a --config file holds recipe, train and recipe_args (of a --dry-run's "
                             "output, keep those)\n")
    kept = tmp_path / "kept.yaml"
    kept.write_text(yaml.safe_dump({key: yaml.safe_load(whole.read_text())[key]
                                    for key in ("recipe", "train", "recipe_args")}))
    assert yaml.safe_load(_dry_run(80, *args, "--config", str(kept)))["train"]["batch_size"] == 8


def test_each_run_field_in_a_config_file_is_named_as_the_option_it_is_or_a_record_to_delete(tmp_path: Path) -> None:
    """The message's flag is derived from the field's name: every run field a user gives is an `adapt` option of
    that name (the corpus its arguments), and what a run records (preset, corpus_sha256) is said to be deleted."""
    import dataclasses

    import pytest

    from sentadapt.config.merging import load_yaml
    from sentadapt.config.schema import RunConfig
    from sentadapt.errors import ConfigError
    from sentadapt.run.adapt_options import OPTIONS_BY_NAME

    allowed = {"recipe", "train", "recipe_args"}
    for item in dataclasses.fields(RunConfig):
        if item.name in allowed:
            continue
        path = tmp_path / f"{item.name}.yaml"
        path.write_text(f"recipe: consert\n{item.name}: x\n")
        with pytest.raises(ConfigError) as error:
            load_yaml(path)
        if item.name in ("preset", "corpus_sha256", "sources"):
            assert f"'{item.name}' is what a run records, not a setting: delete it;" in str(error.value)
        elif item.name == "corpus":
            assert "give it on the command line (its CORPUS arguments)" in str(error.value)
        else:
            assert OPTIONS_BY_NAME[item.name].flag == f"--{item.name.replace('_', '-')}"
            assert f"give it on the command line ({OPTIONS_BY_NAME[item.name].flag});" in str(error.value)


def test_a_value_an_environment_variable_gave_is_its_not_a_flags(corpus: Path, tiny_model_dir: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 82: `--dry-run` labelled data_dir `# flag` when it came from $SENTADAPT_DATA_DIR."""
    data = tmp_path / "sts"
    data.mkdir()
    monkeypatch.setenv("SENTADAPT_DATA_DIR", str(data))
    args = (str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev", "none")
    assert _sources(_dry_run(120, *args))["data_dir"] == "$SENTADAPT_DATA_DIR"
    assert _sources(_dry_run(120, *args, "--data-dir", str(tmp_path)))["data_dir"] == "flag"


def test_with_stderr_merged_the_notes_after_the_config_are_set_apart_from_it(corpus: Path, tiny_model_dir: Path,
                                                                            tmp_path: Path) -> None:
    """Issue 82: `--dry-run 2>&1` ran the config into the next message ("preset: tuned-base (…)" read as one more
    key of the YAML); a blank line now ends the document before the notes."""
    import shutil

    tuned = tmp_path / "tuned"  # a sentence-transformers folder: a preset note follows the config
    shutil.copytree(tiny_model_dir, tuned)
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    result = subprocess.run(f"{sys.executable} -m sentadapt adapt {corpus} --base {tuned} --output {tmp_path / 'run'} "
                            "--dev none --dry-run 2>&1", shell=True, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith("  ") and "# " in line)  # the config's last line
    assert lines[last + 1] == "" and lines[last + 2].startswith(("preset:", "planned:")), lines[last:last + 3]
