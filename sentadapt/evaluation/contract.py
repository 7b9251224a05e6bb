"""The task-type contract and its registry: one module per task type registers itself here by name.

A *task type* (a class registered in TASK_TYPES) knows how to recognise and read its files and which
metrics it reports. A *task* (an instance) holds one data set: it lists the texts to embed, turns the
embeddings into per-unit outputs (a cosine per pair, a metric value per query), computes its metrics
from those outputs, and recomputes them under bootstrap resamples of its units. Outputs, not
embeddings, are what a report keeps, so training can compare the base model with its best
checkpoint long after both are gone.

No torch at import time: `adapt` validates --dev (type detection, metric names) before torch loads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from sentadapt.model.prompts import PAIR
from sentadapt.options import TEST_SPLIT
from sentadapt.registry import Registry

if TYPE_CHECKING:
    import torch

Outputs = dict[str, np.ndarray]  # per-unit arrays, all of length `units`


def cosine_scores(left: torch.Tensor, right: torch.Tensor) -> np.ndarray:
    """Row-wise cosine in float64 of two (n, d) tensors → (n,) numpy: the dot product over the two norms (each at
    least 1e-8, as torch's cosine_similarity), so two pairs of equal dot products and norms get the same bits. Binary
    vectors (±1, evaluation/forms.py) rely on it: their dot products and norms are exact, and a cosine computed from
    normalised vectors would split their ties by one ulp, which a rank correlation then counts."""

    left, right = left.double(), right.double()
    norms = left.norm(dim=-1).clamp_min(1e-8) * right.norm(dim=-1).clamp_min(1e-8)
    return ((left * right).sum(dim=-1) / norms).numpy()


class EmbeddingTable:
    """Vectors of unique texts (rows of one float32 matrix) looked up by text, and by side when the sides of a task
    (queries, documents) were encoded with different prompts: `side_rows[side][text]` is then the row."""

    def __init__(self, texts: list[str], vectors: torch.Tensor,
                 side_rows: dict[str, dict[str, int]] | None = None) -> None:
        self.row_of = {text: row for row, text in enumerate(texts)}
        self.vectors = vectors
        self.side_rows = side_rows or {}

    def with_vectors(self, vectors: torch.Tensor) -> EmbeddingTable:
        """The same texts and rows with other vectors of them (a size or precision of these: evaluation/forms.py)."""
        table = EmbeddingTable([], vectors, self.side_rows)
        table.row_of = self.row_of
        return table

    def rows(self, texts: list[str], side: str = PAIR) -> np.ndarray:
        row_of = self.side_rows.get(side, self.row_of)
        return np.fromiter((row_of[text] for text in texts), dtype=np.int64, count=len(texts))

    def of(self, texts: list[str], side: str = PAIR) -> torch.Tensor:
        """Rows of `texts` (as encoded for `side`); a view (no copy) when they are consecutive rows, e.g. a corpus of
        unique documents."""
        import torch

        rows = self.rows(texts, side)
        if len(rows) > 1 and rows[-1] - rows[0] == len(rows) - 1 and np.all(np.diff(rows) == 1):
            return self.vectors[int(rows[0]):int(rows[-1]) + 1]
        return self.vectors[torch.from_numpy(rows)]


@dataclass
class TaskResult:
    """One task scored for one model: metrics × 100 (thresholds as raw cosines), per-unit outputs, intervals."""

    task: str  # display name
    kind: str  # task type name
    main_metric: str
    metrics: dict[str, float]
    units: int
    unit_name: str
    source: str
    outputs: Outputs = field(repr=False, default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    replicates: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    # metric → each unit's influence on it (evaluation/variance.py): the calibrated SE's input, computed when a
    # paired Δ first needs it (None until then: a lone model's scores never do)
    influence: dict[str, np.ndarray] | None = field(repr=False, default=None)
    extras: dict[str, Any] = field(default_factory=dict)  # thresholds, per-subset scores, options

    @property
    def main(self) -> float:
        return self.metrics[self.main_metric]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": self.kind, "main_metric": self.main_metric, "main": self.main, "metrics": self.metrics,
            "ci": {name: list(bounds) for name, bounds in self.intervals.items()},
            "units": self.units, "unit": self.unit_name, "source": self.source,
        }
        data.update(self.extras)
        return data


class EvalTask(ABC):
    """One data set of one task type (see the module docstring)."""

    kind: ClassVar[str]
    title: ClassVar[str]  # e.g. "pair classification"
    metric_names: ClassVar[tuple[str, ...]]  # main metric first; all carry bootstrap intervals
    unit_name: ClassVar[str]  # "pairs" | "queries"
    description: ClassVar[str]  # the file layout, for errors and --help
    # Detection (evaluation/task_types.detect_task_type) sniffs the types in this order, lowest first: the most
    # specific layouts before the general ones (a reranking row has "query"; 0/1 labels before graded scores). A
    # new layout is specific by nature: 0.
    detection_rank: ClassVar[int] = 0
    reads_folders: ClassVar[bool] = False  # its data is a folder (BEIR), not a file

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.main_metric = self.metric_names[0]

    @classmethod
    @abstractmethod
    def sniff(cls, path: Path) -> bool:
        """Cheap check (header / first record / folder layout): is this file of this type?"""

    @classmethod
    @abstractmethod
    def read(cls, path: Path, split: str = TEST_SPLIT) -> EvalTask:
        """Read and validate the whole file; a DataError names the file and line (or id)."""

    @property
    @abstractmethod
    def units(self) -> int: ...

    @abstractmethod
    def texts(self) -> list[str]:
        """Every text the task needs embedded (duplicates allowed: the evaluator de-duplicates)."""

    def labelled_rows(self) -> list[tuple[str, ...]] | None:
        """The task's labelled units as rows of text, sorted, whatever file or format they came in: what a decision
        is keyed on (the same labels in a .parquet, reordered or with a blank line are the same labels). None: a
        task type that does not say (its file's bytes key it)."""
        return None

    @property
    def weights(self) -> np.ndarray | None:
        """Design weights of the units (a chosen dev set: pairs/design.py), or None when every unit counts
        alike. The metrics and every bootstrap resample then count unit i weights[i] times."""
        return None

    @property
    def inclusion(self) -> np.ndarray | None:
        """Each unit's inclusion probability when its weight is a design's (1/π: `pairs --run/--teacher`), for the
        variance's finite-population factor (evaluation/variance.py); None: drawn from a large population."""
        return None

    def sided_texts(self) -> list[tuple[str, list[str]]]:
        """`texts()` in the same order, split by side (sentadapt.model.prompts: PAIR, QUERY, DOCUMENT): which prompt the
        evaluator encodes them with. Pair tasks: one side for both sentences."""
        return [(PAIR, self.texts())]

    @abstractmethod
    def outputs(self, table: EmbeddingTable) -> Outputs:
        """Embeddings → per-unit outputs (cosines, per-query metric values)."""

    @abstractmethod
    def metrics(self, outputs: Outputs) -> tuple[dict[str, float], dict[str, Any]]:
        """Outputs → (metrics × 100, extras such as thresholds)."""

    @abstractmethod
    def resampled(self, outputs: Outputs) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
        """metric → function of a (B, units) count block giving the metric (× 100) on each resample."""

    def score(self, table: EmbeddingTable) -> TaskResult:
        outputs = self.outputs(table)
        return self.result(outputs)

    def result(self, outputs: Outputs) -> TaskResult:
        metrics, extras = self.metrics(outputs)
        return TaskResult(self.name, self.kind, self.main_metric, metrics, self.units, self.unit_name,
                          self.source, outputs, extras=extras)


class SentencePairs(Protocol):
    sentence1: list[str]
    sentence2: list[str]
    weights: list[float]
    design: bool


class CosinePairTask(EvalTask):
    """A task over sentence pairs whose per-pair output is the cosine of the two embeddings (STS scores,
    pair classification): the units are the pairs, and subclasses differ only in their gold and metrics."""

    unit_name = "pairs"
    pairs: SentencePairs
    gold: np.ndarray  # each pair's gold score or label

    @property
    def units(self) -> int:
        return len(self.pairs.sentence1)

    @property
    def weights(self) -> np.ndarray | None:
        return np.asarray(self.pairs.weights, dtype=np.float64) if self.pairs.weights else None

    @property
    def inclusion(self) -> np.ndarray | None:
        weights = self.weights
        if weights is None or not getattr(self.pairs, "design", False):
            return None
        return np.minimum(1.0, 1.0 / weights)

    def texts(self) -> list[str]:
        return [*self.pairs.sentence1, *self.pairs.sentence2]

    def labelled_rows(self) -> list[tuple[str, ...]]:
        # float() then repr: '4', '4.0' and a Parquet 4.0 are one label; no weight column reads as weight 1
        weights = self.pairs.weights or [1.0] * self.units
        return sorted((self.kind, first, second, repr(float(gold)), repr(float(weight))) for first, second, gold, weight
                      in zip(self.pairs.sentence1, self.pairs.sentence2, self.gold.tolist(), weights, strict=True))

    def outputs(self, table: EmbeddingTable) -> Outputs:
        return {"cosine": cosine_scores(table.of(self.pairs.sentence1), table.of(self.pairs.sentence2))}


TASK_TYPES: Registry[type[EvalTask]] = Registry("task type")
