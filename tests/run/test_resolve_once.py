"""Issue 35: a run works out what it names once. `check_run` resolves the base model and the teacher and reads the
dev set; `train_run` and `build_inputs` take that resolved run instead of doing it again. Counted here over whole
`adapt` runs, at the single points where a model name is resolved (`resolve.resolve_model`) and a dev file is
parsed (`task_types.read_task`)."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sentadapt.storage.run_folder import RunDir
from tests.conftest import run_adapt
from tests.recipes.test_consert import nli_file  # noqa: F401  (a fixture)
from tests.teacher.test_teacher import build_tiny_teacher

QUICK = ["--batch-size", "8", "--max-steps", "2", "--max-length", "16", "--eval-every", "2"]


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: str, name: str) -> Counter[str]:
    """Calls of `module.name` by their first argument (as a string), wherever the function was imported to: every
    loaded module that holds the same function gets the counting wrapper."""
    original: Callable[..., Any] = getattr(sys.modules[module], name)
    calls: Counter[str] = Counter()

    def counted(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls[str(first)] += 1
        return original(first, *args, **kwargs)

    for loaded in list(sys.modules.values()):
        if getattr(loaded, name, None) is original:
            monkeypatch.setattr(loaded, name, counted)
    return calls


@pytest.fixture
def resolved_models(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    # modules that import resolve_model by name at their top: loaded now, so their copy is counted too
    import sentadapt.model.encoder
    import sentadapt.run.plan  # noqa: F401

    return _count_calls(monkeypatch, "sentadapt.model.resolve", "resolve_model")


@pytest.fixture
def parsed_dev_files(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    import sentadapt.evaluation.task_types  # noqa: F401

    return _count_calls(monkeypatch, "sentadapt.evaluation.task_types", "read_task")


def test_one_run_resolves_its_base_once_and_parses_its_dev_file_once(
        tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path, resolved_models: Counter[str],
        parsed_dev_files: Counter[str]) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--dev", str(pairs_tsv), *QUICK)
    assert result.exit_code == 0, result.output
    assert resolved_models == {str(tiny_model_dir): 1}
    assert parsed_dev_files == {str(pairs_tsv): 1}


def test_a_dry_run_resolves_the_base_once_and_never_parses_the_dev_file(
        tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path, resolved_models: Counter[str],
        parsed_dev_files: Counter[str]) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--dev", str(pairs_tsv), "--dry-run", *QUICK)
    assert result.exit_code == 0, result.output
    assert f"model: {tiny_model_dir} → " in result.stderr
    assert resolved_models == {str(tiny_model_dir): 1}
    assert not parsed_dev_files


def test_a_resumed_run_resolves_its_base_once_and_parses_its_dev_file_once(
        tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path, resolved_models: Counter[str],
        parsed_dev_files: Counter[str]) -> None:
    output = tmp_path / "run"
    first = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
                      "--set", "checkpoint_every=1", *QUICK)
    assert first.exit_code == 0, first.output
    run_dir = RunDir(output)
    run_dir.metrics_file.unlink()  # as if it had stopped after its checkpoint at step 1
    shutil.rmtree(run_dir.checkpoint(2))
    resolved_models.clear()
    parsed_dev_files.clear()
    again = run_adapt("--resume", "--output", str(output))
    assert again.exit_code == 0, again.output
    assert resolved_models == {str(tiny_model_dir): 1}
    assert parsed_dev_files == {str(pairs_tsv): 1}


def test_a_teacher_run_resolves_the_teacher_once(tiny_model_dir: Path, corpus: Path, pairs_tsv: Path,
                                                 tmp_path: Path, resolved_models: Counter[str],
                                                 parsed_dev_files: Counter[str]) -> None:
    teacher = build_tiny_teacher(tmp_path / "teacher")
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--dev", str(pairs_tsv), "--teacher", str(teacher), "--set", "teacher_check=off", *QUICK)
    assert result.exit_code == 0, result.output
    assert resolved_models == {str(tiny_model_dir): 1, str(teacher): 1}
    assert parsed_dev_files == {str(pairs_tsv): 1}


def test_a_two_stage_run_resolves_each_stages_base_once(tiny_model_dir: Path, nli_file: Path,  # noqa: F811
                                                        pairs_tsv: Path, tmp_path: Path,
                                                        resolved_models: Counter[str],
                                                        parsed_dev_files: Counter[str]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(24)))
    output = tmp_path / "run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
                       "--set", "mode=sup-unsup", "--set", f"nli={nli_file}", "--batch-size", "4", "--max-steps",
                       "2", "--max-length", "16")
    assert result.exit_code == 0, result.output
    # the second stage starts from the first stage's model: a folder of its own, resolved once it exists
    assert resolved_models == {str(tiny_model_dir): 1, str(output / "stage-1-sup"): 1}
    assert parsed_dev_files == {str(pairs_tsv): 1}  # one dev set for both stages


def test_an_auto_run_resolves_the_base_once_and_parses_the_dev_file_once(
        tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path, resolved_models: Counter[str],
        parsed_dev_files: Counter[str]) -> None:
    result = run_adapt(str(corpus), "--recipe", "auto", "--base", str(tiny_model_dir), "--dev", str(pairs_tsv),
                       "--output", str(tmp_path / "run"), "--max-steps", "2", "--eval-every", "2", "--max-length",
                       "16", "--candidates", "consert:batch_size=8,sg-opt:batch_size=8")
    assert result.exit_code == 0, result.output
    assert resolved_models[str(tiny_model_dir)] == 1  # for every candidate and the base's shared dev score
    assert parsed_dev_files == {str(pairs_tsv): 1}


def test_a_run_parses_the_model_folder_files_and_the_config_yaml_once(tiny_model_dir: Path, corpus: Path,
                                                                        tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: presets, prompts and the encoder each read modules.json and the Pooling config, and the recipe's
    name, the config and --recipe auto's check each read --config: every one of those files is parsed once."""
    import json

    import yaml

    import sentadapt.model.st_modules as st_modules

    model = tmp_path / "st-model"
    shutil.copytree(tiny_model_dir, model)
    (model / "1_Pooling").mkdir()
    (model / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                                 "pooling_mode_mean_tokens": True}))
    (model / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    config = tmp_path / "consert.yaml"
    config.write_text("recipe: consert\ntrain:\n  lr: 3.0e-5\n")
    parsed: Counter[str] = Counter()
    parse_json, safe_load = st_modules._parse_json, yaml.safe_load
    monkeypatch.setattr(st_modules, "_parse_json", lambda path: parsed.update([path.name]) or parse_json(path))
    monkeypatch.setattr(yaml, "safe_load", lambda text: parsed.update(["yaml"]) or safe_load(text))
    result = run_adapt(str(corpus), "--base", str(model), "--output", str(tmp_path / "run"), "--dev", "none",
                       "--config", str(config), *QUICK)
    assert result.exit_code == 0, result.output
    assert parsed["modules.json"] == 1 and parsed["config.json"] == 1, parsed  # (the folder's and the Pooling's:
    # config.json of the backbone is read by transformers, not here)
    assert parsed["yaml"] == 1, parsed
