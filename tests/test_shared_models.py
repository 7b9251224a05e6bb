"""Real models and data from ../shared: `sentadapt eval` equals a plain sentence-transformers + scipy reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from sentadapt.data.pair_files import read_scored_pairs
from sentadapt.evaluation.sts import StsEvaluator
from sentadapt.evaluation.tasks import TASKS
from sentadapt.model.encoder import Encoder
from tests.conftest import SHARED_MODELS, SHARED_STS, needs_shared

pytestmark = [pytest.mark.shared, needs_shared()]


def reference_scores(model_dir: str, data_dir: Path) -> dict[str, float]:
    """The straightforward way: encode both sides with sentence-transformers, scipy Spearman of cosine."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu")
    scores = {}
    for task in TASKS:
        pairs = read_scored_pairs(data_dir / f"{task}.test.jsonl")
        left = model.encode(pairs.sentence1, convert_to_tensor=True, batch_size=64)
        right = model.encode(pairs.sentence2, convert_to_tensor=True, batch_size=64)
        cosines = torch.nn.functional.cosine_similarity(left, right).cpu().numpy()
        scores[task] = float(spearmanr(cosines, pairs.scores).statistic) * 100
    return scores


def every_nth_pair(data_dir: Path, n: int) -> Path:
    """The 7 STS test files with every n-th pair kept (in order, subsets and all): the same protocol on 1/n of the
    encoding work."""
    for task in TASKS:
        lines = (SHARED_STS / f"{task}.test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        (data_dir / f"{task}.test.jsonl").write_text("".join(lines[::n]), encoding="utf-8")
    return data_dir


def test_eval_all_tasks_equals_sentence_transformers_reference(tmp_path: Path) -> None:
    # the 3-layer model on every 16th pair of each of the 7 test sets: the same code path (unique sentences encoded
    # once, length-sorted batches, the 'all' aggregation over STS12-16's subsets) at 1/16 of the encoding of the full
    # sets (26k unique sentences here, 37.7k in the reference: minutes on 2 cores), whose parity on the 6-layer
    # model (max |Δ| 0.0005) `python -m bench.bench_eval` measures
    model_dir = str(SHARED_MODELS / "paraphrase-minilm-l3-v2")
    data_dir = every_nth_pair(tmp_path, 16)
    # point scores are what is compared: no bootstrap (its resampled statistics: test_eval_tasks.py)
    evaluator = StsEvaluator.from_sts(list(TASKS), "test", data_dir, resamples=0)
    report = evaluator(Encoder.load(model_dir, device="cpu"))
    reference = reference_scores(model_dir, data_dir)
    ours = {task.task: task.metrics["spearman"] for task in report.tasks}
    assert list(ours) == list(TASKS)
    for task in TASKS:
        assert ours[task] == pytest.approx(reference[task], abs=0.01), task
    assert report.average == pytest.approx(np.mean(list(reference.values())), abs=0.01)
    assert [task.units for task in report.tasks] == [195, 94, 235, 188, 75, 87, 308]


def test_the_full_sts_test_sets_are_read_whole() -> None:
    """Every pair of the 7 test sets (the counts the STS papers report), read without encoding anything."""
    evaluator = StsEvaluator.from_sts(list(TASKS), "test", SHARED_STS, resamples=0)
    assert [task.units for task in evaluator.tasks] == [3108, 1500, 3750, 3000, 1186, 1379, 4927]
