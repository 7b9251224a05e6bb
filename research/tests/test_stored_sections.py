"""research/results.md's "suite", "domain-suite", "domain-suite-auto", "grouping", "lora" and "eval-tasks" sections are
what the stored studies render, and the stored studies follow from the tracked per-unit outputs in research/results/suite,
research/results/decision, research/results/grouping, research/results/lora and research/results/eval-tasks (issue 41, item 6): a stale section or study
fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tools.doc_sections import wrap

from research.experiments import decision_study, domain_stored, lora_suite

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / decision_study.RESULTS


def _stored(path: Path) -> dict:
    assert path.is_file(), f"{path.relative_to(REPO)}: the evidence behind a section is missing; restore it from git"
    return json.loads(path.read_text(encoding="utf-8"))


def _doc() -> str:
    return (REPO / "research" / "results.md").read_text(encoding="utf-8")


def test_the_domain_suite_sections_are_what_their_stored_study_renders() -> None:
    study = _stored(RESULTS / domain_stored.STUDY)
    suite = domain_stored.only(study, {"sentadapt", "peer"})
    auto = domain_stored.only(study, {"sentadapt", "selection"})
    assert wrap(domain_stored.SECTION, domain_stored.render(suite, domain_stored.COMMAND)) in _doc()
    assert wrap(domain_stored.AUTO_SECTION, domain_stored.render(auto, domain_stored.COMMAND)) in _doc()


def test_the_domain_suite_study_follows_from_the_stored_outputs() -> None:
    study = _stored(RESULTS / domain_stored.STUDY)
    fresh = domain_stored.point_values(RESULTS)
    stored = {(model, domain, name): (row["step"], row["test"]["delta"], row["test_ap"]["delta"])
              for model, domains in study["variants"]["default"]["models"].items()
              for domain, entry in domains.items() for name, row in entry["rows"].items()
              if name != "base" and row["kind"] != "selection"}
    assert sorted(fresh) == sorted(stored)
    for key, (step, test, ap) in stored.items():
        assert fresh[key][0] == step, key
        assert fresh[key][1:] == pytest.approx((test, ap), abs=1e-9), key


def test_the_lora_section_is_what_its_stored_study_renders_and_follows_from_the_outputs() -> None:
    study = _stored(REPO / lora_suite.RESULTS / lora_suite.STUDY)
    assert wrap(lora_suite.SECTION, lora_suite.render(study)) in _doc()
    assert list(study["settings"]) == lora_suite.stored_names(REPO / lora_suite.RESULTS)
    for name in study["settings"]:
        for domain, rows in study["domains"].items():
            folder = lora_suite.stored_run_folder(REPO / lora_suite.RESULTS, name, domain)
            run = decision_study.load_run(folder, lora_suite.MODEL, domain, lora_suite.RECIPE)
            pool = decision_study.load_pool(REPO / decision_study.POOLS / domain / "pool.jsonl")
            step, test, _ = domain_stored.points(run, pool)
            assert step == rows[name]["step"], (name, domain)
            assert test == pytest.approx(rows[name]["test"]["delta"], abs=1e-9), (name, domain)


def test_a_stored_job_command_reads_as_a_user_types_it() -> None:
    argv = ["/work/x/.venv/bin/python", "-m", "sentadapt", "adapt", "/work/x/runs/decision/data/news/corpus.txt",
            "--base", "../shared/models/m", "--output", "/work/x/runs/decision/runs/m/news/consert"]
    assert domain_stored.command_of(argv) == ("python -m sentadapt adapt runs/decision/data/news/corpus.txt --base "
                                              "../shared/models/m --output runs/decision/runs/m/news/consert")


def test_the_eval_tasks_section_is_what_its_stored_per_unit_outputs_give() -> None:
    """research/results.md's "eval-tasks" section: each task's metric and bootstrap CI recomputed from the stored
    per-unit outputs (research/results/eval-tasks/), then drawn."""
    from research.experiments import eval_tasks_stored

    results = REPO / eval_tasks_stored.RESULTS
    for model in eval_tasks_stored.MODELS:
        _stored(results / f"{model}.json")
    assert wrap(eval_tasks_stored.SECTION, eval_tasks_stored.section(results)) in _doc()


def test_a_stored_task_computes_what_its_type_computes_from_the_same_outputs() -> None:
    """StoredTask against the real pair-classification task on the same cosines and labels: same metrics, same
    bootstrap CIs (the same key); a query task's metric is the mean of its queries' values × 100."""
    import numpy as np
    from sentadapt.data.pair_files import LabelledPairs
    from sentadapt.evaluation.evaluator import Evaluator
    from sentadapt.evaluation.pairclass import PairClassificationTask

    from research.experiments.eval_tasks_stored import StoredTask

    rng = np.random.default_rng(0)
    labels = [int(v) for v in rng.integers(0, 2, 60)]
    cosines = (np.array(labels) * 0.3 + rng.normal(0.4, 0.2, 60)).tolist()
    real = PairClassificationTask("p.tsv", LabelledPairs([f"a{i}" for i in range(60)], [f"b{i}" for i in range(60)],
                                                         labels, "p.tsv"))
    stored = StoredTask("p.tsv", {"type": "pair-classification", "source": "p.tsv", "units": 60, "labels": labels})
    reports = [Evaluator([task], resamples=200).from_outputs({"p.tsv": {"cosine": cosines}}).to_dict()
               for task in (real, stored)]
    for key in ("metrics", "ci", "main_metric", "units"):
        assert reports[0]["tasks"]["p.tsv"][key] == reports[1]["tasks"]["p.tsv"][key], key
    values = rng.uniform(0, 1, 40).tolist()
    query = StoredTask("q", {"type": "reranking", "source": "q", "units": 40})
    outputs = {"map": np.array(values), "mrr@10": np.array(values), "ndcg@10": np.array(values)}
    assert query.metrics(outputs)[0]["map"] == pytest.approx(100 * float(np.mean(values)))


def test_the_suite_section_is_what_its_stored_cosines_give() -> None:
    """research/results.md's "suite" section (the 7 STS tasks, the papers' gains, ConSERT's curves, speed): every score
    recomputed from the stored per-pair cosines and gold scores (research/results/suite/), then drawn."""
    from research.experiments import suite_stored

    _stored(REPO / suite_stored.RESULTS / "suite.json")
    assert wrap(suite_stored.SECTION, suite_stored.section(REPO / suite_stored.RESULTS)) in _doc()


def test_a_stored_suite_run_rescored_gives_the_dev_scores_adapt_recorded() -> None:
    """Each stored adapt run of the suite: the base's and the published step's STS-B dev Spearman, recomputed from
    the stored (rounded) cosines, are what adapt's metrics.json recorded."""
    from research.experiments import suite_stored

    results = REPO / suite_stored.RESULTS
    _stored(results / "suite.json")
    scorer = suite_stored.Scorer(results)
    runs = sorted((results / "runs").iterdir())
    assert runs
    for run in runs:
        metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
        selection = scorer.selection(run.name)
        assert selection["dev_base"] == pytest.approx(metrics["base_score"], abs=1e-3), run.name
        assert selection["dev_best"] == pytest.approx(metrics["best_score"], abs=1e-3), run.name


def test_the_suite_scorer_is_spearman_over_the_stored_pairs() -> None:
    """Scorer against scipy on a stored model's cosines (no tie rule or subset left to chance)."""
    from scipy.stats import spearmanr

    from research.experiments import suite_stored

    results = REPO / suite_stored.RESULTS
    _stored(results / "suite.json")
    gold = json.loads((results / "gold.json").read_text(encoding="utf-8"))
    scores = json.loads(next((results / "scores").glob("*.json")).read_text(encoding="utf-8"))
    cosines = scores["test"]["sickr"]
    expected = 100 * spearmanr(cosines, gold["sickr"]).statistic
    assert suite_stored.Scorer(results).spearman("sickr", cosines) == pytest.approx(expected, abs=1e-9)


def test_the_grouping_section_is_what_its_stored_study_renders_and_follows_from_the_outputs() -> None:
    from research.experiments import grouping_suite

    results = REPO / grouping_suite.RESULTS
    study = _stored(results / grouping_suite.STUDY)
    assert wrap(grouping_suite.SECTION, grouping_suite.render(study)) in _doc()
    for model, settings in study["models"].items():
        for setting, cells in settings.items():
            for domain, cell in cells.items():
                folder = grouping_suite.stored_folder(results, model, domain, setting)
                run = decision_study.load_run(folder, model, domain, grouping_suite.RECIPE)
                pool = decision_study.load_pool(REPO / decision_study.POOLS / domain / "pool.jsonl")
                step, test, _ = domain_stored.points(run, pool)
                assert step == cell["step"], (model, setting, domain)
                assert test == pytest.approx(cell["test"]["delta"], abs=1e-9), (model, setting, domain)
