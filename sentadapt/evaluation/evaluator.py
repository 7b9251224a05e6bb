"""The Evaluator: a fixed set of tasks (any types) scored for one encoder at a time, with bootstrap CIs.

The same object serves `sentadapt eval` and training's dev checks (the loop calls it and reads
`.average`), so a dev number during `adapt` equals the `eval` number. Every unique text across the
tasks is encoded once per call and prompt (queries and documents may get different prompts, see
sentadapt/model/prompts.py); reports keep per-unit outputs (not embeddings), from which intervals and the
paired Δ between two models (or the base model and the best checkpoint) are computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sentadapt.errors import ConfigError
from sentadapt.evaluation import STS_AGGREGATE, bootstrap, variance
from sentadapt.evaluation.contract import EmbeddingTable, EvalTask, TaskResult
from sentadapt.evaluation.evidence import Evidence, weigh
from sentadapt.evaluation.forms import VectorForm
from sentadapt.events import Note, quiet
from sentadapt.model.prompts import PromptChoice
from sentadapt.options import ENCODE_BATCH_SIZE, TEST_SPLIT, VECTOR_DTYPE


@dataclass
class Delta:
    """Difference of a metric between two models with its paired-bootstrap interval (None when off)."""

    value: float
    interval: tuple[float, float] | None

    @property
    def significant(self) -> bool:
        return self.interval is not None and bootstrap.excludes_zero(self.interval)

    def to_dict(self) -> dict[str, Any]:
        return {"delta": self.value, "ci": list(self.interval) if self.interval else None,
                "ci_excludes_0": self.significant}

    def __str__(self) -> str:
        """"+0.52 [-0.10, +1.20]", as the tables print it (a * when the interval excludes 0)."""
        if self.interval is None:
            return f"{self.value:+.2f}"
        return f"{self.value:+.2f} [{self.interval[0]:+.2f}, {self.interval[1]:+.2f}]" + (" *" if self.significant
                                                                                          else "")


@dataclass
class EvalReport:
    model: str
    pooling: str
    split: str
    title: str
    tasks: list[TaskResult]
    metric: str | None  # the metric averaged (None: each task's main metric)
    seconds: float = 0.0
    average_interval: tuple[float, float] | None = None
    aggregate: str = STS_AGGREGATE
    prompts: dict[str, str] = field(default_factory=dict)  # side → the prompt its texts got (non-empty only)

    def selected(self, result: TaskResult) -> str:
        return self.metric or result.main_metric

    @property
    def average(self) -> float:
        """Mean over tasks of the selected metric — the number training selects checkpoints on."""
        values = [result.metrics[self.selected(result)] for result in self.tasks]
        return float(np.mean(values)) if values else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "pooling": self.pooling, "split": self.split, "title": self.title,
            "aggregate": self.aggregate, "seconds": round(self.seconds, 3), "metric": self.metric,
            "average": self.average, "average_ci": list(self.average_interval) if self.average_interval else None,
            # the metric values also at the task's top level ("spearman": ...), as before per-type reports
            "tasks": {t.task: {**t.metrics, **t.to_dict()} for t in self.tasks},
            **({"prompts": self.prompts} if self.prompts else {}),
        }


@dataclass
class Comparison:
    """Δ of `other` against `first`, per task and metric, and of the average."""

    tasks: dict[str, dict[str, Delta]] = field(default_factory=dict)
    average: Delta | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": {task: {m: d.to_dict() for m, d in metrics.items()} for task, metrics in self.tasks.items()},
                "average": self.average.to_dict() if self.average else None}


class Evaluator:
    """Scores an encoder on fixed tasks; see the module docstring."""

    def __init__(self, tasks: Sequence[EvalTask], split: str = TEST_SPLIT, title: str | None = None,
                 metric: str | None = None, resamples: int = bootstrap.DEFAULT_RESAMPLES,
                 seed: int = bootstrap.DEFAULT_SEED, cache_embeddings: bool = False) -> None:
        if not tasks:
            raise ConfigError("no evaluation tasks given")
        names = [task.name for task in tasks]
        if len(set(names)) != len(names):
            raise ConfigError(f"two evaluation tasks share a name ({', '.join(names)}); rename one of the files")
        if metric is not None:
            for task in tasks:
                if metric not in task.metric_names:
                    raise ConfigError(f"metric '{metric}' is not reported for {task.name} ({task.title}); "
                                      f"choose one of {', '.join(task.metric_names)}")
        if resamples < 0:
            raise ConfigError(f"--bootstrap: {resamples} resamples; give 0 (off) or a positive number")
        self.tasks = list(tasks)
        self.split = split
        self.title = title or ", ".join(f"{t.name} — {t.title}" for t in self.tasks)
        self.metric = metric
        self.resamples = resamples
        self.seed = seed
        self.cache_embeddings = cache_embeddings
        # Each unique text once, across every task (STS 7 test sets: 37,700 sentences → 26,126 unique).
        self.sentences = list(dict.fromkeys(text for task in self.tasks for text in task.texts()))
        # ... and once per prompt when the sides (queries, documents, pairs) get different prompts
        self.side_names = list(dict.fromkeys(side for task in self.tasks for side, _ in task.sided_texts()))
        self._groups: tuple[tuple[tuple[str, str], ...], dict[str, list[str]]] | None = None  # the last grouping

    def prompt_groups(self, encoder: Any, choice: PromptChoice | None = None,
                      ) -> tuple[dict[str, str], dict[str, list[str]]]:
        """(side → the prompt `encoder` gives it, "" for none; prompt → the unique texts encoded with it). With one
        prompt for every side, the only group is `self.sentences` in its order (a model without prompts encodes
        exactly what it did before prompts existed)."""
        choice = choice or PromptChoice()
        prompts = {side: encoder.prompts.for_side(side, choice.of(side), encoder.name) for side in self.side_names}
        if len(set(prompts.values())) <= 1:
            return prompts, {prompt: self.sentences for prompt in set(prompts.values())}
        key = tuple(prompts.items())
        if self._groups is None or self._groups[0] != key:
            groups: dict[str, dict[str, None]] = {}
            for task in self.tasks:
                for side, texts in task.sided_texts():
                    groups.setdefault(prompts[side], {}).update(dict.fromkeys(texts))
            self._groups = key, {prompt: list(texts) for prompt, texts in groups.items()}
        return prompts, self._groups[1]

    def encodings(self, encoder: Any, choice: PromptChoice | None = None) -> int:
        """How many texts a call encodes (a progress bar's total): each unique (prompt, text) once."""
        return sum(len(texts) for texts in self.prompt_groups(encoder, choice)[1].values())

    def __call__(
        self,
        encoder: object,
        batch_size: int = ENCODE_BATCH_SIZE,
        max_length: int | None = None,
        dtype: str = VECTOR_DTYPE,
        pooling: object | None = None,
        progress: Callable[[int], None] | None = None,
        note: Note = quiet,
        intervals: bool = True,
        prompts: PromptChoice | None = None,
    ) -> EvalReport:
        """Embed every unique (prompt, text) once, score each task; `intervals=False` skips the bootstrap
        (training's periodic dev checks only need `.average`; their per-unit outputs are kept for the final paired
        Δ). `prompts`: which prompt each side gets (None: the model's defaults, as training's dev checks use)."""
        started = time.perf_counter()
        side_prompts, table = self._encoded(encoder, batch_size, max_length, dtype, pooling, progress, note, prompts)
        results = [task.score(table) for task in self.tasks]
        del table
        pooling_name = pooling.name(encoder.num_layers) if pooling is not None else encoder.pooling_name  # type: ignore[attr-defined]
        report = self.report(results, encoder.name, pooling_name, time.perf_counter() - started,  # type: ignore[attr-defined]
                             intervals)
        report.prompts = {side: prompt for side, prompt in side_prompts.items() if prompt}
        return report

    def score_forms(self, encoder: Any, forms: Sequence[VectorForm], calibration: np.ndarray | None = None,
                    batch_size: int = ENCODE_BATCH_SIZE, max_length: int | None = None, dtype: str = VECTOR_DTYPE,
                    progress: Callable[[int], None] | None = None, note: Note = quiet,
                    prompts: PromptChoice | None = None) -> list[EvalReport]:
        """One report per form (evaluation/forms.py: a size and precision), from one encoding of every text.
        int8 ranges: from `calibration` (vectors of a calibration set) when given, else from the evaluated texts'
        vectors, as sentence-transformers' quantize_embeddings does without calibration embeddings."""
        from sentadapt.evaluation.forms import INT8, int8_ranges, scoring_vectors

        started = time.perf_counter()
        side_prompts, table = self._encoded(encoder, batch_size, max_length, dtype, None, progress, note, prompts)
        vectors = table.vectors.float().numpy()
        ranges = None
        if any(form.precision == INT8 for form in forms):
            ranges = int8_ranges(calibration if calibration is not None else vectors)
        seconds = time.perf_counter() - started
        reports = []
        for form in forms:
            formed = table.with_vectors(torch_tensor(scoring_vectors(form, vectors, ranges)))
            report = self.report([task.score(formed) for task in self.tasks], encoder.name, encoder.pooling_name,
                                 seconds)
            report.prompts = {side: prompt for side, prompt in side_prompts.items() if prompt}
            reports.append(report)
        return reports

    def _encoded(self, encoder: Any, batch_size: int, max_length: int | None, dtype: str, pooling: object | None,
                 progress: Callable[[int], None] | None, note: Note, prompts: PromptChoice | None,
                 ) -> tuple[dict[str, str], EmbeddingTable]:
        """Every unique (prompt, text) encoded once: (side → its prompt, the table of their vectors). `encoder`: an
        Encoder, or what a recipe's dev evaluations score (model/frozen_part.OnFrozenPart)."""
        side_prompts, groups = self.prompt_groups(encoder, prompts)
        blocks = {prompt: self._vectors(encoder, texts, prompt, batch_size, max_length, dtype, pooling, progress,
                                        note) for prompt, texts in groups.items()}
        return side_prompts, _table(side_prompts, groups, blocks)

    def score_vectors(self, lookup: Callable[[list[str]], Any], name: str) -> EvalReport:
        """Score vectors that already exist (a --teacher vectors file): `lookup(texts)` gives each text's vector,
        as an (N, D) array; no prompts, no intervals."""
        import torch

        texts = list(self.sentences)
        table = EmbeddingTable(texts, torch.as_tensor(np.asarray(lookup(texts), dtype=np.float32)))
        return self.report([task.score(table) for task in self.tasks], name, "vectors file", 0.0, False)

    def _vectors(self, encoder: Any, texts: list[str], prompt: str, batch_size: int, max_length: int | None,
                 dtype: str, pooling: object | None, progress: Callable[[int], None] | None,
                 note: Note) -> Any:
        if self.cache_embeddings and pooling is None:
            from sentadapt.model.embedding_cache import cached_vectors

            return cached_vectors(encoder, texts, batch_size, max_length, dtype, progress, note, prompt=prompt)
        return encoder.encode(texts, batch_size=batch_size, max_length=max_length, dtype=dtype, pooling=pooling,
                              progress=progress, prompt=prompt)

    def report(self, results: list[TaskResult], model: str, pooling: str, seconds: float = 0.0,
               intervals: bool = True) -> EvalReport:
        """Attach intervals (when bootstrapping) and wrap results into a report."""
        aggregate = next((t.aggregate for t in self.tasks if hasattr(t, "aggregate")), "all")
        report = EvalReport(model, pooling, self.split, self.title, results, self.metric, seconds,
                            aggregate=aggregate)
        if self.resamples and intervals:
            for task, result in zip(self.tasks, results):
                result.replicates = self.replicates(task, result)
                result.intervals = {name: bootstrap.interval(values) for name, values in result.replicates.items()}
            report.average_interval = bootstrap.interval(self.replicates_of(report))
        return report

    def influence(self, task: EvalTask, result: TaskResult) -> dict[str, np.ndarray]:
        """metric → each unit's (group's) influence ε, for the smooth metrics (evaluation/variance.py: the paired Δ's
        calibrated SE reads two models' values); computed once per result, when first asked for."""
        if result.influence is not None:
            return result.influence
        statistics = {name: statistic for name, statistic in task.resampled(result.outputs).items()
                      if name not in variance.NOT_SMOOTH}
        weights = task.weights
        if weights is not None:
            statistics = {name: bootstrap.weighted_by(statistic, weights) for name, statistic in statistics.items()}
        result.influence = variance.influence_values(task.units, statistics)
        return result.influence

    def metric_change_se(self, task: EvalTask, first: TaskResult, other: TaskResult, name: str) -> float | None:
        """The calibrated SE of one task's paired Δ of `name` (other − first); None where the metric has none (a
        best-threshold metric: the bootstrap's interval stays) or the statistic is undefined nearby."""
        if name in variance.NOT_SMOOTH:
            return None
        effects = self.influence(task, other)[name] - self.influence(task, first)[name]
        se = variance.influence_se(effects, task.units, task.inclusion)
        return se if np.isfinite(se) else None

    def change_se(self, first: EvalReport, other: EvalReport) -> float | None:
        """The calibrated SE of the averaged metric's paired Δ: the tasks are independent samples, so their
        variances add (÷ the number of tasks squared); None when one task has none."""
        ses = [self.metric_change_se(task, a, b, first.selected(a))
               for task, a, b in zip(self.tasks, first.tasks, other.tasks)]
        if any(se is None for se in ses):
            return None
        return float(np.sqrt(sum(se * se for se in ses if se is not None))) / len(ses)

    def _change_interval(self, value: float, se: float | None, replicates: np.ndarray,
                         confidence: float = bootstrap.CONFIDENCE) -> tuple[float, float]:
        """A paired Δ's interval: value ± z·SE with the calibrated SE, the bootstrap's percentiles without one."""
        if se is not None:
            return variance.normal_interval(value, se, confidence)
        return bootstrap.interval(replicates, confidence)

    def replicates(self, task: EvalTask, result: TaskResult, seed: int | None = None) -> dict[str, np.ndarray]:
        """metric → (resamples,) values; the task's seed is the same for every model (paired)."""
        task_seed = bootstrap.task_seed(task.name, self.seed if seed is None else seed)
        statistics = task.resampled(result.outputs)
        weights = task.weights
        if weights is not None:  # a chosen dev set: a unit drawn c times stands for c · weight pairs of the pool
            statistics = {name: bootstrap.weighted_by(statistic, weights) for name, statistic in statistics.items()}
        return bootstrap.replicate(task.units, self.resamples, task_seed, statistics)

    def replicates_of(self, report: EvalReport) -> np.ndarray:
        """The (B,) bootstrap replicates of a scored report's averaged metric (every model: the same resamples)."""
        return np.mean([result.replicates[report.selected(result)] for result in report.tasks], axis=0)

    def compare(self, first: EvalReport, other: EvalReport) -> Comparison:
        """Paired Δ (other − first) for every task and metric, and for the average."""
        comparison = Comparison()
        for task, a, b in zip(self.tasks, first.tasks, other.tasks):
            comparison.tasks[a.task] = {
                name: Delta(b.metrics[name] - a.metrics[name],
                            self._change_interval(b.metrics[name] - a.metrics[name],
                                                  self.metric_change_se(task, a, b, name),
                                                  b.replicates[name] - a.replicates[name])
                            if self.resamples else None)
                for name in task.metric_names
            }
        interval = None
        if self.resamples:
            interval = self._change_interval(other.average - first.average, self.change_se(first, other),
                                             self.replicates_of(other) - self.replicates_of(first))
        comparison.average = Delta(other.average - first.average, interval)
        return comparison

    def describe_metric(self) -> str:
        """What `.average` is, for metrics.json and the model card."""
        kinds = sorted({(task.title, self.metric or task.main_metric) for task in self.tasks})
        described = "; ".join(f"{metric} x100 ({title}, cosine)" for title, metric in kinds)
        return described + (f", mean of {len(self.tasks)} tasks" if len(self.tasks) > 1 else "")

    # ---------------------------------------------------------------- per-unit outputs kept by training
    @staticmethod
    def outputs_of(report: EvalReport) -> dict[str, dict[str, list[float]]]:
        """The report's per-unit outputs as JSON-able lists (what training keeps of the base and best models)."""
        return {result.task: {key: values.tolist() for key, values in result.outputs.items()}
                for result in report.tasks}

    def from_outputs(self, outputs: dict[str, dict[str, list[float]]], model: str = "") -> EvalReport:
        results = [task.result({key: np.asarray(values, dtype=np.float64)
                                for key, values in outputs[task.name].items()}) for task in self.tasks]
        return self.report(results, model, "")

    def compare_outputs(self, first: dict[str, dict[str, list[float]]],
                        other: dict[str, dict[str, list[float]]]) -> Delta:
        """Paired Δ of the averaged metric between two stored outputs (base model vs best checkpoint)."""
        a, b = self.from_outputs(first, "first"), self.from_outputs(other, "other")
        return self.compare(a, b).average  # type: ignore[return-value]

    def change_interval(self, first: dict[str, dict[str, list[float]]], other: dict[str, dict[str, list[float]]],
                        confidences: Sequence[float]) -> tuple[float, float, list[tuple[float, float]] | None]:
        """(other's average, its Δ over first, the Δ's paired interval at each confidence, or None when the
        bootstrap is off): decision/selection.py adjusts the confidence for several candidates."""
        a, b = self.from_outputs(first, "first"), self.from_outputs(other, "other")
        change = b.average - a.average
        if not self.resamples:
            return b.average, change, None
        replicates = self.replicates_of(b) - self.replicates_of(a)
        se = self.change_se(a, b)
        return b.average, change, [self._change_interval(change, se, replicates, level) for level in confidences]

    def change_replicates(self, first: dict[str, dict[str, list[float]]], other: dict[str, dict[str, list[float]]],
                          ) -> tuple[float, float, np.ndarray | None]:
        """(other's average, its Δ over first, the Δ's paired bootstrap replicates or None when off): the bootstrap
        alone (research/experiments/decision_study.py's power model reads their spread)."""
        a, b = self.from_outputs(first, "first"), self.from_outputs(other, "other")
        replicates = self.replicates_of(b) - self.replicates_of(a) if self.resamples else None
        return b.average, b.average - a.average, replicates

    def average_replicates(self, outputs: dict[str, dict[str, list[float]]]) -> tuple[float, np.ndarray | None]:
        """(the averaged metric, its (B,) bootstrap replicates or None when off) of stored outputs; every model
        gets the same resamples, so replicates of two models subtract into a paired Δ."""
        report = self.from_outputs(outputs)
        return report.average, self.replicates_of(report) if self.resamples else None

    def units(self) -> int:
        return sum(task.units for task in self.tasks)

    def row_keys(self) -> list[str] | None:
        """A short digest of each labelled row (its pair and label, not its weight: a round of the label-more loop
        reweighs the rows it keeps), sorted: the next look's labels hold the last look's keys
        (run/looks.py). None when a task type does not list its rows."""
        import hashlib

        rows = self._labelled_rows()
        return None if rows is None else sorted(hashlib.sha256("\x1f".join(row[:4]).encode()).hexdigest()[:16]
                                                for row in rows)

    def labels_digest(self) -> str | None:
        """The SHA-256 of every task's labelled rows (EvalTask.labelled_rows): the same labels in any file or
        format give the same digest; None when a task type does not list its rows."""
        import hashlib
        import json

        rows = self._labelled_rows()
        return None if rows is None else hashlib.sha256(json.dumps(sorted(rows)).encode()).hexdigest()

    def _labelled_rows(self) -> list[tuple[str, ...]] | None:
        """Every task's labelled rows together, None when a task type does not list them."""
        rows: list[tuple[str, ...]] = []
        for task in self.tasks:
            task_rows = task.labelled_rows()
            if task_rows is None:
                return None
            rows += task_rows
        return rows

    def unit_name(self) -> str:
        names = sorted({task.unit_name for task in self.tasks})
        return names[0] if len(names) == 1 else "units"



def torch_tensor(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(array)


def _table(side_prompts: dict[str, str], groups: dict[str, list[str]], blocks: dict[str, Any]) -> EmbeddingTable:
    """One matrix of every group's vectors; each side looks its texts up in its prompt's rows."""
    if len(groups) == 1:
        ((prompt, texts),) = groups.items()
        return EmbeddingTable(texts, blocks[prompt])
    import torch

    offsets, start = {}, 0
    for prompt, texts in groups.items():
        offsets[prompt], start = start, start + len(texts)
    side_rows = {side: {text: offsets[prompt] + row for row, text in enumerate(groups[prompt])}
                 for side, prompt in side_prompts.items()}
    return EmbeddingTable([], torch.cat([blocks[prompt] for prompt in groups]), side_rows)


def dev_evidence(evaluator: Evaluator | None, base: dict[str, Any] | None, options: Sequence[dict[str, Any]],
                 chosen: int) -> Evidence | None:
    """The dev set's selection-aware evidence that `options[chosen]` beats the base model (evaluation/evidence.py);
    `options` are every model evaluated on the dev set that the choice was made among. None without a dev set, a
    bootstrap or options."""
    if evaluator is None or base is None or not options or not evaluator.resamples:
        return None
    first = evaluator.from_outputs(base, "first")  # each model scored once: its replicates and its influence
    reports = [evaluator.from_outputs(outputs, "other") for outputs in options]
    return weigh(evaluator.replicates_of(first), [evaluator.replicates_of(report) for report in reports],
                 first.average, [report.average for report in reports], chosen, evaluator.units(),
                 evaluator.unit_name(), [evaluator.change_se(first, report) for report in reports])


def dev_change_record(evaluator: Evaluator | None, outputs: dict[str, Any]) -> dict[str, Any]:
    """metrics.json fields for training's base → best dev Δ: the metric, its paired-bootstrap CI, the settings."""
    if evaluator is None:
        return {"dev_metric": None, "dev_change_ci": None, "dev_change_ci_excludes_0": None, "bootstrap": None}
    delta = None
    if evaluator.resamples and "base" in outputs and "best" in outputs:
        delta = evaluator.compare_outputs(outputs["base"], outputs["best"])
    interval = list(delta.interval) if delta is not None and delta.interval is not None else None
    return {"dev_metric": evaluator.describe_metric(), "dev_change_ci": interval,
            "dev_change_ci_excludes_0": delta.significant if delta is not None else None,
            "bootstrap": {"resamples": evaluator.resamples, "seed": evaluator.seed,
                          "confidence": bootstrap.CONFIDENCE, "paired": True}}
