from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sentadapt.cli import app
from tests.conftest import adapt_imports_torch
from tests.conftest import run_adapt as _adapt

runner = CliRunner()


def _flat(table: str) -> str:
    """A rich table's text with borders removed and wrapped cells joined, for phrase assertions."""
    return " ".join(table.translate(str.maketrans("│┃┌┐└┘├┤┬┴┼─", " " * 12)).split())
REPO = Path(__file__).resolve().parents[2]


def test_dry_run_prints_the_resolved_config_without_loading(corpus: Path, tiny_model_dir: Path, tmp_path: Path
                                                            ) -> None:
    args = (str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
            "--config", str(REPO / "recipes" / "consert.yaml"), "--lr", "3e-5",
            "--set", "temperature=0.05", "--set", "views=token-cutoff,dropout", "--dry-run")
    result = _adapt(*args)
    assert result.exit_code == 0, result.output
    assert adapt_imports_torch(*args) == (0, False)  # nothing loaded: not even torch, while the corpus is counted
    printed = yaml.safe_load(result.stdout)
    assert printed["train"]["lr"] == 3e-5  # flag beats the YAML
    assert printed["recipe_args"]["temperature"] == 0.05  # --set beats the YAML
    assert printed["recipe_args"]["views"] == ["token-cutoff", "dropout"]
    assert printed["train"]["batch_size"] == 96  # the YAML's (paper) value
    assert f"{tiny_model_dir.resolve()} (local); nothing loaded (--dry-run)" in result.stderr
    assert not (tmp_path / "run").exists()


def test_the_dry_run_plans_the_steps_the_run_then_trains(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The dry run counts the corpus as the run reads it (blank lines and duplicates dropped) and plans the steps
    the run then trains; a corpus smaller than one batch is said beside the config, which is still printed."""
    corpus = tmp_path / "corpus.txt"
    lines = [f"the server {i} is down" for i in range(37)]
    corpus.write_text("\n".join([*lines, "", "  ", *lines[:5]]) + "\n")  # 37 sentences, 2 blank lines, 5 repeats
    args = [str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--epochs", "2",
            "--max-length", "16", "--dev", "none"]
    planned = _adapt(*args, "--batch-size", "8", "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "planned: 8 steps, 2 passes over 37 sentences (batch 8)\n" in planned.stderr  # 37 // 8 = 4 a pass
    trained = _adapt(*args, "--batch-size", "8")
    assert trained.exit_code == 0, trained.output
    assert "steps 8 / 8 (completed)" in _flat(trained.stdout)
    too_few = _adapt(*args, "--batch-size", "64", "--output", str(tmp_path / "other"), "--dry-run")
    assert too_few.exit_code == 0, too_few.output
    assert yaml.safe_load(too_few.stdout)["train"]["batch_size"] == 64
    assert ("planned: no step; the run would stop with: the corpus has 37 examples, fewer than one step of "
            "batch_size 64 × grad_accum 1; lower --batch-size or add data\n") in too_few.stderr


def test_the_planned_line_names_the_dev_interval_the_limit_and_the_accumulation() -> None:
    from types import SimpleNamespace

    from sentadapt.run.summary import planned_line
    from sentadapt.train.steps import StepPlan

    config = SimpleNamespace(train=SimpleNamespace(grad_accum=2, batch_size=16, max_steps=0))
    assert planned_line(StepPlan(3000, 372, 4.0, 93), config, scored=True) == (
        "planned: 372 steps, 4 passes over 3000 sentences (batch 16 × grad_accum 2); dev every 93 steps")
    assert planned_line(StepPlan(3000, 31, 1.0, 200), config, scored=True).endswith("1 pass over 3000 sentences "
                                                                                     "(batch 16 × grad_accum 2); "
                                                                                     "dev at the end")
    assert planned_line(StepPlan(2, 1, 1.0, 1), config, scored=False) == (
        "planned: 1 step, 1 pass over 2 sentences (batch 16 × grad_accum 2)")
    limited = SimpleNamespace(train=SimpleNamespace(grad_accum=1, batch_size=16, max_steps=50))
    assert planned_line(StepPlan(3000, 50, 50 * 16 / 3000, 0), limited, scored=False) == (
        "planned: 50 steps (max_steps), 0.3 passes over 3000 sentences (batch 16)")
    # a few steps over a large corpus: two significant digits, as the summary says it ("0.0666 passes" before)
    assert planned_line(StepPlan(4802, 20, 20 * 16 / 4802, 0), limited, scored=False).startswith(
        "planned: 20 steps (max_steps), 0.067 of a pass over 4802 sentences")


def test_a_hub_corpus_is_planned_without_being_downloaded(tiny_model_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hub dataset is counted only when the run reads it: the dry run plans --max-steps' steps and says so (it
    printed no plan line), or says the steps come with the count; nothing is downloaded."""
    import sentadapt.data.corpus as corpus

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("the dry run downloaded the dataset")

    monkeypatch.setattr(corpus, "hub_is_reachable", lambda: True)
    monkeypatch.setattr(corpus, "load_hub_dataset", no_download)
    args = ["owner/sentences", "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev", "none",
            "--batch-size", "8", "--dry-run"]
    planned = _adapt(*args, "--max-steps", "40")
    assert planned.exit_code == 0, planned.output
    assert ("planned: 40 steps (max_steps), batch 8; the sentences are counted when the run reads them\n"
            in planned.stderr)
    by_epochs = _adapt(*args)
    assert by_epochs.exit_code == 0, by_epochs.output
    assert "planned: batch 8; the sentences, and so the steps, are counted when the run reads them\n" in (
        by_epochs.stderr)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "temperature=0"], "Error: temperature: 0.0 is out of range; valid: (0, inf]"),
        (["--set", "feature_cutoff_rate=1.5"], "Error: feature_cutoff_rate: 1.5 is out of range; valid: [0, 1)"),
        (["--batch-size", "1"], "Error: batch_size: 1 is out of range; valid: [2, inf] (contrastive training needs "
                                "at least 2 sentences per batch for in-batch negatives)"),
        (["--set", "temprature=0.1"], "Error: --set: Unknown key 'temprature'. Did you mean: temperature, "
                                      "distill_temperature?"),
        (["--set", "views=shuffle,magic"], "Error: views: 'magic' is not one of none, shuffle, token-cutoff, "
                                           "feature-cutoff, dropout, span-cutoff, encoder-dropout"),
        (["--set", "views=adversarial,shuffle"], "Error: views: 'adversarial' needs labels; use it with mode=joint "
                                                 "or joint-unsup"),
        (["--recipe", "consrt"], "Error: Unknown recipe 'consrt'. Did you mean: consert, clsr? "
                                 "Available: clsr, consert, sg-opt"),
        (["--mixed-precision", "fp8"], "Error: mixed_precision: 'fp8' is not one of no, fp16, bf16"),
        (["--set", "lr"], "Error: --set: 'lr' is not key=value (e.g. --set temperature=0.05)"),
        (["--set", "mode=joint"], "Error: mode joint: needs labelled NLI pairs; pass --set nli=FILE"),
    ],
)
def test_bad_options_fail_fast_with_one_line(corpus: Path, tiny_model_dir: Path, tmp_path: Path, extra: list[str],
                                             message: str) -> None:
    started = time.perf_counter()
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), *extra)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert time.perf_counter() - started < 5


def test_missing_corpus_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _adapt(str(tmp_path / "nope.txt"), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"))
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: {tmp_path / 'nope.txt'}: no such file"


def test_empty_corpus(tiny_model_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    result = _adapt(str(empty), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {empty}: no sentences")


def test_existing_output_needs_resume_or_overwrite(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    output.mkdir()
    (output / "something").write_text("x")
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: --output {output}: exists and is not empty; choose a new or empty folder"


def test_resume_takes_only_auto_as_a_value(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--resume=latest")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("Error: --resume: unknown mode 'latest'; use --resume (the last checkpoint) or "
                                     "--resume auto")
    # a bare --resume before a corpus file keeps its meaning (the file is not taken as a mode)
    bare = _adapt("--resume", str(corpus), "--output", str(tmp_path / "none"))
    assert bare.exit_code == 2 and "--resume: " in bare.stderr and "config.yaml not found" in bare.stderr


def test_resume_without_a_run(tmp_path: Path) -> None:
    result = _adapt("--resume", "--output", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"Error: --resume: {tmp_path / 'config.yaml'} not found; is this a sentadapt "
                                     "run directory?")


def test_a_running_lock_is_respected(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    import os

    from sentadapt.errors import ConfigError
    from sentadapt.run.execute import acquire_lock as _acquire_lock

    (tmp_path / ".lock").write_text(str(os.getppid()))  # a live process that is not us
    with pytest.raises(ConfigError, match=f"another sentadapt run \\(pid {os.getppid()}\\) is writing here"):
        _acquire_lock(tmp_path)
    (tmp_path / ".lock").write_text("999999999")  # stale: no such process
    assert _acquire_lock(tmp_path).read_text() == str(os.getpid())


def test_resume_auto_on_a_folder_a_live_run_holds_names_that_run_not_its_missing_checkpoint(
        corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Issue 82: `--resume auto` on a folder another run is writing (config.yaml written, no checkpoint yet) said
    "holds no checkpoint yet; starting the run again from the beginning" before the lock refused it."""
    import os

    output = tmp_path / "run"
    output.mkdir()
    (output / "config.yaml").write_text("recipe: consert\n")  # what a run writes first, before any checkpoint
    (output / ".lock").write_text(str(os.getppid()))  # a live process that is not us, writing this run
    for resume in (["--resume", "auto"], ["--resume"]):
        result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", "none",
                        *resume)
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == (f"Error: --output {output}: another sentadapt run (pid {os.getppid()}) is "
                                         f"writing here; wait for it or remove {output / '.lock'} if that process "
                                         "is not sentadapt"), resume


def test_end_to_end_adapt_then_eval(corpus: Path, tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
                    "--batch-size", "8", "--max-steps", "4", "--eval-every", "2", "--max-length", "16")
    assert result.exit_code == 0, result.output
    assert "summary" in result.stdout and "base model dev" in result.stdout
    assert "read 40 lines from 1 file → 40 sentences" in result.stderr
    assert not (output / ".lock").exists()
    evaluated = runner.invoke(app, ["eval", str(output), "--pairs", str(pairs_tsv)], catch_exceptions=False)
    assert evaluated.exit_code == 0 and "pooling last2avg (from modules.json)" in evaluated.stderr


def test_offline_hub_corpus_fails_before_loading(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _adapt("someone/some-corpus", "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"))
    assert result.exit_code == 1
    assert result.stderr.strip() == ("Error: someone/some-corpus: not a local file, and the Hugging Face Hub is "
                                     "unreachable (offline); pass a local text file")


def test_option_errors_do_not_import_torch(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Validation (config, recipe, paths, dev set) runs before torch is imported, so mistakes fail in well
    under a second; only training itself pays torch's import time."""
    assert adapt_imports_torch(
        str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--set", "temperature=0",
        "--dev", "none") == (2, False)


def test_encoding_errors_option_reaches_the_reader(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"".join(b"the server %d is down\n" % i for i in range(20)) + b"caf\xe9 latte\n")
    strict = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "a"), "--dev", "none",
                    "--batch-size", "4", "--max-steps", "1")
    assert strict.exit_code == 1
    assert strict.stderr.startswith(f"Error: {corpus}:21: not valid UTF-8")
    skipped = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "b"), "--dev", "none",
                     "--batch-size", "4", "--max-steps", "1", "--encoding-errors", "skip")
    assert skipped.exit_code == 0, skipped.output
    assert "read 21 lines from 1 file → 20 sentences (skipped: 1 invalid UTF-8)" in skipped.stderr
    bad = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "c"),
                 "--encoding-errors", "ignore")
    assert bad.exit_code == 2
    assert bad.stderr.strip() == "Error: --encoding-errors: 'ignore' is not one of strict, replace, skip"


def test_no_improvement_is_reported_and_require_improvement_exits_3(corpus: Path, tiny_model_dir: Path,
                                                                      pairs_tsv: Path, tmp_path: Path) -> None:
    # lr 1e-30: AdamW's update (~lr per weight) is far below float32 resolution at weights ~0.02 (ulp ~2e-9),
    # so the weights stay bit-identical and training cannot help; exported with the base's own (mean) pooling,
    # the dev score ties the base model exactly.
    output = tmp_path / "run"
    args = [str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
            "--batch-size", "8", "--max-steps", "2", "--eval-every", "2", "--max-length", "16", "--lr", "1e-30",
            "--set", "export_pooling=mean"]
    plain = _adapt(*args)
    assert plain.exit_code == 0, plain.output
    # identical weights give identical per-pair cosines, so the paired bootstrap Δ is exactly [0, 0]
    reason = f"no checkpoint beat the base model on {pairs_tsv.name} (Δ +0.00 [+0.00, +0.00])"
    assert (f"decision keep the base model: {reason}. The run directory (output, above) still holds what this run "
            "trained (its best checkpoint), for inspection") in _flat(plain.stdout)
    assert "defaults paper (" in _flat(plain.stdout)  # the preset the run started from
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["decision"] == "keep-base" and metrics["decision_reason"] == reason
    assert metrics["preset"] == {"name": "paper", "reason": f"{tiny_model_dir}: no modules.json: a plain "
                                                            "transformers model", "values": {}}
    assert metrics["improved"] is False and metrics["dev_change"] == 0.0
    assert metrics["dev_change_ci"] == [0.0, 0.0] and metrics["dev_change_ci_excludes_0"] is False
    assert metrics["dev_metric"] == "spearman x100 (STS (scored pairs), cosine)"
    assert metrics["base_score"] == metrics["best_score"] == metrics["history"][0]["dev"]
    exported = runner.invoke(app, ["export", str(output), str(tmp_path / "hf"), "--format", "hf"],
                             catch_exceptions=False)
    assert exported.exit_code == 0, exported.output
    card = (tmp_path / "hf" / "README.md").read_text()
    title = (f"# hf\n\n> **Keep the base model.** N{reason[1:]}: by the risk rule this run did not show a gain "
             f"over `{tiny_model_dir}`")
    assert title in card  # the first thing after the title
    assert f"Decision: **keep-base**, by the risk rule ({reason})." in card

    guarded = _adapt(*args, "--overwrite", "--require-improvement")
    assert guarded.exit_code == 3
    assert guarded.stderr.strip().splitlines()[-1] == (
        f"Error: --require-improvement: keep the base model: {reason}; {output} holds what the run trained")
    assert (output / "metrics.json").is_file() and not (output / ".lock").exists()


def test_require_improvement_needs_a_dev_set(corpus: Path, tiny_model_dir: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SENTADAPT_DATA_DIR", raising=False)
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev", "none",
                    "--require-improvement")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "Error: --require-improvement: needs a labelled dev set to compare with the base model; pass --dev FILE "
        "(e.g. 100 labelled pairs from your domain) or --dev stsb --data-dir DIR")
    assert not (tmp_path / "run").exists()


def test_blind_selection_says_so(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / ("run-with-a-long-name-" + "x" * 60)  # wider than the summary's value column at 80
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(run), "--dev", "none",
                    "--batch-size", "8", "--max-steps", "1", "--max-length", "16")
    assert result.exit_code == 0, result.output
    assert ("no labelled dev data: checkpoint selection is blind, the last step is kept. A file of ~100 labelled "
            "pairs from your domain (--dev FILE) fixes this.") in " ".join(result.stderr.split())
    assert (  # the whole sentence, then the summary's last rows: the card and what to do next (issue 82)
        "decision unknown: nothing measured whether this beats the base model; --dev FILE with ~100 labelled "
        "pairs from your domain would measure it card ") in _flat(result.stdout)
    assert ("the decision first, how to use the model, what was measured (each decide rewrites it) next label 100 "
            "pairs where the run moved: sentadapt pairs") in _flat(result.stdout)
    assert _flat(result.stdout).replace(" ", "").endswith(
        f"--run{run}-n100--outputto-label.tsv;oncelabelled:sentadaptdecide{run}--devto-label.tsv")
    assert "…" not in result.stdout and str(run) in _flat(result.stdout).replace(" ", "")  # folded, not cut
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["improved"] is None and metrics["published_step"] == 1
    assert metrics["decision"] is None and metrics["decision_reason"].startswith("unknown: no dev set")


def test_the_risk_rule_records_its_evidence_every_evaluation_and_a_small_dev_set_note(
        corpus: Path, tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
                    "--batch-size", "8", "--max-steps", "4", "--eval-every", "2", "--max-length", "16", "--lr", "1e-3")
    assert result.exit_code == 0, result.output
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["decision_rule"] == "risk" and metrics["decision_settings"] == {"rule": "risk", "max_risk": 0.2}
    evidence = metrics["dev_evidence"]
    assert evidence["options"] == 2 and evidence["units"] == 8  # steps 2 and 4, on 8 pairs
    assert metrics["decision_risk"] == pytest.approx(evidence["risk"]) == pytest.approx(1 - evidence["confidence"])
    assert evidence["change"] == pytest.approx(metrics["dev_change"])
    # the run's decision is the first look of the label-more loop: 8 of 400 labels, 0.2 · √(8/400) = 0.028
    look = metrics["decision_look"]
    assert (look["look"], look["sizes"], look["nominal_limit"]) == (1, [8], pytest.approx(0.2 * (8 / 400) ** 0.5))
    used = metrics["decision"] == "use-adapted"
    assert used == (evidence["risk"] <= look["nominal_limit"])
    assert metrics["decision_reason"].endswith("(8 of 400 labels; 0.20 over every look))") or (
        metrics["decision_reason"].endswith("): keep the base model for now and label 8 more pairs (the next look: "
                                            "16 labels)"))
    more = look["verdict"] == "more"
    assert more == (not used and evidence["risk"] <= 0.8) and look["next_labels"] == (16 if more else None)
    # 8 pairs cannot confirm a gain of 0.5: a decided look says how small a gain they can confirm, an inconclusive
    # one how to label more
    assert evidence["detectable_gain"] > 0.5
    assert metrics["dev_note"].startswith("inconclusive at 8 labels: label 8 more pairs of your domain, add them to "
                                          ) if more else metrics["dev_note"].startswith(
        f"8 dev pairs: gains below ~{evidence['detectable_gain']:.1f} cannot be confirmed at risk 0.03 (~")
    assert evidence["detectable_at_risk"] == pytest.approx(look["nominal_limit"])
    assert f"dev set {metrics['dev_note']}" in _flat(result.stdout)
    outputs = json.loads((output / "dev_outputs.json").read_text())
    assert outputs["dev"] == "pairs.tsv" and list(outputs["evaluations"]) == ["2", "4"]
    assert [len(outputs["evaluations"][step]["pairs.tsv"]["cosine"]) for step in ("2", "4")] == [8, 8]
    assert len(outputs["base"]["pairs.tsv"]["cosine"]) == 8
    assert [row["step"] for row in metrics["history"]] == [0, 2, 4]


@pytest.mark.parametrize(("extra", "message"), [
    (["--decision", "maybe"], "Error: --decision: 'maybe' is not a rule; choose one of risk, strict, positive"),
    (["--risk", "0"], "Error: --risk: 0 is not a probability strictly between 0 and 1 (the default is 0.2)"),
])
def test_bad_decision_options_fail_before_loading(corpus: Path, tiny_model_dir: Path, tmp_path: Path,
                                                  extra: list[str], message: str) -> None:
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), *extra)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == message
    assert not (tmp_path / "run").exists()


def test_the_strict_rule_is_kept_as_an_option(corpus: Path, tiny_model_dir: Path, pairs_tsv: Path,
                                              tmp_path: Path) -> None:
    output = tmp_path / "run"
    result = _adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
                    "--batch-size", "8", "--max-steps", "2", "--eval-every", "2", "--max-length", "16", "--lr", "1e-3",
                    "--decision", "strict")
    assert result.exit_code == 0, result.output
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["decision_rule"] == "strict" and metrics["decision_settings"] == {"rule": "strict",
                                                                                     "max_risk": None}
    assert "paired 95 % CI" in metrics["decision_reason"] or metrics["decision_reason"].startswith("no checkpoint")
    assert yaml_value(output / "config.yaml", "decision") == "strict"


def yaml_value(path: Path, key: str) -> object:
    import yaml

    return yaml.safe_load(path.read_text())[key]


def test_resume_names_every_option_it_ignores_lora_prompt_and_dev_included(tmp_path: Path) -> None:
    from sentadapt.model.lora import lora_flags
    from sentadapt.run.plan import Settings, ignored_on_resume

    flags = {"lr": 1e-4, **lora_flags("r=8,alpha=16"), "dev": "dev.tsv", "prompt": "query", "risk": 0.2,
             "decision": "strict", "num_proc": 4}
    settings = Settings([], tmp_path, None, None, None, [], None, flags)
    # as the command line spells them; --risk at its default and --num-proc (the machine's, applied) are not named
    assert ignored_on_resume(settings) == ["--lr", "--lora", "--dev", "--prompt", "--decision"]
    settings.set_values["temperature"] = 0.05  # an API keyword beyond the options: --set's
    assert ignored_on_resume(settings)[-1] == "--set"


def test_resume_auto_says_a_flag_that_differs_from_the_saved_run_is_ignored(corpus: Path, tiny_model_dir: Path,
                                                                            tmp_path: Path) -> None:
    """Issue 82: `--resume auto --max-steps 10 --dry-run` on a run saved with 2 steps planned 2 steps without a word
    of the 10; the flags typed again alike are no news."""
    output = tmp_path / "run"
    common = [str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", "none", "--batch-size",
              "8", "--max-length", "16"]
    first = _adapt(*common, "--max-steps", "2", "--checkpoint-every", "1")
    assert first.exit_code == 0, first.output
    (output / "metrics.json").unlink()  # a run stopped after its checkpoints
    again = _adapt(*common, "--max-steps", "10", "--resume", "auto", "--dry-run")
    assert again.exit_code == 0, again.output
    said = " ".join(again.stderr.split())
    assert ("--resume auto: the run goes on with its saved config.yaml; ignoring --max-steps 10 (saved: 2): start a "
            "new run (--overwrite or another --output) to change them") in said
    assert "--batch-size" not in said and "planned: 2 steps" in said


def test_an_empty_lock_is_a_run_starting_until_it_is_older_than_a_start_takes(tmp_path: Path) -> None:
    """A run stopped between creating its lock and writing its pid left an empty lock: the same command must not be
    refused forever (seen under load: Ctrl-C at 0.5 s, then the same command said 'another sentadapt run')."""
    import os
    import time

    from sentadapt.errors import ConfigError
    from sentadapt.run.execute import EMPTY_LOCK_STALE_S
    from sentadapt.run.execute import acquire_lock as _acquire_lock

    lock = tmp_path / ".lock"
    lock.write_text("")
    with pytest.raises(ConfigError, match="another sentadapt run \\(starting, the lock has no pid yet\\)"):
        _acquire_lock(tmp_path)
    old = time.time() - EMPTY_LOCK_STALE_S - 1
    os.utime(lock, (old, old))
    notes: list[str] = []
    assert _acquire_lock(tmp_path, notes.append).read_text() == str(os.getpid())
    assert notes == [f"--output {tmp_path}: taking over a lock that never got its pid (its run was stopped while "
                     "taking it)"]
