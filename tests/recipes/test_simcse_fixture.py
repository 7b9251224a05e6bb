"""Issue 85: a recipe is written on the contract alone. tests/recipes/simcse.py (SimCSE's dropout views and NT-Xent,
under 80 lines, no file of the package touched) is registered here and trained one step by `sentadapt adapt`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sentadapt.model.encoder import Encoder
from sentadapt.recipes import RECIPES
from sentadapt.recipes.base import register_recipe
from tests.conftest import run_adapt
from tests.recipes import simcse


@pytest.fixture
def registered() -> object:
    register_recipe("simcse")(simcse.SimcseRecipe)
    yield simcse.SimcseRecipe
    RECIPES._items.pop("simcse", None)  # type: ignore[attr-defined]


def test_the_fixture_is_a_recipe_in_at_most_80_lines() -> None:
    assert len(Path(simcse.__file__).read_text(encoding="utf-8").splitlines()) <= 80


def test_a_simcse_recipe_plans_and_trains_one_step_through_adapt(registered: object, tiny_model_dir: Path,
                                                                 tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(24)))
    common = [str(corpus), "--recipe", "simcse", "--base", str(tiny_model_dir), "--dev", "none",
              "--batch-size", "8", "--max-length", "16", "--max-steps", "1", "--set", "temperature=0.1",
              "--set", "log_every=1"]
    planned = run_adapt(*common, "--output", str(tmp_path / "planned"), "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "24 sentences" in planned.output  # the stage's count, before any model loads
    output = tmp_path / "run"
    result = run_adapt(*common, "--output", str(output))
    assert result.exit_code == 0, result.output
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["recipe"] == "simcse" and metrics["steps"] == 1
    record = next(json.loads(line) for line in (output / "train.log").read_text().splitlines() if "loss" in line)
    # NT-Xent over 2 × 8 views at τ 0.1: a loss between 0 and ln(15) ≈ 2.71 (the positive among 15 others)
    assert 0 < record["loss"] < math.log(15) + 1e-3 and record["contrastive"] == record["loss"]
    assert "temperature: 0.1" in (output / "config.yaml").read_text()
    assert Encoder.load(output, device="cpu").encode(["the server is down"]).shape == (1, 32)
