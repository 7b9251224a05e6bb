"""A triplet task type written on the task-type contract alone: a test fixture (issue 85: a new eval task type touches
at most 3 files). Each line of a JSON Lines file is {"anchor", "positive", "negative"}; a triplet is right when the
anchor's cosine with the positive is above its cosine with the negative (sentence-transformers' TripletEvaluator's
accuracy), and the bootstrap resamples triplets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.pair_files import sniff_columns
from sentadapt.errors import DataError
from sentadapt.evaluation import weighted_stats
from sentadapt.evaluation.contract import EmbeddingTable, EvalTask, Outputs, cosine_scores
from sentadapt.options import TEST_SPLIT

SIDES = ("anchor", "positive", "negative")


class TripletTask(EvalTask):
    kind = "triplets"
    title = "triplets"
    metric_names = ("accuracy",)
    unit_name = "triplets"
    description = 'JSON Lines {"anchor": ..., "positive": ..., "negative": ...}'

    def __init__(self, name: str, source: str, rows: list[tuple[str, str, str]]) -> None:
        super().__init__(name, source)
        self.rows = rows

    @classmethod
    def sniff(cls, path: Path) -> bool:
        return set(SIDES) <= sniff_columns(path)

    @classmethod
    def read(cls, path: Path, split: str = TEST_SPLIT) -> TripletTask:
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            texts = tuple(record.get(key) for key in SIDES) if isinstance(record, dict) else ()
            if len(texts) != 3 or not all(isinstance(text, str) for text in texts):
                raise DataError(f"{path} line {number}: needs anchor, positive and negative texts")
            rows.append(texts)
        return cls(path.name, str(path), rows)

    @property
    def units(self) -> int:
        return len(self.rows)

    def texts(self) -> list[str]:
        return [text for row in self.rows for text in row]

    def outputs(self, table: EmbeddingTable) -> Outputs:
        anchors, positives, negatives = (table.of([row[side] for row in self.rows]) for side in range(3))
        right = cosine_scores(anchors, positives) > cosine_scores(anchors, negatives)
        return {"accuracy": right.astype(np.float64)}

    def metrics(self, outputs: Outputs) -> tuple[dict[str, float], dict[str, Any]]:
        return {"accuracy": 100 * float(np.mean(outputs["accuracy"]))}, {}

    def resampled(self, outputs: Outputs) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
        return {"accuracy": lambda counts: 100 * weighted_stats.weighted_mean(counts, outputs["accuracy"])}
