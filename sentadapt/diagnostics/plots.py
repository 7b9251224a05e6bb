"""PNG plots of a diagnosis (one or two models): matplotlib is an optional extra, imported only here and lazily.

Figures are built with `matplotlib.figure.Figure` and the Agg canvas, never pyplot, so no global backend or
figure state is touched (safe on headless machines and inside other programs).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError
from sentadapt.text_tables import short_names

if TYPE_CHECKING:
    from sentadapt.diagnostics.report import Diagnosis

INSTALL_HINT = "--plot needs matplotlib: pip install 'sentadapt[plot]'"
COLORS = ("tab:blue", "tab:orange")
SPECTRUM_SHOWN = 50
NUMERICAL_ZERO = 1e-9


def require_matplotlib() -> ModuleType:
    """The matplotlib module, or a one-line ConfigError saying how to install it."""
    try:
        import matplotlib
        from matplotlib.backends import backend_agg  # noqa: F401  (the canvas every figure here renders with)
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return matplotlib


def write_plots(diagnoses: list[Diagnosis], folder: Path) -> list[Path]:
    """Write every plot the diagnoses have data for into `folder`; returns the files written."""
    require_matplotlib()
    folder.mkdir(parents=True, exist_ok=True)
    drawers = {
        "anisotropy.png": (_anisotropy, "anisotropy"),
        "spectrum.png": (_spectrum, "spectrum"),
        "frequency.png": (_frequency, "frequency"),
        "topk.png": (_topk, "topk"),
        "layers.png": (_layers, "layers"),
    }
    written = []
    for filename, (draw, report) in drawers.items():
        if all(getattr(d, report) for d in diagnoses):
            figure = draw(diagnoses)
            figure.savefig(folder / filename, dpi=100, bbox_inches="tight")
            written.append(folder / filename)
    return written


def figure_with_axes(width: float = 6.4, height: float = 4.0, columns: int = 1, rows: int = 1) -> tuple[Any, Any]:
    """A figure on the Agg canvas (no pyplot) and its axes: one, or a row (`columns`) or a column (`rows`) of them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")  # titles, legends and colorbars never overlap
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False, sharex=rows > 1)
    flat = axes[:, 0] if rows > 1 else axes[0]
    return figure, flat if rows > 1 or columns > 1 else flat[0]


def _label(diagnosis: Diagnosis, diagnoses: list[Diagnosis]) -> str:
    """The model's name by the tables' one rule (text_tables.short_names): the plots name a model as they do."""
    return short_names([d.model for d in diagnoses])[diagnosis.model]


def _anisotropy(diagnoses: list[Diagnosis]) -> Any:
    figure, axis = figure_with_axes()
    for color, diagnosis in zip(COLORS, diagnoses):
        data = diagnosis.anisotropy or {}
        layers = range(len(data["sentence_cosine_per_layer"]))
        axis.plot(layers, data["sentence_cosine_per_layer"], "o-", color=color,
                  label=f"{_label(diagnosis, diagnoses)}: sentences (mean pooling)")
        axis.plot(layers, data["token_cosine_per_layer"], "s--", color=color,
                  label=f"{_label(diagnosis, diagnoses)}: tokens of different sentences")
    axis.set(xlabel="layer (0 = embedding layer)", ylabel="mean cosine of random pairs",
             title="Anisotropy per layer (0 = isotropic, 1 = collapsed)", ylim=(min(0.0, axis.get_ylim()[0]), 1.03))
    axis.xaxis.get_major_locator().set_params(integer=True)
    axis.grid(alpha=0.3)
    figure.legend(fontsize=7, loc="outside lower center", ncol=2)  # below the axes: lines fill the plot area
    return figure


def _spectrum(diagnoses: list[Diagnosis]) -> Any:
    figure, axis = figure_with_axes()
    for color, diagnosis in zip(COLORS, diagnoses):
        data = diagnosis.spectrum or {}
        # centring removes one direction (rank ≤ min(N − 1, D)): drop numerical zeros, they would squash the axis
        shares = [share for share in data["variance_shares"][:SPECTRUM_SHOWN] if share > NUMERICAL_ZERO]
        axis.semilogy(range(1, len(shares) + 1), shares, "o-", markersize=3, color=color,
                      label=f"{_label(diagnosis, diagnoses)}: top-1 {data['top1_share']:.1%}, "
                            f"effective rank {data['effective_rank']:.0f}")
    axis.set(xlabel="principal direction", ylabel="share of variance (log)",
             title="Spectrum of the centred sentence embeddings")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=7)
    return figure


def _frequency(diagnoses: list[Diagnosis]) -> Any:
    figure, axes = figure_with_axes(9.0, 3.6, columns=2)
    width = 0.8 / len(diagnoses)
    for index, (color, diagnosis) in enumerate(zip(COLORS, diagnoses)):
        buckets = (diagnosis.frequency or {})["buckets"]
        positions = [i + (index - (len(diagnoses) - 1) / 2) * width for i in range(len(buckets))]
        for axis, key in zip(axes, ("mean_norm", "mean_knn_distance")):
            axis.bar(positions, [b[key] for b in buckets], width, color=color, label=_label(diagnosis, diagnoses))
    first = (diagnoses[0].frequency or {})["buckets"]  # labels of the first model, as in the terminal table
    for axis in axes:
        axis.set_xticks(range(len(first)), [b["ranks"] for b in first], fontsize=7)
    axes[0].set(xlabel="frequency rank (1 = most frequent)", ylabel="mean L2 norm", title="Token-embedding norm")
    axes[1].set(xlabel="frequency rank (1 = most frequent)", ylabel="mean distance",
                title="Distance to 3 nearest tokens")
    axes[0].legend(fontsize=7)
    return figure


def _topk(diagnoses: list[Diagnosis]) -> Any:
    figure, axis = figure_with_axes()
    for color, diagnosis in zip(COLORS, diagnoses):
        data = diagnosis.topk or {}
        curve = data["curves"][data["headline"]]
        axis.plot(data["k"], curve, "-", color=color, label=f"{_label(diagnosis, diagnoses)} ({data['headline']})")
        axis.plot([data["best_k"]], [data["best"]], "*", color=color, markersize=12)
    axis.set(xlabel="top-k most frequent tokens removed from mean pooling ([CLS], [SEP] counted)",
             ylabel="Spearman × 100", title="Frequent-token removal (ConSERT Fig. 4); ★ = best k")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    return figure


def _layers(diagnoses: list[Diagnosis]) -> Any:
    figure, axes = figure_with_axes(4.2 * len(diagnoses), 5.0, columns=len(diagnoses))
    axes = axes if len(diagnoses) > 1 else [axes]
    grids = [(d.layers or {})["grid"] for d in diagnoses]
    finite = [v for grid in grids for row in grid for v in row if v is not None and not math.isnan(v)]
    low, high = min(finite), max(finite)
    for axis, diagnosis, grid in zip(axes, diagnoses, grids):
        data = diagnosis.layers or {}
        values = [[math.nan if v is None else v for v in row] for row in grid]
        image = axis.imshow(values, cmap="viridis", vmin=low, vmax=high, aspect="auto", origin="lower")
        poolings = data["token_poolings"]
        axis.set_xticks(range(len(poolings)), poolings)
        axis.set_yticks(range(len(values)))
        best = data["best"]["pooling"]
        for layer, row in enumerate(values):
            for column, value in enumerate(row):
                is_best = best == f"{poolings[column]}@{layer}"
                text = "—" if math.isnan(value) else f"{value:.1f}"
                axis.text(column, layer, text, ha="center", va="center", fontsize=8,
                          color="red" if is_best else "black" if math.isnan(value) else "white",
                          fontweight="bold" if is_best else "normal")
        named = data["named"]
        axis.set(xlabel="pooling", ylabel="layer (0 = embedding layer)")
        axis.set_title(f"{_label(diagnosis, diagnoses)}\nbest {best}: {data['best']['spearman']:.2f}\n"
                       f"last2avg {named['last2avg']:.1f}, firstlast {named['firstlast']:.1f}", fontsize=9)
    figure.colorbar(image, ax=list(axes), label=f"Spearman × 100 ({(diagnoses[0].layers or {})['source']})")
    figure.suptitle("Layer × pooling (SG-OPT Fig. 1)")
    return figure
