"""The run spec (sentadapt/run/adapt_options.py): the CLI's `adapt` options, the API's keywords and the config agree,
and a config field with nothing else written is a `--set` key, an API keyword and a config.yaml entry (issue 35)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from sentadapt.cli import app
from sentadapt.config.merging import load_run_config, save_run_config
from sentadapt.config.schema import FLAT_KEYS, RunConfig, key_field
from sentadapt.errors import ConfigError
from sentadapt.recipes import RECIPES
from sentadapt.run.adapt_options import ADAPT_OPTIONS, REQUEST, RUN, TRAIN, run_fields_without_option
from sentadapt.run.dispatch import adapt
from tests.conftest import run_adapt

API_ONLY = ("note", "progress", "config_keys")  # callbacks and the config keywords: no flag of their own


def _cli_params() -> dict[str, object]:
    command = typer.main.get_command(app).commands["adapt"]  # type: ignore[attr-defined]
    return {param.name: param for param in command.params}


def test_the_cli_offers_exactly_the_spec_options_with_their_flags_and_defaults() -> None:
    params = _cli_params()
    assert list(params) == [option.name for option in ADAPT_OPTIONS]
    for option in ADAPT_OPTIONS:
        param = params[option.name]
        if option.flag:
            assert option.flag in param.opts, option.name  # type: ignore[attr-defined]
        default = param.default  # type: ignore[attr-defined]
        if option.target == TRAIN:  # the config decides; a switch is off
            assert default in (None, False), option.name
        elif option.default is not ...:  # nothing given: None, [] and () alike
            assert default == option.default or (_empty(default) and _empty(option.default)), option.name


def _empty(value: object) -> bool:
    return value is None or value == [] or value == ()


def test_the_api_keywords_are_the_spec_options_with_the_same_defaults() -> None:
    parameters = inspect.signature(adapt).parameters
    assert sorted(name for name in parameters if name not in API_ONLY) == sorted(o.name for o in ADAPT_OPTIONS)
    for option in ADAPT_OPTIONS:
        default = parameters[option.name].default
        expected = inspect.Parameter.empty if option.default is ... else option.default
        assert default == expected, option.name


def test_every_config_option_is_a_field_of_its_config_and_every_run_field_is_filled() -> None:
    train_fields = set(FLAT_KEYS)  # a flag names a training setting by its flat key
    run_fields = {f.name for f in dataclasses.fields(RunConfig)}
    for option in ADAPT_OPTIONS:
        assert option.target in (TRAIN, RUN, REQUEST)
        if option.target != REQUEST:
            assert option.name in (train_fields if option.target == TRAIN else run_fields), option.name
            assert option.value_type is not None
    assert run_fields_without_option() == []  # a new RunConfig field needs an option (or adapt fills it)


def test_a_config_flags_help_is_its_fields_help_written_once() -> None:
    run_fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    for option in ADAPT_OPTIONS:
        if option.target != REQUEST:
            field = key_field(option.name) if option.target == TRAIN else run_fields[option.name]
            assert option.help == field.metadata["help"] and option.help.endswith("."), option.name


def test_every_field_without_a_flag_is_an_api_keyword(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """No list names them: a TrainConfig or recipe field is a keyword, typed, with --set's precedence."""
    result = adapt(corpus, output=tmp_path / "run", base=str(tiny_model_dir), dry_run=True, lr=3e-5,
                   distill_kind="mse", temperature=0.07, min_examples="500", set_options=["temperature=0.09"])
    (config,) = result.configs
    assert (config.train.lr, config.train.distillation.distill_kind, config.train.min_examples) == (3e-5, "mse", 500)
    assert config.recipe_args.temperature == 0.07  # the keyword is applied after --set strings
    with pytest.raises(ConfigError) as caught:
        adapt(corpus, output=tmp_path / "run", base=str(tiny_model_dir), dry_run=True, distill_knd="mse")
    assert str(caught.value).startswith("adapt(): Unknown keyword 'distill_knd'. Did you mean: distill_kind, ")


def test_a_field_is_a_set_key_and_a_config_yaml_entry(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    done = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dry-run",
                     "--set", "distill_kind=cosine", "--tf32", "off", "--grad-checkpointing")
    assert done.exit_code == 0, done.output
    saved = yaml.safe_load(done.stdout)
    assert (saved["train"]["distill_kind"], saved["train"]["tf32"], saved["train"]["gradient_checkpointing"]) == (
        "cosine", False, True)


def test_a_corpus_folder_is_recorded_as_its_files(tiny_model_dir: Path, tmp_path: Path) -> None:
    """config.yaml lists the files the folder held (what a resumed run reads: not a file added since); the summary
    names the first three of a longer list."""
    from sentadapt.text_tables import some_of

    folder = tmp_path / "texts"
    folder.mkdir()
    for name in ("b.txt", "a.txt"):
        (folder / name).write_text("".join(f"{name} sentence {i}\n" for i in range(12)))
    done = run_adapt(str(folder), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev", "none",
                     "--max-steps", "2", "--batch-size", "4")
    assert done.exit_code == 0, done.output
    assert "read 24 lines from 2 files" in done.stderr
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["corpus"] == [str(folder / "a.txt"), str(folder / "b.txt")]
    assert some_of(["a", "b", "c", "d"]) == "a, b, c, d" and some_of(list("abcdefg")) == "a, b, c and 4 more files"


def test_config_yaml_reads_back_every_field_it_wrote(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    (config,) = adapt(corpus, output=tmp_path / "run", base=str(tiny_model_dir), dry_run=True, dev="none",
                      decision="strict", risk=0.1, streaming=True, num_proc=2, distill_kind="mse").configs
    path = tmp_path / "config.yaml"
    save_run_config(config, path)
    again = load_run_config(path, {name: RECIPES.get(name).spec.settings for name in RECIPES})
    assert again.to_dict() == config.to_dict()


@pytest.mark.parametrize(("command", "call", "cli_only", "renamed"), [
    ("sentadapt.cli.eval:eval_command", "sentadapt.api:evaluate", {"show_subsets"}, {}),
    ("sentadapt.cli.diagnose:diagnose_command", "sentadapt.api:diagnose", set(), {}),
    ("sentadapt.cli.export:export_command", "sentadapt.api:export", set(), {"export_format": "format"}),
])
def test_a_command_passes_its_options_to_its_call_by_name(command: str, call: str, cli_only: set[str],
                                                          renamed: dict[str, str]) -> None:
    """eval, diagnose and export hand their parameters to the library call as they are (issue 43: each option
    spelled in the command's signature and the call's, not a third time in between): the names must be the same."""
    import importlib

    def function(spec: str) -> Any:
        module, name = spec.split(":")
        return getattr(importlib.import_module(module), name)

    cli = {renamed.get(name, name) for name in inspect.signature(function(command)).parameters} - cli_only
    api = set(inspect.signature(function(call)).parameters) - {"progress", "note"}
    assert cli == api


def test_the_api_checks_each_keyword_against_the_option_table_and_names_its_flag(tmp_path: Path) -> None:
    """adapt()'s signature is generated from the table (issue 69: no third declaration); its keywords are checked as
    every public call's are (options.checked), the error naming the flag."""
    with pytest.raises(ConfigError) as caught:
        adapt("corpus.txt", output=tmp_path / "run", gradient_checkpointing="yes")
    assert str(caught.value) == ("Invalid value for '--grad-checkpointing': expected True or False, got str 'yes'")
    with pytest.raises(TypeError, match="missing a required argument: 'output'"):
        adapt("corpus.txt")  # as a Python call without its required keyword: the signature says so


def test_resume_followed_by_a_run_folder_and_no_output_continues_that_folder(tmp_path: Path) -> None:
    """`adapt --resume runs/x` (as transformers' --resume_from_checkpoint names what it continues) is `--resume
    --output runs/x`; a command line with --output, a value that is not a run folder, or words after `--` is kept."""
    from sentadapt.run.adapt_options import resume_folder_as_output

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("recipe: consert\n")
    assert resume_folder_as_output(["--resume", str(run)]) == ["--resume", "--output", str(run)]
    assert resume_folder_as_output(["c.txt", "--resume", str(run), "--max-steps", "5"]) == [
        "c.txt", "--resume", "--output", str(run), "--max-steps", "5"]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "config.yaml").write_text("theme: dark\n")  # another tool's config is not a run
    for args in (["--resume", str(run), "-o", "x"], [f"--output={run}", "--resume", str(run)], [f"-o{run}", "--resume",
                 str(run)], ["--resume", "auto"],
                 ["--resume", str(tmp_path / "notes")], ["--", "--resume", str(run)], [str(run)]):
        assert resume_folder_as_output(args) == args, args


def test_the_command_resumes_the_run_folder_named_after_resume(corpus: Path, tiny_model_dir: Path,
                                                               tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), "--max-steps", "2",
                      "--batch-size", "8", "--max-length", "16")
    assert first.exit_code == 0, first.output
    again = run_adapt("--resume", str(run))
    assert again.exit_code == 2  # a usage error, as `--resume --output RUN` on a finished run
    assert again.stderr.startswith(f"Error: --resume: {run} is a finished run (its metrics.json is written)")
