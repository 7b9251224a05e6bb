"""`sentadapt.adapt()`: the same run as `sentadapt adapt`, through the same library code path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from safetensors.numpy import load_file

from sentadapt.errors import ConfigError, NoImprovement
from tests.conftest import run_adapt


def _options(model: Path, dev: Path) -> dict:
    return {"base": str(model), "dev": str(dev), "batch_size": 8, "max_steps": 4, "eval_every": 2,
            "max_length": 16, "seed": 7}


def _cli_args(model: Path, dev: Path) -> list[str]:
    return ["--base", str(model), "--dev", str(dev), "--batch-size", "8", "--max-steps", "4", "--eval-every", "2",
            "--max-length", "16", "--seed", "7"]


def test_the_api_and_the_cli_write_the_same_run(corpus: Path, tiny_model_dir: Path, pairs_tsv: Path,
                                                tmp_path: Path) -> None:
    from sentadapt.run.dispatch import adapt

    api_dir, cli_dir = tmp_path / "api", tmp_path / "cli"
    notes: list[str] = []
    result = adapt(corpus, output=api_dir, note=notes.append, **_options(tiny_model_dir, pairs_tsv))
    cli = run_adapt(str(corpus), "--output", str(cli_dir), *_cli_args(tiny_model_dir, pairs_tsv))
    assert cli.exit_code == 0, cli.output

    api_config, cli_config = (yaml.safe_load((d / "config.yaml").read_text()) for d in (api_dir, cli_dir))
    assert api_config.pop("output") == str(api_dir) and cli_config.pop("output") == str(cli_dir)
    assert api_config == cli_config
    api_metrics, cli_metrics = (json.loads((d / "metrics.json").read_text()) for d in (api_dir, cli_dir))
    assert api_metrics.keys() == cli_metrics.keys()
    for key in ("decision", "decision_rule", "best_step", "dev_change", "decision_risk", "history"):
        assert api_metrics[key] == cli_metrics[key], key
    api_weights, cli_weights = (load_file(d / "model.safetensors") for d in (api_dir, cli_dir))
    assert api_weights.keys() == cli_weights.keys()
    assert all((api_weights[name] == cli_weights[name]).all() for name in api_weights)  # same seed, same bits

    assert (result.status, result.output, result.metrics) == ("trained", api_dir, api_metrics)
    assert (result.decision, result.rule, result.risk) == (api_metrics["decision"], "risk",
                                                            api_metrics["decision_risk"])
    assert result.reason == api_metrics["decision_reason"] and result.use_adapted == (result.decision ==
                                                                                      "use-adapted")
    assert any(line.startswith("base model on pairs.tsv: ") for line in notes)  # progress notes, not prints
    rows = {row.cells[0].text: row.cells[1] for row in result.summary.rows}  # the table the CLI prints
    assert rows["output"].text == str(api_dir) and rows["best dev"].text.endswith(f"at step {api_metrics['best_step']}")
    assert api_metrics["decision_reason"] in rows["decision"].text
    assert rows["decision"].tone == ("good" if result.use_adapted else "bad")
    assert str(result.summary).startswith("sentadapt adapt — summary\noutput")  # plain text for a notebook


def test_the_api_refuses_bad_settings_with_the_clis_one_line_messages(corpus: Path, tiny_model_dir: Path,
                                                                       tmp_path: Path) -> None:
    from sentadapt.run.dispatch import adapt

    with pytest.raises(ConfigError) as error:
        adapt([], output=tmp_path / "run", base=str(tiny_model_dir))
    assert str(error.value) == "CORPUS: give at least one corpus file (or --resume to continue a run)"
    with pytest.raises(ConfigError) as error:
        adapt(corpus, output=tmp_path / "run", base=str(tiny_model_dir), decision="maybe")
    assert str(error.value) == "--decision: 'maybe' is not a rule; choose one of risk, strict, positive"
    cli = run_adapt(str(corpus), "--output", str(tmp_path / "run"), "--base", str(tiny_model_dir), "--decision",
                    "maybe")
    assert cli.stderr.strip() == f"Error: {error.value}"
    assert not (tmp_path / "run").exists()


def test_a_dry_run_returns_the_resolved_config_and_loads_nothing(corpus: Path, tiny_model_dir: Path,
                                                                 tmp_path: Path) -> None:
    from sentadapt.run.dispatch import adapt

    result = adapt(corpus, output=tmp_path / "run", base=str(tiny_model_dir), dry_run=True, lr=3e-5,
                   set_options=["temperature=0.07"])
    assert result.status == "dry-run" and result.decision is None and result.metrics == {}
    (config,) = result.configs
    assert (config.train.lr, config.recipe_args.temperature, config.recipe) == (3e-5, 0.07, "consert")
    assert not (tmp_path / "run").exists()


def test_a_dry_runs_config_says_which_layer_set_each_value(corpus: Path, tiny_model_dir: Path,
                                                           tmp_path: Path) -> None:
    """An option keyword is a flag's layer, a config keyword (`adam_beta1=`) --set's, as on the command line."""
    import sentadapt

    result = sentadapt.adapt(corpus, output=tmp_path / "run", base=str(tiny_model_dir), dry_run=True, lr=3e-5,
                             adam_beta1=0.8, set_options=["temperature=0.07"], risk=0.3)
    (config,) = result.configs
    assert {key: config.sources[key] for key in ("train.lr", "train.adam_beta1", "recipe_args.temperature",
                                                 "train.seed", "base", "risk", "dev")} == {
        "train.lr": "flag", "train.adam_beta1": "--set", "recipe_args.temperature": "--set", "train.seed": "default",
        "base": "flag", "risk": "flag", "dev": "default"}


def test_require_improvement_raises_no_improvement_through_the_api(corpus: Path, tiny_model_dir: Path,
                                                                    pairs_tsv: Path, tmp_path: Path) -> None:
    from sentadapt.run.dispatch import adapt

    output = tmp_path / "run"
    # lr 1e-30: the weights stay bit-identical (see test_cli_adapt), so the dev score ties the base model
    with pytest.raises(NoImprovement) as error:
        adapt(corpus, output=output, base=str(tiny_model_dir), dev=pairs_tsv, batch_size=8, max_steps=2,
              eval_every=2, max_length=16, lr=1e-30, set_options=["export_pooling=mean"], require_improvement=True)
    assert str(error.value) == ("--require-improvement: keep the base model: no checkpoint beat the base model on "
                                f"pairs.tsv (Δ +0.00 [+0.00, +0.00]); {output} holds what the run trained")
    again = adapt(corpus, output=output, resume="auto")  # finished: nothing to do, the recorded decision
    assert (again.status, again.decision) == ("finished", "keep-base")


def test_help_of_adapt_describes_each_keyword_as_its_flag_is_described() -> None:
    import inspect

    import sentadapt
    from sentadapt.run.adapt_options import ADAPT_OPTIONS

    keywords = inspect.getdoc(sentadapt.adapt).split("\nKeywords:\n", 1)[1].splitlines()  # type: ignore[union-attr]
    assert keywords == [f"{option.name} ({option.api_name}): {option.help}" for option in ADAPT_OPTIONS]
    assert "seed (--seed): Seed of data order and augmentations." in keywords
