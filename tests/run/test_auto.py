"""`adapt --recipe auto`: candidates from the inputs, `--candidates` parsing, the Bonferroni-adjusted choice,
the run directory (summary rows, metrics.json), and resuming an interrupted candidate."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest

from sentadapt.decision.rule import KEEP_BASE, USE_ADAPTED
from sentadapt.decision.selection import (
    CandidateScore,
    adjusted_confidence,
    choose,
    score_candidates,
)
from sentadapt.errors import ConfigError
from sentadapt.run.auto.candidates import Candidate, Inputs, parse_candidates, plan_candidates, split_inputs
from tests.conftest import FLOAT32_RTOL, noisy_outputs, run_adapt, sts_dev_evaluator

# ---------------------------------------------------------------- --candidates and the inputs


def test_candidates_parse_with_their_own_settings() -> None:
    parsed = parse_candidates(["consert, sg-opt:lr=1e-5:distill=0", "clsr"])
    assert [c.spec for c in parsed] == ["consert", "sg-opt:lr=1e-5:distill=0", "clsr"]
    assert [c.name for c in parsed] == ["consert", "sg-opt-lr=1e-5-distill=0", "clsr"]
    assert parsed[1].set_options() == ["lr=1e-5", "distill=0"]


def test_a_candidates_list_setting_keeps_its_commas() -> None:
    """The comma separates candidates and a list setting's items alike: an item that is no recipe and has no setting
    of its own belongs to the setting before it."""
    parsed = parse_candidates(["consert:views=token-cutoff,feature-cutoff,sg-opt", "consert:nli=a.jsonl,b.jsonl"])
    assert [c.spec for c in parsed] == ["consert:views=token-cutoff,feature-cutoff", "sg-opt",
                                        "consert:nli=a.jsonl,b.jsonl"]
    assert parsed[0].set_options() == ["views=token-cutoff,feature-cutoff"]
    assert [c.spec for c in parse_candidates(["consert:lr=1e-5,consert:temperature=0.1,clsr"])] == [
        "consert:lr=1e-5", "consert:temperature=0.1", "clsr"]


@pytest.mark.parametrize(("values", "message"), [
    (["consrt"], "--candidates: Unknown recipe 'consrt'. Did you mean: consert, clsr? Available: clsr, consert, "
                 "sg-opt"),
    (["consert:lr"], "--candidates: 'consert:lr': 'lr' is not key=value (e.g. consert:lr=1e-5:temperature=0.05)"),
    (["consert,sg-opt", "consert"], "--candidates: 'consert' is listed twice; each candidate once"),
    (["auto"], "--candidates: 'auto' is not a candidate; list recipes (clsr, consert, sg-opt)"),
    ([" , "], "--candidates: no candidate given; e.g. --candidates consert,sg-opt"),
])
def test_candidates_errors_name_the_entry(values: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_candidates(values)
    assert str(error.value) == message


def test_inputs_decide_the_default_candidates(corpus: Path, pairs_tsv: Path) -> None:
    text_only = split_inputs([str(corpus)])
    assert text_only == Inputs((str(corpus),), ())
    assert [c.recipe for c in plan_candidates([], text_only)] == ["consert", "sg-opt"]
    both = split_inputs([str(corpus), str(pairs_tsv)])
    assert both == Inputs((str(corpus),), (str(pairs_tsv),))
    assert [c.recipe for c in plan_candidates([], both)] == ["consert", "sg-opt", "clsr"]
    assert both.for_recipe("clsr") == [str(pairs_tsv)] and both.for_recipe("consert") == [str(corpus)]
    pairs_only = split_inputs([str(pairs_tsv)])
    assert [c.recipe for c in plan_candidates([], pairs_only)] == ["clsr"]


def test_a_candidate_without_its_kind_of_input_is_refused(corpus: Path, pairs_tsv: Path) -> None:
    with pytest.raises(ConfigError) as error:
        plan_candidates([Candidate("clsr")], split_inputs([str(corpus)]))
    assert str(error.value).startswith("--candidates clsr: clsr trains on labelled pairs; add a pairs file")
    with pytest.raises(ConfigError) as error:
        plan_candidates([Candidate("consert", (("lr", "1e-5"),))], split_inputs([str(pairs_tsv)]))
    assert str(error.value) == ("--candidates consert:lr=1e-5: consert trains on plain text; add a text file (one "
                                "sentence per line) to the inputs")


# ---------------------------------------------------------------- the adjusted choice


def _score(name: str, change: float, plain: tuple[float, float], adjusted: tuple[float, float]) -> CandidateScore:
    return CandidateScore(name, 80 + change, change, plain, adjusted)


def test_a_noise_win_is_not_chosen_but_the_unadjusted_rule_would_ship_it() -> None:
    scores = [_score("consert", +0.4, (-0.3, +1.1), (-0.6, +1.4)),
              _score("sg-opt", +1.2, (+0.1, +2.3), (-0.2, +2.6)),  # plain CI excludes 0, adjusted does not
              _score("clsr", -0.5, (-1.0, +0.0), (-1.2, +0.2))]
    choice = choose(scores, "dev.tsv")
    assert (choice.chosen, choice.decision) == (None, KEEP_BASE)
    assert choice.reason == ("within noise on dev.tsv: the best candidate, sg-opt (Δ +1.20 [-0.20, +2.60]), has a "
                             "98.33 % paired CI (95 % over 3 candidates, Bonferroni) that includes 0")


def test_a_clear_win_is_chosen_and_the_largest_eligible_delta_wins() -> None:
    scores = [_score("consert", +2.0, (+1.0, +3.0), (+0.6, +3.4)),
              _score("sg-opt", +2.5, (+0.2, +4.8), (-0.1, +5.1)),  # larger Δ, but not eligible
              _score("clsr", +1.5, (+0.9, +2.1), (+0.7, +2.3))]
    choice = choose(scores)
    assert (choice.chosen, choice.decision) == ("consert", USE_ADAPTED)
    assert choice.reason == ("consert beats the base model (Δ +2.00 [+0.60, +3.40]): its 98.33 % paired CI (95 % over "
                             "3 candidates, Bonferroni) excludes 0")
    assert choice.to_dict()["adjustment"] == {"method": "bonferroni", "candidates": 3, "family_error": 0.05,
                                              "confidence": pytest.approx(1 - 0.05 / 3)}


def test_no_candidate_beating_the_base_keeps_it() -> None:
    choice = choose([_score("consert", -0.1, (-0.5, +0.3), (-0.6, +0.4))])
    assert choice.decision == KEEP_BASE
    assert choice.reason == "no candidate beat the base model (best: consert, Δ -0.10 [-0.60, +0.40])"


def test_adjusted_intervals_widen_with_the_candidates_and_equal_the_single_run_rule_for_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 60)
    evaluator = sts_dev_evaluator(tmp_path, gold)
    def outputs(noise: float, seed: int) -> dict:
        return noisy_outputs(evaluator, gold, noise, seed)

    base = outputs(0.3, 1)
    candidates = [("weak", outputs(0.28, 2)), ("clear", outputs(0.05, 3)), ("worse", outputs(0.6, 4))]
    one = score_candidates(evaluator, base, candidates[1:2])[0]
    single_run = evaluator.compare_outputs(base, candidates[1][1])  # what `adapt --recipe NAME` reports
    assert one.adjusted == one.interval == pytest.approx(single_run.interval, rel=1e-12)
    assert one.change == pytest.approx(single_run.value, rel=1e-12)
    three = score_candidates(evaluator, base, candidates)
    for score in three:
        assert score.adjusted[0] < score.interval[0] and score.adjusted[1] > score.interval[1]
    assert adjusted_confidence(3) == pytest.approx(0.98333333)
    choice = choose(three)
    assert choice.chosen == "clear"  # Spearman ~0.99 against a noisy base's ~0.8 on 60 pairs
    assert three[1].adjusted[0] > 0


# ---------------------------------------------------------------- the command


@pytest.fixture
def train_pairs(tmp_path: Path) -> Path:
    """40 scored pairs for CLSR (every one ≥ 4: positives)."""
    path = tmp_path / "train-pairs.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"the server {i} is down\tserver {i} is not running\t4.5\n" for i in range(40)))
    return path


def _auto(corpus: Path, pairs: Path, model: Path, dev: Path, output: Path, *extra: str):
    return run_adapt(str(corpus), str(pairs), "--recipe", "auto", "--base", str(model), "--dev", str(dev),
                     "--output", str(output), "--max-steps", "4", "--eval-every", "2", "--max-length", "16",
                     "--candidates", "consert:batch_size=8,clsr:batch_size=8", "--set", "log_every=1", *extra)


def _flat(text: str) -> str:
    return " ".join(text.translate(str.maketrans("│┃┌┐└┘├┤┬┴┼─┏┓┗┛┡┩╇━", " " * 20)).split())


def test_auto_trains_each_candidate_and_records_the_choice(corpus: Path, pairs_tsv: Path, train_pairs: Path,
                                                           tiny_model_dir: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    result = _auto(corpus, train_pairs, tiny_model_dir, pairs_tsv, output)
    assert result.exit_code == 0, result.output
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["recipe"] == "auto" and metrics["dev"] == "pairs.tsv"
    assert [row["name"] for row in metrics["candidates"]] == ["consert-batch_size=8", "clsr-batch_size=8"]
    assert metrics["adjustment"]["candidates"] == 2
    assert metrics["decision"] in (USE_ADAPTED, KEEP_BASE) and metrics["decision_reason"]
    base = json.loads((output / "base_dev.json").read_text())["score"]
    assert metrics["base_score"] == base
    for row in metrics["candidates"]:
        run = json.loads((output / row["output"] / "metrics.json").read_text())
        assert run["base_score"] == base  # scored once, shared by every candidate
        assert row["dev_change"] == pytest.approx(row["dev_score"] - base)
        assert row["dev_score"] == pytest.approx(run["best_score"], rel=FLOAT32_RTOL)
        assert row["steps"] == 4 and row["seconds"] > 0
        assert row["dev_change_adjusted_ci"][0] <= row["dev_change_ci"][0]
    chosen = metrics["chosen"]
    assert (output / "modules.json").is_file() == (chosen is not None)
    flat = _flat(result.stdout)
    assert "2 candidates, 4 steps each, on pairs.tsv" in flat
    for row in metrics["candidates"]:
        assert f"{row['name']} {row['dev_score']:.2f} {row['dev_change']:+.2f}" in flat
    assert ("keep the base model" in flat) == (chosen is None)
    assert _flat(result.stderr).count("base model on pairs.tsv:") == 1  # scored once, said once


def test_the_table_gives_a_tested_candidates_risk_and_names_the_untested() -> None:
    from sentadapt.decision.rule import DecisionRule
    from sentadapt.run.summary import auto_table

    scores = [_score("consert", -0.4, (-1.0, +0.2), (-1.2, +0.4)), *_three()[1:]]
    choice = choose(scores, "dev.tsv", DecisionRule(), [_risk_evidence(0.7), _risk_evidence(0.01), None])
    assert choice.chosen is None
    rows = [{**row, "name": row["name"], "failed": None, "best_step": 2, "seconds": 1.0}
            for row in choice.to_dict()["candidates"]]
    record = {"decision_rule": "risk", "adjustment": {"confidence": None}, "candidates": [
        {**row, "steps": 4} for row in rows], "dev": "dev.tsv", "base_score": 70.0, "chosen": None,
        "risk_limit": 0.2}
    cells = [[cell.text for cell in row.cells] for row in auto_table(record).rows]
    assert [row[3] for row in cells] == ["0.700", "untested", "untested"]  # tested with Δ ≤ 0: its risk, not –


def test_auto_publishes_the_chosen_candidate_model(corpus: Path, pairs_tsv: Path, train_pairs: Path,
                                                   tiny_model_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Force a choice (the rule is tested above): the top of OUTPUT then encodes as the candidate does."""
    import sentadapt.run.auto.choice as auto
    from sentadapt.decision.selection import Choice
    from sentadapt.model.encoder import Encoder

    def choose_first(runs, evaluator, base_outputs, dev_name):
        return Choice(runs[0].candidate.name, USE_ADAPTED, "forced", 0.975, ())

    monkeypatch.setattr(auto, "decide_among", choose_first)
    monkeypatch.setattr(auto, "write_auto_metrics", lambda *args: {"candidates": [], "chosen": "x", "dev": "d",
                                                                    "base_score": 0.0, "decision_reason": "forced",
                                                                    "adjustment": {"confidence": 0.975}})
    output = tmp_path / "run"
    assert _auto(corpus, train_pairs, tiny_model_dir, pairs_tsv, output).exit_code == 0
    published = Encoder.load(output, device="cpu").encode(["the server is down"])
    candidate = Encoder.load(output / "candidates" / "consert-batch_size=8", device="cpu").encode(
        ["the server is down"])
    assert np.array_equal(published, candidate)


def test_auto_needs_a_dev_set_and_a_step_budget(corpus: Path, pairs_tsv: Path, train_pairs: Path, tiny_model_dir: Path,
                                                tmp_path: Path) -> None:
    result = run_adapt(str(corpus), "--recipe", "auto", "--base", str(tiny_model_dir), "--dev", "none",
                       "--output", str(tmp_path / "a"), "--max-steps", "4")
    assert result.exit_code == 2
    assert "Error: --recipe auto: needs a labelled dev set to choose among the candidates" in result.stderr
    result = run_adapt(str(corpus), "--recipe", "auto", "--base", str(tiny_model_dir), "--dev", str(pairs_tsv),
                       "--output", str(tmp_path / "b"))
    assert result.exit_code == 2
    assert ("Error: --recipe auto: give --max-steps N (every candidate trains the same number of optimizer steps; "
            "epochs would give each recipe a different budget)") in result.stderr
    result = run_adapt(str(corpus), "--recipe", "consert", "--candidates", "consert", "--base", str(tiny_model_dir),
                       "--output", str(tmp_path / "c"))
    assert result.exit_code == 2
    assert "Error: --candidates: only with --recipe auto" in result.stderr
    result = run_adapt(str(corpus), "--recipe", "auto", "--candidates", "consert:temprature=0.1", "--base",
                       str(tiny_model_dir), "--dev", str(pairs_tsv), "--max-steps", "4",
                       "--output", str(tmp_path / "d"))
    assert result.exit_code == 2
    assert "Error: candidate consert:temprature=0.1: --set: Unknown key 'temprature'." in result.stderr
    result = run_adapt(str(corpus), "--recipe", "auto", "--candidates", "consert,consert:max_steps=3", "--base",
                       str(tiny_model_dir), "--dev", str(pairs_tsv), "--max-steps", "4",
                       "--output", str(tmp_path / "e"))
    assert result.exit_code == 2
    assert ("Error: --recipe auto: candidates must share max_steps (consert 4, consert:max_steps=3 3); set it with a "
            "flag, not per candidate") in " ".join(result.stderr.split())


def test_a_setting_a_candidates_model_refuses_names_the_candidate(
        corpus: Path, pairs_tsv: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What only the loaded model can refuse (ConSERT's shuffle view on T5) stops the run naming the candidate."""
    from sentadapt.recipes.consert import ConsertRecipe

    def refuse(self: object, encoder: object) -> None:
        raise ConfigError("views: 'shuffle' permutes position ids, which t5 models do not accept")

    monkeypatch.setattr(ConsertRecipe, "_check_model_supports_views", refuse)
    result = run_adapt(str(corpus), "--recipe", "auto", "--candidates", "consert,sg-opt", "--base",
                       str(tiny_model_dir), "--dev", str(pairs_tsv), "--max-steps", "2", "--output",
                       str(tmp_path / "run"))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == ("Error: candidate consert: views: 'shuffle' permutes position ids, "
                                              "which t5 models do not accept")


def test_auto_refuses_a_staged_candidate_that_would_train_twice_the_budget(
        corpus: Path, pairs_tsv: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    nli = tmp_path / "nli.jsonl"
    nli.write_text(json.dumps({"premise": "the server is down", "hypothesis": "the server is not running",
                               "label": "entailment"}) + "\n")
    result = run_adapt(str(corpus), "--recipe", "auto", "--candidates", f"consert,consert:mode=sup-unsup:nli={nli}",
                       "--base", str(tiny_model_dir), "--dev", str(pairs_tsv), "--max-steps", "4",
                       "--output", str(tmp_path / "run"), "--dry-run")
    assert result.exit_code == 2
    assert (f"Error: --recipe auto: candidate consert:mode=sup-unsup:nli={nli} trains 2 stages (sup, unsup) of 4 "
            "steps each, 8 in all against 4 for a single-stage candidate; compare one stage's mode (e.g. mode=sup or "
            "mode=unsup), or train the staged mode with adapt --recipe consert") in " ".join(result.stderr.split())


def test_auto_dry_run_prints_each_candidate_config(corpus: Path, pairs_tsv: Path, train_pairs: Path,
                                                   tiny_model_dir: Path, tmp_path: Path) -> None:
    import yaml

    result = _auto(corpus, train_pairs, tiny_model_dir, pairs_tsv, tmp_path / "run", "--dry-run")
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.stdout))
    assert [d["recipe"] for d in documents] == ["consert", "clsr"]
    assert [d["corpus"] for d in documents] == [[str(corpus)], [str(train_pairs)]]
    assert {d["train"]["max_steps"] for d in documents} == {4}
    assert documents[0]["train"]["batch_size"] == 8 and documents[1]["train"]["optimizer"] == "lars"
    assert not (tmp_path / "run").exists()


def test_an_interrupted_candidate_resumes_and_the_choice_matches_a_straight_run(
        corpus: Path, pairs_tsv: Path, train_pairs: Path, tiny_model_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sentadapt.train.tracking as tracking

    straight = tmp_path / "straight"
    assert _auto(corpus, train_pairs, tiny_model_dir, pairs_tsv, straight).exit_code == 0

    real_log = tracking.RunRecords.log

    def interrupt_second_candidate(self, record):  # Ctrl-C after step 3 of clsr: a checkpoint is written
        real_log(self, record)
        if "clsr" in str(self.train_log.path) and record.get("step") == 3 and "loss" in record:
            signal.raise_signal(signal.SIGINT)  # a Ctrl-C: the loop stops at this step's boundary

    monkeypatch.setattr(tracking.RunRecords, "log", interrupt_second_candidate)
    interrupted = tmp_path / "interrupted"
    first = _auto(corpus, train_pairs, tiny_model_dir, pairs_tsv, interrupted)
    assert first.exit_code == 130, first.output
    assert f"resume with: sentadapt adapt --resume --output {interrupted}" in _flat(first.stderr)
    assert (interrupted / "candidates" / "consert-batch_size=8" / "metrics.json").is_file()
    assert not (interrupted / "metrics.json").exists()
    monkeypatch.setattr(tracking.RunRecords, "log", real_log)

    resumed = run_adapt("--resume", "--output", str(interrupted))
    assert resumed.exit_code == 0, resumed.output
    assert "finished earlier" in resumed.stderr and "resuming from its last checkpoint" in resumed.stderr
    a = json.loads((straight / "metrics.json").read_text())
    b = json.loads((interrupted / "metrics.json").read_text())
    assert (a["chosen"], a["decision"]) == (b["chosen"], b["decision"])
    for row_a, row_b in zip(a["candidates"], b["candidates"]):
        assert row_b["dev_score"] == pytest.approx(row_a["dev_score"], rel=FLOAT32_RTOL)
        assert row_b["steps"] == row_a["steps"] == 4
    again = run_adapt("--resume", "auto", "--output", str(interrupted))
    assert again.exit_code == 0 and "is a finished run" in again.stderr


def test_a_keep_base_auto_run_says_why_it_has_no_model(tmp_path: Path) -> None:
    from sentadapt.errors import ModelError
    from sentadapt.model.resolve import resolve_model
    from sentadapt.storage.run_folder import RunDir

    run = tmp_path / "run"
    (run / "candidates").mkdir(parents=True)
    (run / "auto.yaml").write_text("recipe: auto\ncandidates: [consert]\n")
    with pytest.raises(ModelError) as error:
        resolve_model(str(run))
    assert str(error.value).startswith(f"{run}: a --recipe auto run that has not finished (no metrics.json)")
    (run / "metrics.json").write_text(json.dumps({"decision_reason": "no candidate beat the base model",
                                                  "base_model": "all-MiniLM-L6-v2"}))
    with pytest.raises(ModelError) as error:
        resolve_model(str(run))
    assert str(error.value) == (f"{run}: a --recipe auto run that kept the base model, so it publishes no model (no "
                                "candidate beat the base model); use the base model (all-MiniLM-L6-v2), or one "
                                f"candidate's run in {run}/candidates/")
    # what reads a finished run's record (`pairs --run`, `decide`) says the same, naming the option
    with pytest.raises(ConfigError) as config_error:
        RunDir(run).finished_metrics(f"--run {run}")
    assert str(config_error.value) == (f"--run {run}: a --recipe auto run that kept the base model, so it publishes no "
                                       "model (no candidate beat the base model); use the base model "
                                       f"(all-MiniLM-L6-v2), or one candidate's run in {run}/candidates/")


def test_a_diverging_candidate_is_left_out_and_the_others_still_decide(
        corpus: Path, pairs_tsv: Path, train_pairs: Path, tiny_model_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sentadapt.recipes.clsr import ClsrRecipe
    from tests.conftest import poisoned

    real = ClsrRecipe.embed

    def nan_loss(self, encoder, heads, batch, exported):
        embedded = real(self, encoder, heads, batch, exported)
        embedded.terms[0] = poisoned(embedded.terms[0])
        return embedded

    monkeypatch.setattr(ClsrRecipe, "embed", nan_loss)
    output = tmp_path / "run"
    result = _auto(corpus, train_pairs, tiny_model_dir, pairs_tsv, output)
    assert result.exit_code == 0, result.output
    assert "candidate 2/2 (clsr:batch_size=8): left out of the choice: loss is nan at step 1" in _flat(result.stderr)
    metrics = json.loads((output / "metrics.json").read_text())
    failed = metrics["candidates"][1]
    assert failed["failed"].startswith("loss is nan at step 1") and failed["dev_score"] is None
    assert metrics["adjustment"]["candidates"] == 1  # K counts the candidates compared with the base
    assert "clsr-batch_size=8 failed" in _flat(result.stdout)
    monkeypatch.setattr(ClsrRecipe, "embed", real)
    (output / "metrics.json").unlink()  # as if stopped before the choice: a resume does not train clsr again
    resumed = run_adapt("--resume", "--output", str(output))
    assert resumed.exit_code == 0, resumed.output
    assert "failed earlier, left out of the choice: loss is nan at step 1" in _flat(resumed.stderr)


# ---------------------------------------------------------------- the risk rule's choice (the default)


def _risk_evidence(risk: float, options: int = 4, units: int = 400):
    from sentadapt.evaluation.evidence import Evidence

    # 400 dev pairs: one look at the label-more loop's cap is held to the limit itself
    return Evidence(1.2, 0.6, 1 - risk, options, units, "pairs")


def _three() -> list[CandidateScore]:
    return [_score("consert", +0.8, (-0.3, +1.9), (-0.6, +2.2)),
            _score("sg-opt", +1.2, (+0.1, +2.3), (-0.2, +2.6)),
            _score("clsr", -0.5, (-1.0, +0.0), (-1.2, +0.2))]


def test_the_walk_holds_each_candidate_to_the_first_looks_limit_as_a_single_run() -> None:
    """Issue 83: on 100 dev pairs a run's decision is the first look of the label-more loop, held to 0.2 · √(100/400)
    = 0.10; the walk holds each candidate to it too (at the full 0.2 it would use a candidate at 0.15)."""
    from sentadapt.decision.rule import DecisionRule

    choice = choose(_three(), "dev.tsv", DecisionRule("risk", 0.2),
                    [_risk_evidence(0.15, units=100), _risk_evidence(0.05, units=100), None])
    assert (choice.chosen, choice.decision) == (None, "keep-base")
    assert "limit 0.100 at look 1 of the label-more loop (100 of 400 labels; 0.20 over every look)" in choice.reason


def test_the_risk_rule_walks_the_candidates_in_order_and_uses_the_largest_delta_that_passed() -> None:
    from sentadapt.decision.rule import DecisionRule

    scores = _three()
    choice = choose(scores, "dev.tsv", DecisionRule("risk", 0.2), [_risk_evidence(0.15), _risk_evidence(0.05), None])
    assert (choice.chosen, choice.decision, choice.rule) == ("sg-opt", USE_ADAPTED, "risk")
    assert choice.reason == ("sg-opt beats the base model on dev.tsv (Δ +1.20 [+0.10, +2.30]; risk 0.05 that it is "
                             "no better (best of 4 evaluations), limit 0.20; candidates tested in order, 3 in all)")
    assert choice.risk == pytest.approx(0.05)
    assert choice.to_dict()["adjustment"]["method"] == "fixed sequence, max-T within each candidate"
    # the second fails: the first, which passed, is used
    second_fails = choose(scores, "dev.tsv", DecisionRule("risk", 0.2), [_risk_evidence(0.15), _risk_evidence(0.4),
                                                                          None])
    assert (second_fails.chosen, second_fails.risk) == ("consert", pytest.approx(0.15))


def test_the_risk_rule_stops_at_the_first_candidate_that_fails() -> None:
    from sentadapt.decision.rule import DecisionRule

    scores = _three()
    kept = choose(scores, "dev.tsv", DecisionRule("risk", 0.2), [_risk_evidence(0.35), _risk_evidence(0.01), None])
    assert (kept.chosen, kept.decision) == (None, KEEP_BASE)  # sg-opt would pass, but it comes after a failure
    assert kept.reason == ("the first candidate, consert, has not enough evidence on dev.tsv (Δ +0.80 [-0.30, "
                           "+1.90]; risk 0.35 that it is no better (best of 4 evaluations), limit 0.20); the "
                           "candidates after it are not tested")
    assert choose(scores, "dev.tsv", DecisionRule("risk", 0.4),
                  [_risk_evidence(0.35), _risk_evidence(0.01), None]).chosen == "sg-opt"
    assert choose(scores, "dev.tsv", DecisionRule("positive")).chosen == "sg-opt"
    assert choose(scores, "dev.tsv", DecisionRule("strict")).chosen is None  # Bonferroni: within noise
    nothing = choose([_score("consert", -0.1, (-0.5, +0.3), (-0.6, +0.4))], "dev.tsv", DecisionRule(),
                     [_risk_evidence(0.6)])
    assert nothing.reason == "no candidate beat the base model on dev.tsv (best: Δ -0.10 [-0.50, +0.30])"


def test_a_single_candidate_is_decided_exactly_as_a_single_run(tmp_path: Path) -> None:
    """auto --candidates consert decides as adapt --recipe consert: the same max-T over the same evaluations."""
    from sentadapt.decision.rule import DecisionRule, decide
    from sentadapt.decision.selection import weigh_candidates
    from sentadapt.evaluation.evaluator import dev_evidence

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 80)
    evaluator = sts_dev_evaluator(tmp_path, gold)
    def outputs(noise: float, seed: int) -> dict:
        return noisy_outputs(evaluator, gold, noise, seed)

    base = outputs(0.3, 1)
    steps = [outputs(0.22, seed) for seed in (2, 3, 4)]
    best = max(range(3), key=lambda i: evaluator.from_outputs(steps[i]).average)
    scores, evidence = weigh_candidates(evaluator, base, [("consert", steps[best], steps)])
    single = dev_evidence(evaluator, base, steps, best)
    assert evidence[0] is not None and single is not None
    assert evidence[0].risk == pytest.approx(single.risk, abs=1e-12) and evidence[0].options == 3
    delta = evaluator.compare_outputs(base, steps[best])
    run = decide(delta.value, delta.interval, "dev.tsv", single, DecisionRule())
    assert choose(scores, "dev.tsv", DecisionRule(), evidence).decision == run.decision


@pytest.mark.parametrize("recipe", ["consert", "sg-opt", "clsr"])
def test_an_auto_candidate_with_a_teacher_is_configured_exactly_as_recipe_name_with_a_teacher(
    corpus: Path, pairs_tsv: Path, train_pairs: Path, tiny_model_dir: Path, tmp_path: Path, recipe: str
) -> None:
    """The teacher-run defaults (neighbour batches, patience 2, the length rule) and API keywords reach every
    candidate: what `--recipe auto` trains as candidate R is what `--recipe R` would, for every recipe."""
    import dataclasses

    import sentadapt
    from tests.teacher.test_teacher import build_tiny_teacher

    teacher = build_tiny_teacher(tmp_path / "teacher")
    inputs = train_pairs if recipe == "clsr" else corpus
    common = dict(base=str(tiny_model_dir), teacher=str(teacher), dev=str(pairs_tsv), max_steps=4, dry_run=True,
                  temperature=0.07, matryoshka=(32, 16))
    single = sentadapt.adapt(inputs, recipe=recipe, output=tmp_path / "single", **common).configs[0]
    auto = sentadapt.adapt(inputs, recipe="auto", candidates=[recipe], output=tmp_path / "auto",
                           **common).configs[0]
    if recipe != "clsr":  # the teacher-run defaults (CLSR, which trains no encoder, keeps its own)
        assert single.train.distillation.distill_batches == "neighbours" and single.train.evaluation.patience == 2
    assert single.recipe_args.temperature == 0.07 and single.train.dims.matryoshka == (32, 16)
    assert dataclasses.replace(auto, output=single.output) == single
