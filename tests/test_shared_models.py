"""Real models and data from ../shared: `sentadapt eval` equals a plain sentence-transformers + scipy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from sentadapt.data.pairs import read_scored_pairs
from sentadapt.encoder import Encoder
from sentadapt.evaluation.sts import StsEvaluator
from sentadapt.evaluation.tasks import TASKS
from tests.conftest import SHARED_MODELS, SHARED_STS, needs_shared

pytestmark = [pytest.mark.shared, needs_shared()]


def reference_scores(model_dir: str) -> dict[str, float]:
    """The straightforward way: encode both sides with sentence-transformers, scipy Spearman of cosine."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu")
    scores = {}
    for task in TASKS:
        pairs = read_scored_pairs(SHARED_STS / f"{task}.test.jsonl")
        left = model.encode(pairs.sentence1, convert_to_tensor=True, batch_size=64)
        right = model.encode(pairs.sentence2, convert_to_tensor=True, batch_size=64)
        cosines = torch.nn.functional.cosine_similarity(left, right).cpu().numpy()
        scores[task] = float(spearmanr(cosines, pairs.scores).statistic) * 100
    return scores


def test_eval_all_tasks_equals_sentence_transformers_reference() -> None:
    # the 3-layer model: the same code path at half the CI time of the 6-layer one (whose 7-task parity,
    # max |Δ| 0.0005, bench/bench_eval.py measures)
    model_dir = str(SHARED_MODELS / "paraphrase-minilm-l3-v2")
    # point scores are what is compared: no bootstrap (its resampled statistics: test_eval_tasks.py)
    evaluator = StsEvaluator.from_sts(list(TASKS), "test", SHARED_STS, resamples=0)
    report = evaluator(Encoder.load(model_dir, device="cpu"))
    reference = reference_scores(model_dir)
    ours = {task.task: task.metrics["spearman"] for task in report.tasks}
    assert list(ours) == list(TASKS)
    for task in TASKS:
        assert ours[task] == pytest.approx(reference[task], abs=0.01), task
    assert report.average == pytest.approx(np.mean(list(reference.values())), abs=0.01)
    assert [task.units for task in report.tasks] == [3108, 1500, 3750, 3000, 1186, 1379, 4927]
