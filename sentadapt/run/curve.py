"""`adapt --plot`: the run's curve as RUN/curve.png, drawn from what the run folder records — the dev score at each
evaluation (metrics.json's history) with the paired 95 % CI of its Δ over the base model (dev_outputs.json's
per-pair outputs, as the decision reads them) drawn around it, the base's line, the published step marked; below, the
training loss (train.log). A run without a dev set gets the loss alone."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.diagnostics.plots import figure_with_axes, require_matplotlib
from sentadapt.storage.durable import replace_durably
from sentadapt.storage.run_folder import RunDir

if TYPE_CHECKING:
    from sentadapt.evaluation.evaluator import Evaluator

@dataclass
class Curve:
    """The figures behind the plot: each evaluated step's dev score and its band, the loss at each logged step."""

    metric: str = ""
    base: float | None = None
    steps: list[int] = field(default_factory=list)
    dev: list[float] = field(default_factory=list)
    bands: list[tuple[float, float] | None] = field(default_factory=list)  # base + the Δ's 95 % CI, per step
    published: int | None = None
    loss_steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


def read_curve(run: Path, evaluator: Evaluator | None) -> Curve:
    """The curve of the run in `run` (its metrics.json, dev_outputs.json and train.log); `evaluator` (the run's dev
    set) turns each evaluation's per-pair outputs into its Δ's interval."""
    folder = RunDir(run)
    metrics = json.loads(folder.metrics_file.read_text(encoding="utf-8"))
    curve = Curve(metric=str(metrics.get("dev_metric") or ""), base=metrics.get("base_score"),
                  published=metrics.get("published_step"))
    stored = _stored_outputs(folder)
    for point in metrics.get("history") or []:
        if point.get("step", 0) > 0 and point.get("dev") is not None:
            curve.steps.append(int(point["step"]))
            curve.dev.append(float(point["dev"]))
            curve.bands.append(_band(evaluator, stored, curve.base, int(point["step"])))
    for line in folder.train_log.read_text(encoding="utf-8").splitlines() if folder.train_log.is_file() else []:
        record = json.loads(line) if line.startswith("{") else {}
        if "loss" in record and record.get("step") is not None:
            curve.loss_steps.append(int(record["step"]))
            curve.losses.append(float(record["loss"]))
    return curve


def _stored_outputs(folder: RunDir) -> dict[str, Any]:
    path = folder.dev_outputs_file
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _band(evaluator: Evaluator | None, stored: dict[str, Any], base: float | None,
          step: int) -> tuple[float, float] | None:
    outputs = (stored.get("evaluations") or {}).get(str(step))
    if evaluator is None or base is None or outputs is None or "base" not in stored:
        return None
    delta = evaluator.compare_outputs(stored["base"], outputs)
    return None if delta.interval is None else (base + delta.interval[0], base + delta.interval[1])


def write_curve_plot(run: Path, evaluator: Evaluator | None) -> Path:
    """RUN/curve.png: the dev curve with its bands over the loss (the loss alone without a dev set)."""
    require_matplotlib()
    curve = read_curve(run, evaluator)
    rows = 2 if curve.steps else 1
    figure, axes = figure_with_axes(6.4, 2.4 + 2.4 * rows, rows=rows)
    axes = list(axes) if rows > 1 else [axes]
    if curve.steps:
        _dev_axis(axes[0], curve)
    loss = axes[-1]
    loss.plot(curve.loss_steps, curve.losses, "-", color="tab:gray", linewidth=1)
    loss.set(xlabel="step", ylabel="training loss", title="Training loss" if rows > 1 else "Training loss (no dev "
             "set: nothing measured against the base model)")
    loss.grid(alpha=0.3)
    path = RunDir(run).curve_file
    partial = path.with_name(f".{path.name}.partial")
    figure.savefig(partial, format="png", dpi=100, bbox_inches="tight")
    replace_durably(partial, path)  # a reader never sees half a picture
    return path


def _dev_axis(axis: Any, curve: Curve) -> None:
    if curve.base is not None:
        axis.axhline(curve.base, color="tab:orange", linestyle="--", linewidth=1, label=f"base {curve.base:.2f}")
    banded = [(step, band) for step, band in zip(curve.steps, curve.bands) if band is not None]
    if banded:
        axis.fill_between([step for step, _ in banded], [band[0] for _, band in banded],
                          [band[1] for _, band in banded], color="tab:blue", alpha=0.2,
                          label="base + the Δ's paired 95 % CI")
    axis.plot(curve.steps, curve.dev, "o-", color="tab:blue", markersize=3, label="dev")
    if curve.published in curve.steps:
        at = curve.steps.index(curve.published)
        axis.plot([curve.published], [curve.dev[at]], "*", color="tab:green", markersize=12,
                  label=f"published: step {curve.published}")
    axis.set(ylabel=curve.metric or "dev score", title="Dev score per evaluation")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
