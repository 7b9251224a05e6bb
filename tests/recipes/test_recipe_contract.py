"""The recipe contract, checked for EVERY registered recipe (a new one is covered by registering it).

On the tiny random BERT of conftest.py, each recipe: trains 2 optimizer steps through the real loop (the
`adapt` command), resumes from a checkpoint exactly where an uninterrupted run goes, publishes the pooling
it trained with (modules.json = metrics.json = the reloaded encoder) and exports to a sentence-transformers
folder that reloads with the same vectors; and its first two losses on a fixed seed equal the golden values
below, so a silent numeric change in a recipe (its loss, views, heads or update) fails loudly.

Adding a recipe: it runs here with its own defaults on the inputs its `trains_on` names (a pairs file or a
corpus) and the shared flags below; `test_golden_losses` then fails with the losses to write into GOLDEN_LOSSES.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from sentadapt.config.schema import RecipeConfig
from sentadapt.model.encoder import Encoder
from sentadapt.model.st_format import read_layout
from sentadapt.recipes import RECIPES
from sentadapt.recipes.base import RecipeBase, RecipeSpec, register_recipe
from sentadapt.train.loop import TrainingInterrupted
from tests.conftest import FLOAT32_RTOL, TINY_SENTENCES, run_adapt, run_config
from tests.train.test_train import Recorder, train

NAMES = RECIPES.names()
# What every recipe trains with here: small batches and sequences, an lr at which one step moves the losses.
FLAGS = {"batch_size": 8, "max_length": 16, "lr": 1e-3, "eval_every": 0, "log_every": 1}
# Settings a recipe needs to stay tiny (SG-OPT's 4096-wide head would make each checkpoint 200 MB).
SETTINGS: dict[str, tuple[str, ...]] = {"sg-opt": ("head_hidden=16",)}
# Golden losses (train.log, steps 1 and 2) on the CPU with the default seed (42), computed once with the code as
# it was before the explicit contract (issue 26 item 4); CLSR's with its MLP and projection then given their own
# init seed (recipes/clsr.py INIT_SEED: before, they drew from whatever state the process's RNG was in, so an
# in-process run depended on the tests before it). Two correct CPUs differ by ~1e-6 relative here (measured: 1
# thread with ATEN_CPU_CAPABILITY=default vs 2 threads with avx2: 3e-7); 1e-4 relative is far above that
# (conftest.py's tolerance rule) and far below any real change of a recipe's numbers.
GOLDEN_LOSSES: dict[str, tuple[float, float]] = {
    "clsr": (2.832705, 2.763714),
    "consert": (2.771407, 2.890032),
    "sg-opt": (22.916136, 20.023048),
}
GOLDEN_RTOL = 1e-4


def _cli_arguments(name: str, inputs: dict[str, Path], model: Path, output: Path, steps: int) -> list[str]:
    flags = {**FLAGS, "max_steps": steps}
    arguments = [str(inputs[RECIPES.get(name).spec.trains_on]), "--recipe", name, "--base", str(model),
                 "--output", str(output), "--dev", "none", "--batch-size", str(flags["batch_size"]),
                 "--max-length", str(flags["max_length"]), "--lr", str(flags["lr"]),
                 "--eval-every", str(flags["eval_every"]), "--max-steps", str(steps),
                 "--set", f"log_every={flags['log_every']}"]
    for setting in SETTINGS.get(name, ()):
        arguments += ["--set", setting]
    return arguments


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What a recipe trains on, by its `trains_on`: a one-sentence-per-line corpus, or scored positive pairs."""
    folder = tmp_path_factory.mktemp("contract-data")
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(40)))
    pairs = folder / "train-pairs.tsv"
    pairs.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"the server {i} is down\tserver {i} is not running\t4.5\n" for i in range(40)))
    return {"text": corpus, "pairs": pairs}


@pytest.fixture(scope="module")
def two_step_runs(inputs: dict[str, Path], tiny_model_dir: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each recipe, 2 steps through `sentadapt adapt` (once, shared by the checks below)."""
    root = tmp_path_factory.mktemp("contract-runs")
    runs = {}
    for name in NAMES:
        result = run_adapt(*_cli_arguments(name, inputs, tiny_model_dir, root / name, steps=2))
        assert result.exit_code == 0, f"{name}: {result.output}"
        runs[name] = root / name
    return runs


def _losses(run: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (run / "train.log").read_text().splitlines()]
    return {record["step"]: record["loss"] for record in records if "loss" in record}


# ---------------------------------------------------------------------- registration


def test_every_registered_recipe_subclasses_the_contract() -> None:
    assert NAMES, "no recipe is registered"
    for name in NAMES:
        recipe_class = RECIPES.get(name)
        assert issubclass(recipe_class, RecipeBase), name
        assert recipe_class.spec.name == name
        assert recipe_class.spec.trains_on in ("text", "pairs"), name


def _recipe(name: str, **spec: object) -> type:
    """A recipe class named `name` whose spec has `spec`'s fields (the others those of a complete one), and whose
    required methods are all there."""
    fields = {"name": name.lower(), "settings": RecipeConfig, "trains_on": "text", "train_defaults": {},
              "tuned_base_defaults": {}, **spec}
    return type(name, (RecipeBase,), {"spec": RecipeSpec(**fields), "embed": lambda *args: None,  # type: ignore[arg-type]
                                      "prepare_export": lambda *args: None})


def test_the_contract_is_eight_members() -> None:
    """Issue 85: a recipe is its spec, its stages, what it reads, its heads, its views and terms, its export, its
    exported width and a frozen copy it may share; nothing else is declared on RecipeBase (aside from the constructor
    and the settings it keeps, `config`)."""
    declared = {name for name, kind in RecipeBase.__annotations__.items() if "ClassVar" in str(kind)}
    members = declared | {name for name in vars(RecipeBase) if not name.startswith("_")}
    assert members == {"spec", "stages", "load_examples", "trainable_heads", "embed", "prepare_export",
                       "exported_width", "frozen_backbone"}, members
    assert RecipeBase.__abstractmethods__ == {"embed", "prepare_export"}
    import sentadapt.recipes.base as contract

    assert len(Path(contract.__file__).read_text(encoding="utf-8").splitlines()) <= 200  # the contract alone


def test_registration_refuses_a_class_outside_the_contract() -> None:
    class Loose:
        name = "loose"

    with pytest.raises(TypeError, match=r"recipe 'loose': Loose must subclass sentadapt.recipes.base.RecipeBase"):
        register_recipe("loose")(Loose)
    assert "loose" not in RECIPES


def test_registration_names_what_is_missing() -> None:
    no_spec = type("NoSpec", (RecipeBase,), {"embed": lambda *args: None, "prepare_export": lambda *args: None})
    with pytest.raises(TypeError, match=r"recipe 'nospec': NoSpec does not define spec, a "
                                        r"sentadapt.recipes.base.RecipeSpec"):
        register_recipe("nospec")(no_spec)
    no_export = type("NoExport", (RecipeBase,), {"spec": _recipe("NoExport").spec, "embed": lambda *args: None})
    with pytest.raises(TypeError, match=r"recipe 'noexport': NoExport does not implement prepare_export"):
        register_recipe("noexport")(no_export)
    assert "nospec" not in RECIPES and "noexport" not in RECIPES


@pytest.mark.parametrize("defaults", ["train_defaults", "tuned_base_defaults", "teacher_defaults"])
def test_registration_refuses_defaults_that_are_not_a_dict(defaults: str) -> None:
    listed = _recipe("Listed", **{defaults: [("lr", 1e-5)]})
    with pytest.raises(TypeError, match=rf"recipe 'listed': Listed.spec.{defaults} must be a dict of settings"):
        register_recipe("listed")(listed)
    assert "listed" not in RECIPES


def test_registration_refuses_a_wrong_trains_on_and_a_mismatched_name() -> None:
    wrong = _recipe("Wrong", trains_on="sentences")
    with pytest.raises(TypeError, match=r"recipe 'wrong': Wrong.spec.trains_on is 'sentences'; one of text, pairs"):
        register_recipe("wrong")(wrong)
    other = _recipe("Other")
    with pytest.raises(TypeError, match=r"recipe 'renamed': Other.spec.name is 'other'"):
        register_recipe("renamed")(other)
    untyped = _recipe("Untyped", settings=dict)
    with pytest.raises(TypeError, match=r"recipe 'untyped': Untyped.spec.settings must be a dataclass subclassing "
                                        r"sentadapt.config.RecipeConfig"):
        register_recipe("untyped")(untyped)
    assert "wrong" not in RECIPES and "renamed" not in RECIPES and "untyped" not in RECIPES


# ---------------------------------------------------------------------- every recipe, through the loop


@pytest.mark.parametrize("name", NAMES)
def test_two_optimizer_steps_through_the_loop(two_step_runs: dict[str, Path], name: str) -> None:
    run = two_step_runs[name]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["recipe"] == name and metrics["steps"] == 2
    losses = _losses(run)
    assert sorted(losses) == [1, 2] and all(math.isfinite(loss) for loss in losses.values())
    assert (run / "model.safetensors").is_file() and (run / "config.yaml").is_file()


@pytest.mark.skipif(torch.cuda.is_available(), reason="golden losses are CPU values (CUDA draws other random views)")
@pytest.mark.parametrize("name", NAMES)
def test_golden_losses(two_step_runs: dict[str, Path], name: str) -> None:
    losses = _losses(two_step_runs[name])
    computed = (losses[1], losses[2])
    assert name in GOLDEN_LOSSES, f"no golden losses for recipe {name}: add {name!r}: {computed!r} to GOLDEN_LOSSES"
    assert computed == pytest.approx(GOLDEN_LOSSES[name], rel=GOLDEN_RTOL), name


@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_and_resume_reproduce_the_uninterrupted_run(inputs: dict[str, Path], tiny_model_dir: Path,
                                                              tmp_path: Path, name: str) -> None:
    data = inputs[RECIPES.get(name).spec.trains_on]

    def config(output: Path):
        return run_config(name, tiny_model_dir, data, output, {**FLAGS, "max_steps": 4}, list(SETTINGS.get(name, ())))

    straight = Recorder()
    train(config(tmp_path / "straight"), straight)
    resumed_config = config(tmp_path / "resumed")
    with pytest.raises(TrainingInterrupted):
        train(resumed_config, Recorder(stop_at=2))  # Ctrl-C at step 2: a checkpoint of step 2
    assert (tmp_path / "resumed" / "checkpoints" / "step-0000002").is_dir()
    resumed = Recorder()
    train(resumed_config, resumed, resume=True)
    assert sorted(resumed.losses_by_step) == [3, 4]
    for step in (3, 4):
        assert resumed.losses_by_step[step] == pytest.approx(straight.losses_by_step[step], rel=FLOAT32_RTOL), step
    heads = sorted(p.relative_to(tmp_path / "straight") for p in (tmp_path / "straight").glob("*/model.safetensors"))
    for weights in [Path("model.safetensors"), *heads]:  # the published model: backbone, then Dense/layer weights
        mine = load_file(str(tmp_path / "resumed" / weights))
        theirs = load_file(str(tmp_path / "straight" / weights))
        assert mine.keys() == theirs.keys(), weights
        for key in mine:
            torch.testing.assert_close(mine[key], theirs[key], atol=1e-5, rtol=0, msg=f"{weights}: {key}")


@pytest.mark.parametrize("name", NAMES)
def test_published_pooling_is_the_one_it_trained_with_and_exports(two_step_runs: dict[str, Path],
                                                                  tiny_model_dir: Path, tmp_path: Path,
                                                                  name: str) -> None:
    run = two_step_runs[name]
    # what the recipe says the model is saved with (its prepare_export on the base model)
    base = Encoder.load(tiny_model_dir, device="cpu")
    recipe_class = RECIPES.get(name)
    config = run_config(name, tiny_model_dir, Path("unused"), tmp_path / "unused", {**FLAGS, "max_steps": 2},
                        list(SETTINGS.get(name, ())))
    recipe = recipe_class(config.recipe_args, base)
    expected = recipe.prepare_export(base, recipe.trainable_heads()).pooling_name

    encoder = Encoder.load(run, device="cpu")
    layout = read_layout(run)
    assert layout.pooling is not None and encoder.pooling_source == "modules.json"
    assert layout.pooling.name(encoder.num_layers) == expected
    assert json.loads((run / "metrics.json").read_text())["pooling"] == expected
    assert encoder.pooling_name == expected

    st = pytest.importorskip("sentence_transformers")
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(TINY_SENTENCES) + "\n")
    exported = tmp_path / "st"
    from sentadapt.cli import app

    result = CliRunner().invoke(app, ["export", str(run), str(exported), "--sentences", str(sentences)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    exported_layout = read_layout(exported)
    assert exported_layout.pooling is not None and exported_layout.pooling.name(encoder.num_layers) == expected
    ours = encoder.encode(TINY_SENTENCES)
    theirs = st.SentenceTransformer(str(exported), device="cpu").encode(TINY_SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(theirs.float().cpu(), ours, atol=1e-5, rtol=FLOAT32_RTOL)
