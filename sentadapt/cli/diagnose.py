"""`sentadapt diagnose`: why a model's sentence space is weak — and, with --compare, whether adaptation fixed it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from sentadapt.cli._common import console, friendly_errors, note, progress_bar
from sentadapt.resolve import DEFAULT_BASE_MODEL

if TYPE_CHECKING:
    from sentadapt.diagnostics.report import Diagnosis

SPARK = "▁▂▃▄▅▆▇█"
BAR_WIDTH = 20
TOPK_SHOWN = (0, 1, 2, 3, 5, 10, 20, 30, 40, 50, 75, 100)

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


@friendly_errors
def diagnose(
    model: str = typer.Argument(DEFAULT_BASE_MODEL, show_default=False,
                                help="Model folder, `sentadapt adapt` run directory or Hub id (default: "
                                     "named above)."),
    compare: str | None = typer.Option(None, "--compare", help="A second model: every figure side by side, with Δ."),
    corpus: Path | None = typer.Option(None, "--corpus", help="Your text, one sentence per line (the sample)."),
    pairs: Path | None = typer.Option(
        None, "--pairs", help="Labelled pairs (.tsv/.csv/.jsonl: sentence1, sentence2, score); used instead of STS."
    ),
    sample: int = typer.Option(1000, "--sample", help="Sentences drawn from the corpus (seeded)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", envvar="SENTADAPT_DATA_DIR",
        help="Folder of STS JSON Lines files: STS-B test (top-k), STS-B dev (layers, alignment).",
    ),
    sts: str = typer.Option("stsb", "--sts", help="Top-k on STS-B test only (stsb) or all 7 STS test sets (all)."),
    report: str | None = typer.Option(
        None, "--report", help="Comma list of anisotropy, spectrum, alignment, frequency, topk, layers. Default: all "
        "that have their data.",
    ),
    max_k: int = typer.Option(50, "--max-k", min=1, help="Top-k curve: remove up to this many frequent tokens."),
    json_out: Path | None = typer.Option(None, "--json", help="Write every figure as JSON (docs/diagnostics.md)."),
    plot: Path | None = typer.Option(None, "--plot", help="Write PNG plots into this folder (needs matplotlib)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sentence sample and the k-NN token sample."),
    batch_size: int = typer.Option(32, "--batch-size", min=1),
    max_length: int | None = typer.Option(None, "--max-length", min=8, help="Default: the model's max_seq_length."),
    device: str | None = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... Default: cuda if available."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow model code from the Hub."),
    allow_pickle: bool = typer.Option(False, "--allow-pickle", help="Allow pickle (.bin) weights you trust."),
) -> None:
    """Anisotropy, isotropy, spectrum, alignment/uniformity, frequency bias, top-k token removal, layer sweep.

    MODEL defaults to sentence-transformers/all-MiniLM-L6-v2, the default base model of `adapt`.

    With no --corpus, --pairs or STS data, a small sample shipped with sentadapt (IT-support text) is used.
    """
    from sentadapt.api import diagnose as run_diagnose

    result = run_diagnose(model, compare=compare, corpus=corpus, pairs=pairs, sample=sample, data_dir=data_dir,
                          sts=sts, report=report, max_k=max_k, json_out=json_out, plot=plot, seed=seed,
                          batch_size=batch_size, max_length=max_length, device=device,
                          trust_remote_code=trust_remote_code, allow_pickle=allow_pickle, progress=progress_bar,
                          note=note)
    render(result.diagnoses)


# ---------------------------------------------------------------------------------------------- rendering


def render(diagnoses: list[Diagnosis]) -> None:
    console.print(summary_table(diagnoses))
    for name, line in _verdict_lines(diagnoses):
        console.print(f"  [bold]{name}[/]: {line}", highlight=False)
    first = diagnoses[0]
    if first.anisotropy:
        console.print(anisotropy_table(diagnoses))
    if first.spectrum:
        for diagnosis in diagnoses:
            shares = diagnosis.spectrum["variance_shares"][:40] if diagnosis.spectrum else []
            console.print(f"spectrum, top 40 directions: {sparkline(shares)} {_short(diagnosis)}", highlight=False)
    if first.frequency:
        console.print(frequency_table(diagnoses))
    if first.topk:
        console.print(topk_table(diagnoses))
    if first.layers:
        console.print(layers_table(diagnoses))


def summary_table(diagnoses: list[Diagnosis]) -> Table:
    table = Table(title="Diagnosis")
    table.add_column("figure")
    _model_columns(table, diagnoses)
    headlines = [d.headline() for d in diagnoses]
    for key, (label, fmt, better) in FIGURE_LABELS.items():
        if key in headlines[0]:
            table.add_row(label, *_cells([h.get(key) for h in headlines], fmt, better))
    return table


def anisotropy_table(diagnoses: list[Diagnosis]) -> Table:
    table = Table(title="Random-pair cosine per layer (0 = embedding layer; 0 isotropic … 1 collapsed)")
    table.add_column("layer", justify="right")
    for label in ("sentences", "tokens"):
        _model_columns(table, diagnoses, prefix=label)
        if len(diagnoses) == 1:
            table.add_column("")
    series = [(d.anisotropy or {}) for d in diagnoses]
    for layer in range(max(len(s["sentence_cosine_per_layer"]) for s in series)):
        cells = [str(layer)]
        for key in ("sentence_cosine_per_layer", "token_cosine_per_layer"):
            values = [s[key][layer] if layer < len(s[key]) else None for s in series]
            cells += _cells(values, "{:.3f}", "low")
            if len(diagnoses) == 1:
                cells.append(bar(values[0]))
        table.add_row(*cells)
    return table


def frequency_table(diagnoses: list[Diagnosis]) -> Table:
    table = Table(title="Token-embedding norm by frequency rank (BERT-flow: frequent tokens near the origin)")
    table.add_column("ranks")
    _model_columns(table, diagnoses, prefix="norm")
    _model_columns(table, diagnoses, prefix="3-NN dist.")
    buckets = [(d.frequency or {})["buckets"] for d in diagnoses]
    for index, bucket in enumerate(buckets[0]):
        rows = [b[index] if index < len(b) else {} for b in buckets]
        table.add_row(f"{bucket['ranks']} ({bucket['tokens']})",
                      *_cells([r.get("mean_norm") for r in rows], "{:.3f}", ""),
                      *_cells([r.get("mean_knn_distance") for r in rows], "{:.3f}", ""))
    return table


def topk_table(diagnoses: list[Diagnosis]) -> Table:
    data = [(d.topk or {}) for d in diagnoses]
    headline = data[0]["headline"]
    table = Table(title=f"Top-k frequent tokens removed from mean pooling ({headline}, Spearman × 100; "
                        "[CLS]/[SEP] counted)",
                  caption="most frequent: " + " ".join(data[0]["frequent_tokens"][:12]))
    table.add_column("k", justify="right")
    _model_columns(table, diagnoses)
    curves = [d["curves"][d["headline"]] for d in data]
    best = [d["best_k"] for d in data]
    for k in sorted({*(k for k in TOPK_SHOWN if k < len(curves[0])), *best}):
        cells = _cells([c[k] for c in curves], "{:.2f}", "high")
        for index in range(len(diagnoses)):  # cells: one per model, then Δ
            if k == best[index]:
                cells[index] = f"[bold green]{cells[index]} ★[/]"
        table.add_row(str(k), *cells)
    table.add_row("curve", *(sparkline(c) for c in curves), *([""] if len(curves) == 2 else []))
    return table


def layers_table(diagnoses: list[Diagnosis]) -> Table:
    data = [(d.layers or {}) for d in diagnoses]
    table = Table(title=f"Layer × pooling, Spearman × 100 on {data[0]['source']} (SG-OPT Fig. 1); ★ = best")
    table.add_column("layer", justify="right")
    for pooling in data[0]["token_poolings"]:
        _model_columns(table, diagnoses, prefix=pooling)
    rows: list[tuple[str, list[list[float | None]], list[str]]] = []
    for layer in range(max(len(d["grid"]) for d in data)):  # models may differ in depth (L6 vs L3)
        names = [f"{p}@{layer}" for p in data[0]["token_poolings"]]
        rows.append((str(layer), [[d["grid"][layer][i] if layer < len(d["grid"]) else None for d in data]
                                  for i in range(len(names))], names))
    empty: list[float | None] = [None] * len(data)
    for mix in ("last2avg", "firstlast"):  # layer mixes are mean-pooled: shown in the mean column
        rows.append((mix, [empty, [d["named"][mix] for d in data], empty], ["", mix, ""]))
    for label, per_pooling, names in rows:
        cells = [label]
        for values, name in zip(per_pooling, names):
            shown = _cells(values, "{:.2f}", "high")
            for index, d in enumerate(data):
                if name and d["best"]["pooling"] == name:
                    shown[index] = f"[bold green]{shown[index]} ★[/]"
            cells += shown
        table.add_row(*cells)
    return table


# ---------------------------------------------------------------------------------------------- helpers


def _short(diagnosis: Diagnosis) -> str:
    return Path(diagnosis.model).name or diagnosis.model


def _model_columns(table: Table, diagnoses: list[Diagnosis], prefix: str = "") -> None:
    for index, diagnosis in enumerate(diagnoses):
        name = _short(diagnosis) if not prefix else f"{prefix}\n{_short(diagnosis)}" if len(diagnoses) > 1 else prefix
        table.add_column(name, justify="right")
        if index > 0:
            table.add_column("Δ", justify="right")


def _cells(values: list[float | None], fmt: str, better: str) -> list[str]:
    """One cell per model, plus a Δ cell (green when the change is for the better) when comparing two."""
    cells = [_format(v, fmt) for v in values]
    if len(values) == 2:
        first, second = values
        if first is None or second is None or math.isnan(first) or math.isnan(second):
            cells.append("")
        else:
            delta = second - first
            good = (delta < 0) if better == "low" else (delta > 0) if better == "high" else None
            color = "white" if good is None or delta == 0 else "green" if good else "red"
            delta_fmt = fmt if "+" in fmt else fmt.replace("{:", "{:+", 1)
            cells.append(f"[{color}]{delta_fmt.format(delta)}[/]")
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


def _verdict_lines(diagnoses: list[Diagnosis]) -> list[tuple[str, str]]:
    lines = []
    for diagnosis in diagnoses:
        prefix = f"{_short(diagnosis)} · " if len(diagnoses) > 1 else ""
        lines += [(f"{prefix}{name}", line) for name, line in diagnosis.verdicts().items()]
    return lines
