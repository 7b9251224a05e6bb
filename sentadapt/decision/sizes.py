"""The sizes decision: which size and precision of the adapted model keeps it at least as good as the base model's
whole vectors, on the dev set, at the run's risk.

A run trained with `--matryoshka` (or asked with `adapt --sizes`) scores its published model on the dev set at every
size × precision (evaluation/forms.py: fp32, int8 with ranges from the dev sentences, binary where the size packs
into bytes), from one encoding. Each row is weighed against the base model's whole float32 vectors on the same dev
units with the paired bootstrap the decision uses: its Δ, 95 % CI, and `risk` = the share of resamples in which the
row scores below the base. A row keeps the gain when its Δ ≥ 0 and its risk ≤ the run's `--risk` limit at its look.

Which row is named: **the rows are tested in a fixed order, the most bytes per vector first (a tie: the larger
size first), and the walk stops at the first row that does not keep the gain; the smallest is the last row that
kept it** (None when the whole vector does not). A fixed-sequence test: each row is tested at the full risk, yet
the chance of naming a row that is in truth below the base stays at the limit, because a row is reached only when
every larger one passed. The first rule (the smallest of all rows that kept the gain, each tested alone) tested 9
rows at 0.20 each and took the smallest that passed: on the suite's runs without a teacher, 4 of 13 and 5 of 12 of
the rows it named scored below the base on test (research/findings.md, "Sizes"). This rule was written from that
multiplicity argument before it was applied to the suite.

The table goes to metrics.json ("sizes") and the summary; the per-unit outputs behind it to dev_outputs.json
("sizes"), so it can be recomputed without the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sentadapt.evaluation import bootstrap
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.evaluation.forms import BINARY, FULL, INT8, VectorForm, resolved


@dataclass(frozen=True)
class SizeRow:
    form: dict[str, Any]  # dim, precision, bytes_per_vector
    score: float
    delta: float  # against the base's whole float32 vectors
    interval: tuple[float, float] | None
    risk: float | None  # the share of paired resamples with the row below the base
    keeps: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.form, "score": self.score, "delta_vs_base_full": self.delta,
                "ci": list(self.interval) if self.interval else None, "risk": self.risk, "keeps_gain": self.keeps}


@dataclass(frozen=True)
class SizeTable:
    rows: list[SizeRow]
    smallest: int | None  # the index of the smallest row that keeps the gain
    risk_limit: float
    base_score: float
    int8_ranges: str = "ranges from the dev sentences"

    def to_dict(self) -> dict[str, Any]:
        smallest = self.rows[self.smallest].form if self.smallest is not None else None
        return {"rule": f"keeps: Δ ≥ 0 and risk (the share of resamples below the base) ≤ {self.risk_limit:g}; named: "
                        "the rows tested from the most bytes per vector down, the last that keeps before the first "
                        "that does not",
                "base_full_score": self.base_score, "int8": self.int8_ranges,
                "smallest": smallest, "rows": [row.to_dict() for row in self.rows]}


def decision_forms(sizes: Sequence[int], width: int) -> list[VectorForm]:
    """The whole vector first, then every asked size × fp32 and int8, and binary where the size packs into bytes."""
    sizes = [size for size in sizes if size <= width] or [width]
    forms = [VectorForm(size, precision) for size in sizes for precision in (FULL, INT8)]
    forms += [VectorForm(size, BINARY) for size in sizes if size % 8 == 0]
    return resolved([VectorForm(), *forms], width, "the model")


def size_table(evaluator: Evaluator, base_outputs: dict[str, Any], form_outputs: Sequence[dict[str, Any]],
               forms: Sequence[VectorForm], width: int, risk_limit: float) -> SizeTable:
    """Weigh each form's dev outputs against the base's whole-vector outputs, and name the smallest that keeps."""
    base_score, base_replicates = evaluator.average_replicates(base_outputs)
    rows = []
    for form, outputs in zip(forms, form_outputs, strict=True):
        score, replicates = evaluator.average_replicates(outputs)
        delta = score - base_score
        interval = risk = None
        if replicates is not None and base_replicates is not None:
            change = replicates - base_replicates
            interval = bootstrap.interval(change)
            risk = float(np.mean(change < 0))
        keeps = delta >= 0 and (risk is None or risk <= risk_limit)
        rows.append(SizeRow(form.to_dict(width), score, delta, interval, risk, keeps))
    return SizeTable(rows, named_in_sequence(rows), risk_limit, base_score)


def walk_order(forms: Sequence[Mapping[str, Any]]) -> list[int]:
    """The fixed sequence's order of the rows' forms: by bytes per vector, then size, both descending."""
    return sorted(range(len(forms)), key=lambda i: (-forms[i]["bytes_per_vector"], -forms[i]["dim"]))


def named_in_sequence(rows: Sequence[SizeRow]) -> int | None:
    """The fixed-sequence walk of the module docstring: rows by bytes per vector, then size, both descending; the
    index of the last row that keeps the gain before the first that does not."""
    order = walk_order([row.form for row in rows])
    named = None
    for index in order:
        if not rows[index].keeps:
            break
        named = index
    return named
