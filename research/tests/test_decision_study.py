"""research/experiments/decision_study.py: the re-drawn splits, a run's decision on them, the summaries and the power model."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from research.experiments import decision_study


def _pool(study: ModuleType, pairs: int = 120):
    rng = np.random.default_rng(0)
    first = [f"first sentence {i}" for i in range(pairs)]
    second = [f"second sentence {i}" for i in range(pairs)]
    second[5] = first[7]  # pair 5 shares a sentence with pair 7: they cannot sit on both sides of a split
    return study.Pool(rng.uniform(0, 5, pairs), first, second)


def test_a_draw_is_seeded_and_its_test_pairs_share_no_sentence_with_the_dev_pairs() -> None:
    study = decision_study
    pool = _pool(study)
    dev, test = study.draw(pool, 40, seed=3, domain="news")
    assert len(dev) == 40 and not set(dev) & set(test)
    dev_sentences = {study.key(text) for i in dev for text in (pool.first[i], pool.second[i])}
    assert not any(study.key(pool.first[i]) in dev_sentences or study.key(pool.second[i]) in dev_sentences
                   for i in test)
    assert len(test) >= len(pool) - 40 - 1  # only the pair sharing a sentence with a dev pair can drop out
    again = study.draw(pool, 40, seed=3, domain="news")
    assert np.array_equal(dev, again[0]) and np.array_equal(test, again[1])
    assert not np.array_equal(dev, study.draw(pool, 40, seed=4, domain="news")[0])


def test_a_run_keeps_its_best_dev_step_and_each_rule_decides_as_adapt_would() -> None:
    study = decision_study
    pool = _pool(study)
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 1, len(pool))
    base = pool.gold + 2.0 * noise
    steps = {25: pool.gold + 1.9 * noise, 50: pool.gold + 0.5 * noise, 75: pool.gold + 1.0 * noise}
    run = study.Run("m", "news", "consert", base, steps)
    dev_rows, test = study.draw(pool, 60, seed=0, domain="news")
    dev = study.DevSet(pool, dev_rows, resamples=500)
    cell = study.single_run(run, pool, dev, test)
    assert cell["step"] == 50  # the least noisy step scores best on any draw of 60 pairs
    assert cell["dev_change"] > 0 and cell["test_change"] > 0
    decisions = cell["decisions"]
    assert decisions["positive (any dev Δ > 0)"] == "use-adapted"
    assert decisions["risk ≤ 0.20 (default)"] == ("use-adapted" if cell["risk"] <= 0.2 else "keep-base")
    assert cell["risk"] < 0.05  # a clear gain: 2.0 → 0.5 noise on 60 pairs


def _cells(applied: list[float], used: list[bool], label: str) -> list[dict]:
    return [{"model": "m", "recipe": "consert", "dev_size": 100, "seed": seed, "domain": "d",
             "test_change": value, "decisions": {label: "use-adapted" if use else "keep-base"}}
            for seed, (value, use) in enumerate(zip(applied, used))]


def test_the_summary_counts_what_the_user_ends_with() -> None:
    study = decision_study
    label = "risk ≤ 0.20 (default)"
    cells = _cells([+1.0, +0.5, -0.2, +0.3], [True, False, True, False], label)
    summary = study.summarize(cells, "m", "consert", 100, label)
    assert summary["applied"] == pytest.approx((1.0 + 0.0 - 0.2 + 0.0) / 4)
    assert summary["raw"] == pytest.approx(1.6 / 4)
    assert summary["kept"] == pytest.approx(0.8 / 1.8)  # applied total over the positive part of every test Δ
    assert (summary["used"], summary["false_use"], summary["worst"]) == (2, 1, pytest.approx(-0.2))
    assert summary["worst_cell"] == "d seed 2"
    assert study.summarize(cells, "m", "consert", 100, label, seeds=2)["cells"] == 2


def test_the_power_model_uses_a_null_model_at_the_rules_stated_rates() -> None:
    study = decision_study
    from sentadapt.decision.rule import DecisionRule

    assert study.normal_power(0.0, 100, 6.0, DecisionRule("risk", 0.2)) == pytest.approx(0.2)
    assert study.normal_power(0.0, 100, 6.0, DecisionRule("strict")) == pytest.approx(0.025, abs=1e-6)
    assert study.normal_power(0.0, 100, 6.0, DecisionRule("positive")) == pytest.approx(0.5)
    # a gain of one standard error (σ/√n = 0.6) beyond the risk rule's threshold z_0.8·0.6 is used 84 % of the time
    assert study.normal_power(0.8416 * 0.6 + 0.6, 100, 6.0, DecisionRule("risk", 0.2)) == pytest.approx(0.8413,
                                                                                                      abs=1e-3)


REPO = decision_study.REPO
STORED = REPO / decision_study.RESULTS / decision_study.STUDY


@pytest.fixture(scope="module")
def stored() -> dict:
    import json

    assert STORED.is_file(), f"{STORED}: the evidence behind research/results.md is missing; restore it from git"
    return json.loads(STORED.read_text(encoding="utf-8"))


def test_the_decision_sections_are_what_the_stored_study_renders(stored: dict) -> None:
    """Issue 41 item 6: research/results.md's "decision-study" and docs/evaluation.md's "dev-set-power" sections are
    what `decision_study --render` draws from research/results/decision/study.json."""
    from tools.doc_sections import wrap

    command = decision_study.COMMAND
    results = (REPO / "research" / "results.md").read_text(encoding="utf-8")
    power = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    assert wrap(decision_study.SECTION, decision_study.render_results(stored, command)) in results
    assert wrap(decision_study.POWER_SECTION, decision_study.render_power(stored, command)) in power


def test_the_stored_study_follows_from_the_stored_per_pair_outputs(stored: dict) -> None:
    """Each recipe cell's kept step and test Δ re-derived from research/results/decision/runs (no bootstrap needed for
    either): a study.json out of step with the tracked outputs fails here."""
    fresh = decision_study.selections(REPO / decision_study.RESULTS, stored["meta"]["seeds"],
                                      REPO / decision_study.POOLS)
    kept = [cell for cell in stored["cells"] if cell["recipe"] != decision_study.AUTO]
    where = ("model", "domain", "dev_size", "seed", "recipe", "step")
    assert [tuple(cell[k] for k in where) for cell in fresh] == [tuple(cell[k] for k in where) for cell in kept]
    assert [cell["test_change"] for cell in fresh] == pytest.approx([cell["test_change"] for cell in kept], abs=1e-9)
