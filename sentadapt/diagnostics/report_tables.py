"""`diagnose`'s result as tables (sentadapt.text_tables) and verdict lines: a column per model (and Δ, good or bad, when
comparing two), the headline figures, then one table per report. `DiagnoseResult.tables()` returns them; the CLI
draws them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sentadapt.diagnostics import LAYER_MIXES
from sentadapt.text_tables import BAD, BEST, GOOD, Cell, TextTable, short_names, shorten_name

if TYPE_CHECKING:
    from sentadapt.diagnostics.report import Diagnosis

SPARK = "▁▂▃▄▅▆▇█"
BAR_WIDTH = 20
TOPK_SHOWN = (0, 1, 2, 3, 5, 10, 20, 30, 40, 50, 75, 100)
SPECTRUM_SHOWN = 40  # directions in the spectrum's sparkline
SPARK_NAME = 24  # a model's name beside its sparkline: 2 + 24 + 2 + 40 = 68 of 80 columns
CURVE_POINTS_COMPARED = 24  # two top-k curves side by side: a 51-point sparkline each would wrap at 80 columns

FIGURE_LABELS = {  # headline key → (label, format, better: "low" | "high" | "")
    "sentence_cosine": ("random sentence pairs, mean cosine", "{:.3f}", "low"),
    "token_cosine_last_layer": ("random token pairs (last layer), mean cosine", "{:.3f}", "low"),
    "isotropy": ("isotropy I(W) (1 = isotropic, floor 0.14)", "{:.3f}", "high"),
    "top1_share": ("top-1 direction, share of variance", "{:.3f}", "low"),
    "top10_share": ("top-10 directions, share of variance", "{:.3f}", "low"),
    "effective_rank": ("effective rank", "{:.1f}", "high"),
    "alignment": ("alignment (positives, lower = closer)", "{:.3f}", "low"),
    "uniformity": ("uniformity (lower = more spread)", "{:.3f}", "low"),
    "frequency_rank_norm_spearman": ("frequency bias: Spearman(rank, norm)", "{:.3f}", "low"),
    "topk_k0": ("top-k: score with no token removed", "{:.2f}", "high"),
    "topk_best_k": ("top-k: best k", "{:.0f}", ""),
    "topk_best": ("top-k: best score", "{:.2f}", "high"),
    "topk_gain": ("top-k: gain of the best k", "{:+.2f}", "low"),
    "layers_best": ("layers: best layer × pooling", "{:.2f}", "high"),
    "layers_model_pooling": ("layers: the model's own pooling", "{:.2f}", "high"),
}



def report_tables(diagnoses: list[Diagnosis]) -> dict[str, TextTable]:
    """The tables after the summary, by report, in order: anisotropy (per layer), frequency, topk, layers (each
    when its report ran)."""
    first = diagnoses[0]
    builders = {"anisotropy": (first.anisotropy, anisotropy_table), "frequency": (first.frequency, frequency_table),
                "topk": (first.topk, topk_table), "layers": (first.layers, layers_table)}
    return {name: build(diagnoses) for name, (ran, build) in builders.items() if ran}


def spectrum_lines(diagnoses: list[Diagnosis]) -> list[str]:
    if not diagnoses[0].spectrum:
        return []
    sparks = [sparkline((d.spectrum or {}).get("variance_shares", [])[:SPECTRUM_SHOWN]) for d in diagnoses]
    if len(diagnoses) == 1:
        return [f"spectrum, top {SPECTRUM_SHOWN} directions: {sparks[0]}"]
    names = [shorten_name(_short(d, diagnoses), SPARK_NAME) for d in diagnoses]  # 2 + 24 + 2 + 40 ≤ 80 columns
    width = max(len(name) for name in names)
    return [f"spectrum, top {SPECTRUM_SHOWN} directions:"] + [f"  {name:<{width}}  {spark}"
                                                              for name, spark in zip(names, sparks)]


def summary_table(diagnoses: list[Diagnosis]) -> TextTable:
    table = TextTable("Diagnosis")
    table.column("figure")
    _model_columns(table, diagnoses)
    headlines = [d.headline() for d in diagnoses]
    for key, (label, fmt, better) in FIGURE_LABELS.items():
        if key in headlines[0]:
            table.row(label, *_cells([h.get(key) for h in headlines], fmt, better))
    return table


def anisotropy_table(diagnoses: list[Diagnosis]) -> TextTable:
    table = TextTable("Random-pair cosine per layer (0 = embedding layer; 0 isotropic … 1 collapsed)")
    table.column("layer", right=True)
    for label in ("sentences", "tokens"):
        _model_columns(table, diagnoses, prefix=label)
        if len(diagnoses) == 1:
            table.column("")
    series = [(d.anisotropy or {}) for d in diagnoses]
    for layer in range(max(len(s["sentence_cosine_per_layer"]) for s in series)):
        cells: list[str | Cell] = [str(layer)]
        for key in ("sentence_cosine_per_layer", "token_cosine_per_layer"):
            values = [s[key][layer] if layer < len(s[key]) else None for s in series]
            cells += _cells(values, "{:.3f}", "low")
            if len(diagnoses) == 1:
                cells.append(bar(values[0]))
        table.row(*cells)
    return table


def frequency_table(diagnoses: list[Diagnosis]) -> TextTable:
    table = TextTable("Token-embedding norm by frequency rank (BERT-flow: frequent tokens near the origin)")
    table.column("ranks")
    _model_columns(table, diagnoses, prefix="norm")
    _model_columns(table, diagnoses, prefix="3-NN dist.")
    buckets = [(d.frequency or {})["buckets"] for d in diagnoses]
    for index, bucket in enumerate(buckets[0]):
        rows = [b[index] if index < len(b) else {} for b in buckets]
        table.row(bucket["ranks"],  # "1–10": its count of tokens is the range's
                      *_cells([r.get("mean_norm") for r in rows], "{:.3f}", ""),
                      *_cells([r.get("mean_knn_distance") for r in rows], "{:.3f}", ""))
    return table


def topk_table(diagnoses: list[Diagnosis]) -> TextTable:
    data = [(d.topk or {}) for d in diagnoses]
    headline = data[0]["headline"]
    table = TextTable(f"Top-k frequent tokens removed from mean pooling ({headline}, Spearman × 100; "
                      "[CLS]/[SEP] counted)", caption="most frequent: " + " ".join(data[0]["frequent_tokens"][:12]))
    table.column("k", right=True)
    _model_columns(table, diagnoses)
    curves = [d["curves"][d["headline"]] for d in data]
    best = [d["best_k"] for d in data]
    for k in sorted({*(k for k in TOPK_SHOWN if k < len(curves[0])), *best}):
        cells = _cells([c[k] for c in curves], "{:.2f}", "high")
        for index in range(len(diagnoses)):  # cells: one per model, then Δ
            if k == best[index]:
                cells[index] = Cell(f"{cells[index].text} ★", BEST)
        table.row(str(k), *cells)
    step = 1 if len(curves) == 1 else -(-len(curves[0]) // CURVE_POINTS_COMPARED)
    table.row("curve" if step == 1 else f"curve\n(k by {step})", *(sparkline(c[::step]) for c in curves),
              *([""] if len(curves) == 2 else []))
    return table


def layers_table(diagnoses: list[Diagnosis]) -> TextTable:
    """One model: a row per layer, a column per pooling. Two: a row per layer and pooling, with the two models and
    their Δ (3 poolings × 3 columns would not fit 80 columns)."""
    data = [(d.layers or {}) for d in diagnoses]
    table = TextTable(f"Layer × pooling, Spearman × 100 on {data[0]['source']} (SG-OPT Fig. 1)",
                      caption="★ = each model's best layer × pooling")
    table.column("layer", right=True)
    poolings = data[0]["token_poolings"]
    rows: list[tuple[str, list[list[float | None]], list[str]]] = []
    for layer in range(max(len(d["grid"]) for d in data)):  # models may differ in depth (L6 vs L3)
        names = [f"{p}@{layer}" for p in poolings]
        rows.append((str(layer), [[d["grid"][layer][i] if layer < len(d["grid"]) else None for d in data]
                                  for i in range(len(names))], names))
    empty: list[float | None] = [None] * len(data)
    for mix in LAYER_MIXES:  # layer mixes are mean-pooled: shown in the mean column
        rows.append((mix, [empty, [d["named"][mix] for d in data], empty], ["", mix, ""]))
    if len(diagnoses) == 2:
        return _layers_long(table, diagnoses, data, poolings, rows)
    for pooling in poolings:
        _model_columns(table, diagnoses, prefix=pooling)
    for label, per_pooling, names in rows:
        cells: list[str | Cell] = [label]
        for values, name in zip(per_pooling, names):
            cells += _starred(_cells(values, "{:.2f}", "high"), data, name)
        table.row(*cells)
    return table


def _layers_long(table: TextTable, diagnoses: list[Diagnosis], data: list[dict], poolings: list[str],
                 rows: list[tuple[str, list[list[float | None]], list[str]]]) -> TextTable:
    table.column("pooling")
    _model_columns(table, diagnoses)
    for label, per_pooling, names in rows:
        shown = [(pooling, values, name) for pooling, values, name in zip(poolings, per_pooling, names)
                 if any(value is not None for value in values)]
        for position, (pooling, values, name) in enumerate(shown):
            table.row(label if position == 0 else "", pooling if name else "mean",
                      *_starred(_cells(values, "{:.2f}", "high"), data, name),
                      section_end=position == len(shown) - 1)
    return table


def _starred(cells: list[Cell], data: list[dict], name: str) -> list[Cell]:
    """The cells of one pooling with a ★ on each model's best layer × pooling."""
    for index, record in enumerate(data):
        if name and record["best"]["pooling"] == name:
            cells[index] = Cell(f"{cells[index].text} ★", BEST)
    return cells


def _short(diagnosis: Diagnosis, diagnoses: list[Diagnosis]) -> str:
    """The model's name by the tables' one rule (`short_names`: as few path components as keep the models apart)."""
    return short_names([d.model for d in diagnoses])[diagnosis.model]


def _model_columns(table: TextTable, diagnoses: list[Diagnosis], prefix: str = "") -> None:
    for index, diagnosis in enumerate(diagnoses):
        short = _short(diagnosis, diagnoses)
        name = short if not prefix else f"{short}\n[{prefix}]" if len(diagnoses) > 1 else prefix
        table.column(name, right=True)
        if index > 0:
            table.column("Δ", right=True)


def _cells(values: list[float | None], fmt: str, better: str) -> list[Cell]:
    """One cell per model, plus a Δ cell (good when the change is for the better) when comparing two."""
    cells = [Cell(_format(v, fmt)) for v in values]
    if len(values) == 2:
        first, second = values
        if first is None or second is None or math.isnan(first) or math.isnan(second):
            cells.append(Cell(""))
        else:
            delta = second - first
            good = (delta < 0) if better == "low" else (delta > 0) if better == "high" else None
            tone = "" if good is None or delta == 0 else GOOD if good else BAD
            delta_fmt = fmt if "+" in fmt else fmt.replace("{:", "{:+", 1)
            cells.append(Cell(delta_fmt.format(delta), tone))
    return cells


def _format(value: float | None, fmt: str) -> str:
    return "—" if value is None or math.isnan(value) else fmt.format(value)


def sparkline(values: list[float]) -> str:
    """▁▂▃… scaled from the series' minimum to its maximum (NaN → space)."""
    finite = [v for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    return "".join(" " if v is None or math.isnan(v) else SPARK[round((v - low) / span * (len(SPARK) - 1))]
                   for v in values)


def bar(value: float | None, width: int = BAR_WIDTH) -> str:
    """A bar for a value in [0, 1] (negative values draw nothing)."""
    if value is None or math.isnan(value):
        return ""
    return "█" * round(max(0.0, min(1.0, value)) * width)


def verdict_lines(diagnoses: list[Diagnosis]) -> list[tuple[str, str]]:
    """(name, verdict) per model and report, the plain-words reading of the figures."""
    lines = []
    for diagnosis in diagnoses:
        prefix = f"{_short(diagnosis, diagnoses)} · " if len(diagnoses) > 1 else ""
        lines += [(f"{prefix}{name}", line) for name, line in diagnosis.verdicts().items()]
    return lines
