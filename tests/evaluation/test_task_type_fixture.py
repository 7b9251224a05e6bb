"""Issue 85: a new eval task type is its module, registered by name; detection, reading, scoring with intervals and
the messages that list the layouts read the registry. tests/evaluation/triplets.py (sentence-transformers'
TripletEvaluator's accuracy) touches no file of the package: it is registered here, detected from its file, scored
by `evaluate` and `sentadapt eval`, and its layout is listed when a file matches no type."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from sentadapt.errors import DataError
from sentadapt.evaluation.contract import TASK_TYPES
from sentadapt.evaluation.task_types import detect_task_type
from sentadapt.model.encoder import Encoder
from tests.evaluation.triplets import TripletTask
from tests.run.test_hostile import run_cli

ROWS = [{"anchor": f"the server {i} is down", "positive": f"server {i} is not running",
         "negative": f"a red car {i} drives by"} for i in range(40)]


@pytest.fixture
def triplets(tmp_path: Path) -> Iterator[Path]:
    TASK_TYPES.register("triplets")(TripletTask)
    path = tmp_path / "triplets.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    yield path
    TASK_TYPES._items.pop("triplets", None)  # type: ignore[attr-defined]


def test_a_registered_type_is_detected_and_scored_with_its_interval(triplets: Path, tiny_model_dir: Path) -> None:
    from sentadapt.api import evaluate

    assert detect_task_type(triplets) == "triplets"
    (report,) = evaluate(str(tiny_model_dir), pairs=[triplets], bootstrap=200).reports[0]
    (result,) = report.tasks
    # the accuracy against the encoder's own cosines, computed here
    encoder = Encoder.load(tiny_model_dir, device="cpu")
    anchors, positives, negatives = (encoder.encode([row[side] for row in ROWS]) for side in
                                     ("anchor", "positive", "negative"))
    cosine = torch.nn.functional.cosine_similarity
    expected = 100 * (cosine(anchors, positives) > cosine(anchors, negatives)).double().mean().item()
    assert (result.kind, result.units, result.unit_name) == ("triplets", 40, "triplets")
    assert result.metrics["accuracy"] == pytest.approx(expected)
    low, high = result.intervals["accuracy"]
    assert low <= result.metrics["accuracy"] <= high and high - low > 0


def test_eval_scores_it_and_a_file_of_no_type_lists_its_layout(triplets: Path, tiny_model_dir: Path,
                                                              tmp_path: Path) -> None:
    result = run_cli("eval", str(tiny_model_dir), "--pairs", str(triplets), "--bootstrap", "100")
    assert result.exit_code == 0, result.output
    assert "triplets" in result.stdout and "accuracy" in result.stdout
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"left": "a", "right": "b"}) + "\n")
    with pytest.raises(DataError, match=r'expected triplets: JSON Lines \{"anchor": \.\.\., "positive": \.\.\., '
                                        r'"negative": \.\.\.\} \| reranking: '):
        detect_task_type(other)
