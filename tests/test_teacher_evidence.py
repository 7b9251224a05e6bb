"""The teacher's evidence (`--set teacher_evidence=on`, docs/decision.md): held-out corpus pairs, the agreement of a
model's cosines with the teacher's, and the rule that may turn keep-base into use-adapted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from sentadapt.evaluation.agreement import agreement
from sentadapt.evaluation.decision import KEEP_BASE, USE_ADAPTED, Decision, DecisionRule, with_teacher_evidence
from sentadapt.evaluation.evaluator import Delta
from sentadapt.train.agreement import MIN_HELD_OUT, agreement_pairs, holdout_rows
from tests.conftest import run_adapt


def test_agreement_is_spearman_with_the_teachers_cosines_and_a_paired_ci() -> None:
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=2000)
    base = teacher + rng.normal(scale=1.5, size=2000)
    student = teacher + rng.normal(scale=0.8, size=2000)
    found = agreement(teacher, base, student, resamples=300)
    assert found.base == pytest.approx(100 * spearmanr(base, teacher).statistic, abs=1e-9)
    assert found.student == pytest.approx(100 * spearmanr(student, teacher).statistic, abs=1e-9)
    assert found.interval is not None and found.interval[0] < found.change < found.interval[1]
    assert found.better and found.pairs == 2000
    same = agreement(teacher, base, base, resamples=300)
    assert same.change == 0 and same.interval == (0.0, 0.0) and not same.better
    assert agreement(teacher, base, student, resamples=0).interval is None


def test_the_held_out_rows_are_a_tenth_at_most_and_none_for_a_small_corpus() -> None:
    rows = holdout_rows(10_000, 1000, seed=3)
    assert len(rows) == 1000 and len(set(rows.tolist())) == 1000 and np.all(np.diff(rows) > 0)
    assert np.array_equal(rows, holdout_rows(10_000, 1000, seed=3))  # the run's seed decides them
    assert len(holdout_rows(2_701, 1000, seed=0)) == 270
    assert len(holdout_rows(10 * MIN_HELD_OUT - 1, 1000, seed=0)) == 0


def test_the_pairs_are_distinct_never_a_sentence_with_itself_and_carry_the_teachers_cosine() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    pairs = agreement_pairs(np.arange(60), [f"s{i}" for i in range(60)], vectors, seed=0)
    both = np.stack([pairs.first, pairs.second], axis=1)
    assert np.all(pairs.first < pairs.second) and len(np.unique(both, axis=0)) == len(both)
    assert 60 * 3 <= len(both) <= 60 * 6
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(pairs.teacher, (unit[pairs.first] * unit[pairs.second]).sum(1), atol=1e-5)
    nearest = np.argsort(-(unit @ unit.T - 2 * np.eye(60)), axis=1)[:, 0]
    assert all((min(i, j), max(i, j)) in set(map(tuple, both.tolist())) for i, j in enumerate(nearest))


KEEP = Decision(KEEP_BASE, "not enough evidence on dev.tsv (Δ -0.04 [-3.05, +3.25]; risk 0.52 …)", "risk", 0.52)
LEADS = Delta(12.96, (6.16, 19.41))


@pytest.mark.parametrize(("lead", "agreement_ci", "dev_ci", "used"), [
    (LEADS, (0.5, 2.0), (-3.05, 3.25), True),  # the held-out social-posts case of issue 41
    (Delta(4.0, (-1.0, 9.0)), (0.5, 2.0), (-3.05, 3.25), False),  # the teacher's lead is not established
    (LEADS, (-0.2, 2.0), (-3.05, 3.25), False),  # the agreement gain is not established
    (LEADS, (0.5, 2.0), (-3.5, -0.1), False),  # significantly worse on dev
    (None, (0.5, 2.0), (-3.05, 3.25), False),  # no teacher weighed
])
def test_the_rule_uses_the_student_only_when_all_three_conditions_hold(lead, agreement_ci, dev_ci, used) -> None:
    from sentadapt.evaluation.agreement import Agreement

    found = Agreement(80.0, 81.2, agreement_ci, 5000)
    decided = with_teacher_evidence(KEEP, dev_ci, lead, found, DecisionRule())
    assert decided.decision == (USE_ADAPTED if used else KEEP_BASE)
    if used:
        assert decided.reason == (
            f"{KEEP.reason}, but the teacher leads the base on dev (+12.96 [+6.16, +19.41]) and the student's "
            f"agreement with the teacher on 5,000 held-out corpus pairs 80.00 → 81.20 (Δ +1.20 [+0.50, +2.00]): "
            "it carries part of that lead")
    else:
        assert decided is KEEP
    use = Decision(USE_ADAPTED, "beats", "risk", 0.1)
    assert with_teacher_evidence(use, dev_ci, lead, Agreement(80.0, 79.0, (-2.0, -0.5), 5000), DecisionRule()) is use


def tiny_teacher_run(base: Path, teacher: Path, corpus: Path, dev: Path, output: Path, steps: int, *settings: str):
    """`adapt --teacher` on tiny models: batch 8, length 16, `steps` steps evaluated twice (eval_every steps / 2,
    one evaluation per pass off so it holds), the teacher check off; `settings` as more --set KEY=VALUE."""
    return run_adapt(str(corpus), "--base", str(base), "--teacher", str(teacher), "--dev", str(dev), "--output",
                     str(output), "--batch-size", "8", "--max-length", "16", "--max-steps", str(steps),
                     "--eval-every", str(steps // 2), "--set", "teacher_check=off", "--set", "evals_per_pass=0",
                     *(arg for setting in settings for arg in ("--set", setting)))


def test_a_run_with_the_teacher_evidence_never_trains_on_its_held_out_sentences(
    tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    from tests.test_teacher import build_tiny_teacher

    teacher = build_tiny_teacher(tmp_path / "teacher")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down in room {i % 7}\n" for i in range(600)))
    run = tmp_path / "run"
    result = tiny_teacher_run(tiny_model_dir, teacher, corpus, pairs_tsv, run, 6, "teacher_evidence=on",
                              "agreement_holdout=60")
    assert result.exit_code == 0, result.output
    assert "teacher evidence: 60 corpus sentences held out of training, " in result.stderr
    record = json.loads((run / "dev_outputs.json").read_text())["agreement"]
    assert record["sentences"] == 60 and len(record["teacher"]) == record["pairs"]
    assert sorted(record["evaluations"]) == ["3", "6", "base"]
    assert all(len(cosines) == record["pairs"] for cosines in record["evaluations"].values())
    metrics = json.loads((run / "metrics.json").read_text())
    kept = str(metrics["best_step"])
    again = agreement(record["teacher"], record["evaluations"]["base"], record["evaluations"][kept])
    assert metrics["teacher_evidence"] == again.to_dict()  # re-derivable from the stored cosines
    assert metrics["steps"] == 6

    # the batches: drawn from the other 540 examples only
    from sentadapt.train.micro_batches import MicroBatches

    held = set(holdout_rows(600, 60, seed=0).tolist())
    rows = np.setdiff1d(np.arange(600), sorted(held))
    config = type("C", (), {"batch_size": 8, "seed": 0, "length_grouping": True, "mask_neighbours": False})()
    seen: set[int] = set()

    class Examples:
        def lengths(self) -> np.ndarray:
            return np.full(600, 5)

        def collate(self, indices, pad_id, multiple):
            seen.update(int(i) for i in indices)
            return {}

    batches = MicroBatches(Examples(), config, 0, 1, None, None, 0, 1, rows)
    for index in range(2 * (540 // 8)):  # two whole epochs
        batches(index)
    assert not seen & held and len(seen) > 500
