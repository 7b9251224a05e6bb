"""Presets: paper defaults for plain MLM bases, the recipe's tuned-base defaults for sentence-transformers bases
(detected from modules.json), below YAML, flags and --set; the choice is saved in config.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sentadapt.config.merging import build_config, load_run_config, save_run_config
from sentadapt.config.schema import flat_values
from sentadapt.model.resolve import ResolvedModel, resolve_model
from sentadapt.recipes import RECIPES
from sentadapt.recipes.presets import choose_preset, detect_preset, preset_changes
from tests.conftest import run_adapt

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_st_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT saved as a sentence-transformers folder (modules.json: Transformer, Pooling mean)."""
    from sentadapt.model.encoder import Encoder

    folder = tmp_path_factory.mktemp("tiny-st") / "st"
    Encoder.load(tiny_model_dir, device="cpu").save(folder)
    return folder


def _dry_run(corpus: Path, base: Path, tmp_path: Path, *extra: str):
    result = run_adapt(str(corpus), "--base", str(base), "--output", str(tmp_path / "run"), "--dev", "none",
                       "--dry-run", *extra)
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout), [line for line in result.stderr.splitlines() if line.startswith("preset")]


def test_a_plain_transformers_folder_gets_the_paper_defaults(tiny_model_dir: Path) -> None:
    assert detect_preset(resolve_model(tiny_model_dir)) == (
        "paper", f"{tiny_model_dir}: no modules.json: a plain transformers model")


def test_a_sentence_transformers_folder_is_a_tuned_base(tiny_st_dir: Path) -> None:
    assert detect_preset(resolve_model(tiny_st_dir)) == (
        "tuned-base", f"{tiny_st_dir}/modules.json declares a Pooling module (mean): a sentence-tuned model")


def test_modules_json_without_pooling_is_not_a_tuned_base(tiny_st_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no-pooling"
    folder.mkdir()
    (folder / "config.json").write_text((tiny_st_dir / "config.json").read_text())
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]))
    assert detect_preset(resolve_model(folder)) == (
        "paper", f"{folder}/modules.json lists no Pooling module: not a sentence-transformers embedding model")


def test_a_hub_model_without_a_reachable_modules_json_gets_the_paper_preset() -> None:
    # not in the local cache, and tests run with HF_HUB_OFFLINE=1: the fetch fails fast, no exception
    assert detect_preset(ResolvedModel("org/model", "org/model", "hub")) == (
        "paper", "org/model: no modules.json in the local Hugging Face cache or on the Hub (read as a plain "
                 "transformers model); pass --preset tuned-base if it is a sentence-transformers model")


def test_dry_run_on_a_tuned_base_says_which_preset_and_what_it_changed(corpus: Path, tiny_st_dir: Path,
                                                                      tmp_path: Path) -> None:
    printed, lines = _dry_run(corpus, tiny_st_dir, tmp_path)
    reason = f"{tiny_st_dir}/modules.json declares a Pooling module (mean): a sentence-tuned model"
    assert lines == [f"preset: tuned-base ({reason})", "preset tuned-base: lr 2e-05 → 5e-05",
                     "preset tuned-base: distill 0.0 → 1.0"]
    assert printed["train"]["lr"] == 5e-5 and printed["train"]["distill"] == 1.0
    assert printed["train"]["batch_size"] == 96  # the rest stays the recipe's paper defaults
    assert printed["preset"] == {"name": "tuned-base", "reason": reason, "values": {"lr": 5e-5, "distill": 1.0}}


def test_dry_run_on_a_plain_base_keeps_the_paper_defaults(corpus: Path, tiny_model_dir: Path,
                                                          tmp_path: Path) -> None:
    printed, lines = _dry_run(corpus, tiny_model_dir, tmp_path, "--recipe", "sg-opt")
    assert lines == [f"preset: paper ({tiny_model_dir}: no modules.json: a plain transformers model)",
                     "preset paper: the recipe's paper defaults apply"]
    assert printed["train"]["lr"] == 5e-5


def test_preset_paper_on_a_tuned_base_keeps_the_paper_values(corpus: Path, tiny_st_dir: Path, tmp_path: Path) -> None:
    printed, lines = _dry_run(corpus, tiny_st_dir, tmp_path, "--preset", "paper")
    assert lines == ["preset: paper (chosen with --preset paper)", "preset paper: the recipe's paper defaults apply"]
    assert printed["train"]["lr"] == 2e-5 and printed["preset"]["values"] == {}


def test_preset_tuned_base_can_be_forced_on_a_plain_base(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    printed, lines = _dry_run(corpus, tiny_model_dir, tmp_path, "--recipe", "sg-opt", "--preset", "tuned-base")
    assert lines == ["preset: tuned-base (chosen with --preset tuned-base)",
                     "preset tuned-base: export_pooling cls → auto", "preset tuned-base: distill 0.0 → 1.0"]
    assert printed["recipe_args"]["export_pooling"] == "auto" and printed["train"]["lr"] == 5e-5


@pytest.mark.parametrize(("extra", "lr"), [
    (["--lr", "3e-5"], 3e-5),  # a flag beats the preset
    (["--set", "lr=4e-5"], 4e-5),  # so does --set
    (["--config", str(REPO / "recipes" / "consert.yaml")], 2e-5),  # and the YAML (its lr: 2.0e-5)
])
def test_yaml_flags_and_set_beat_the_preset(corpus: Path, tiny_st_dir: Path, tmp_path: Path, extra: list[str],
                                            lr: float) -> None:
    printed, lines = _dry_run(corpus, tiny_st_dir, tmp_path, *extra)
    assert printed["train"]["lr"] == lr
    assert lines[1] == f"preset tuned-base: lr 2e-05 → 5e-05 (overridden: {lr} from the YAML, a flag or --set)"


def test_an_unknown_preset_is_one_line(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--preset", "fast")
    assert result.exit_code == 2
    assert result.stderr.strip() == "Error: --preset: 'fast' is not one of auto, paper, tuned-base"


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_every_recipes_tuned_base_defaults_name_real_fields(recipe: str, tiny_st_dir: Path, corpus: Path,
                                                           tmp_path: Path) -> None:
    recipe_class = RECIPES.get(recipe)
    preset = choose_preset("auto", lambda: resolve_model(tiny_st_dir), recipe_class)
    assert preset.name == "tuned-base" and preset.values == recipe_class.spec.tuned_base_defaults
    config = build_config(recipe, recipe_class.spec.settings, recipe_class.spec.train_defaults, None, {}, [],
                          preset_values=preset.values, base=str(tiny_st_dir), corpus=[str(corpus)],
                          output=str(tmp_path))
    merged = {**flat_values(config.train), **vars(config.recipe_args)}
    assert all(merged[key] == value for key, value in preset.values.items())
    assert [key for key, _, _ in preset_changes(preset.to_dict(), recipe_class)] == list(preset.values)


def test_config_yaml_keeps_the_preset_and_old_files_still_load(tiny_st_dir: Path, corpus: Path,
                                                              tmp_path: Path) -> None:
    recipe_class = RECIPES.get("consert")
    preset = choose_preset("auto", lambda: resolve_model(tiny_st_dir), recipe_class)
    config = build_config("consert", recipe_class.spec.settings, recipe_class.spec.train_defaults, None, {}, [],
                          preset_values=preset.values, preset=preset.to_dict(), base=str(tiny_st_dir),
                          corpus=[str(corpus)], output=str(tmp_path))
    save_run_config(config, tmp_path / "config.yaml")
    recipes = {name: RECIPES.get(name).spec.settings for name in RECIPES}
    loaded = load_run_config(tmp_path / "config.yaml", recipes)
    assert loaded.preset == preset.to_dict() and loaded.train.lr == 5e-5 and loaded.train.distillation.distill == 1.0
    assert loaded.to_dict() == config.to_dict()

    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    del saved["preset"]  # a run saved before presets existed
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    old = load_run_config(tmp_path / "config.yaml", recipes)
    assert old.preset is None and old.train.lr == 5e-5


@pytest.mark.parametrize("path", sorted(Path(__file__).parents[2].joinpath("recipes").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_a_recipe_yaml_repeats_its_recipes_defaults_exactly(path: Path) -> None:
    """recipes/*.yaml are documentation one can pass to --config: every value they set is the recipe's own default
    (TrainConfig < the recipe's train_defaults; its Config), so passing the file changes nothing, and a default
    changed in the code without the file fails here."""
    import yaml

    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.presets import paper_values

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    values = paper_values(RECIPES.get(data["recipe"]))
    written = {**(data.get("train") or {}), **(data.get("recipe_args") or {})}
    assert written, path
    code = {key: list(values[key]) if isinstance(values[key], tuple) else values[key] for key in written}
    assert written == code
