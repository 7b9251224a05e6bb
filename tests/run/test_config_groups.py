"""TrainConfig in groups (issue 59, item 4): at most 30 top-level fields, every setting still one flat key for
--set, YAML and config.yaml, and a config.yaml written before the groups still resumes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from sentadapt.config.merging import load_run_config, save_run_config, train_config, with_overrides
from sentadapt.config.schema import FLAT_KEYS, GROUPS, RunConfig, TrainConfig, flat_values
from sentadapt.errors import ConfigError
from sentadapt.recipes import RECIPES

# the 52 keys config.yaml's train section held before the groups (the commit before them)
KEYS_BEFORE = (
    "max_steps", "epochs", "min_examples", "max_epochs", "batch_size", "lr", "weight_decay", "warmup_ratio",
    "grad_accum", "max_grad_norm", "max_length", "mixed_precision", "tf32", "eval_every", "evals_per_pass",
    "checkpoint_every", "keep_checkpoints", "patience", "seed", "adam_beta1", "adam_beta2", "adam_eps", "optimizer",
    "schedule", "length_grouping", "pad_multiple", "gradient_checkpointing", "compile", "lora_r", "lora_alpha",
    "lora_dropout", "lora_targets", "dedup", "on_nan", "max_nan_skips", "eval_batch_size", "log_every", "report_to",
    "distill", "distill_kind", "distill_temperature", "teacher_weight", "distill_batches", "distill_neighbours",
    "teacher_check", "teacher_blend", "teacher_text_field", "teacher_vector_field", "recipe_weight", "matryoshka",
    "matryoshka_weights", "sizes",
)


def test_at_most_30_top_level_fields_and_the_same_52_keys() -> None:
    assert len(dataclasses.fields(TrainConfig)) <= 30
    assert sorted(FLAT_KEYS) == sorted(KEYS_BEFORE)
    assert sorted(flat_values(TrainConfig())) == sorted(KEYS_BEFORE)
    assert set(GROUPS) == {"optim", "evaluation", "records", "lora", "distillation", "teacher", "dims"}


def test_a_flat_key_and_a_written_out_group_set_the_same_field() -> None:
    flat = train_config(lora_r="16", adam_beta1=0.8, sizes="384,96")
    nested = with_overrides(TrainConfig(), {"lora": {"r": 16}, "optim": {"adam_beta1": 0.8},
                                            "dims": {"sizes": [384, 96]}}, "x.yaml: train")
    assert flat == nested and flat.lora.r == 16 and flat.optim.adam_beta1 == 0.8 and flat.dims.sizes == (384, 96)
    with pytest.raises(ConfigError) as error:
        with_overrides(TrainConfig(), {"lora": {"rank": 16}}, "x.yaml: train")
    assert str(error.value).startswith("x.yaml: train: lora: Unknown key 'rank'")
    with pytest.raises(ConfigError) as error:
        train_config(lora_rank=16)
    assert "Unknown key 'lora_rank'" in str(error.value) and "lora_r" in str(error.value)


def test_one_name_per_setting_its_field_or_its_groups_prefix_and_field() -> None:
    """Issue 69: a flat key is derived from where the setting lives — the field's own name, after the group's
    KEY_PREFIX for lora and teacher — so code, YAML, --set and config.yaml name a setting alike."""
    assert {group: getattr(settings, "KEY_PREFIX", "") for group, settings in GROUPS.items()
            if getattr(settings, "KEY_PREFIX", "")} == {"lora": "lora_", "teacher": "teacher_"}
    for key, (group, name) in FLAT_KEYS.items():
        assert key == (name if group is None else getattr(GROUPS[group], "KEY_PREFIX", "") + name)
    assert FLAT_KEYS["adam_beta1"] == ("optim", "adam_beta1") and FLAT_KEYS["sizes"] == ("dims", "sizes")
    assert FLAT_KEYS["distill"] == ("distillation", "distill") and FLAT_KEYS["lora_r"] == ("lora", "r")
    # a group written out with a field's name from before (optim.beta1): the error names the key it is now
    with pytest.raises(ConfigError) as error:
        with_overrides(TrainConfig(), {"optim": {"beta1": 0.8}}, "x.yaml: train")
    assert str(error.value).startswith("x.yaml: train: optim: Unknown key 'beta1'. Did you mean: adam_beta1")


def test_config_yaml_keeps_its_flat_train_section_and_an_old_one_resumes(tmp_path: Path) -> None:
    recipe = RECIPES.get("consert")
    config = RunConfig(recipe="consert", base="m", corpus=["c.txt"], output="o",
                       train=train_config(lora_r=8, distill=0.5, matryoshka="384,192", teacher_blend="auto"),
                       recipe_args=recipe.spec.settings())
    path = tmp_path / "config.yaml"
    save_run_config(config, path)
    train = yaml.safe_load(path.read_text())["train"]
    assert sorted(train) == sorted(KEYS_BEFORE) and train["lora_r"] == 8 and train["matryoshka"] == [384, 192]
    assert load_run_config(path, {"consert": recipe.spec.settings}) == config
    # a config.yaml from before the groups: the same flat section, keys in the old order
    old = yaml.safe_load(path.read_text())
    old["train"] = {name: old["train"][name] for name in KEYS_BEFORE}
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    assert load_run_config(path, {"consert": recipe.spec.settings}).train == config.train
