"""`sentadapt eval`: STS12–16, STS-B and SICK-R (Spearman × 100 of cosine) and your own labelled pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from sentadapt.cli._common import console, friendly_errors, note, progress_bar

if TYPE_CHECKING:
    from sentadapt.evaluation.sts import StsEvaluator, StsReport


@friendly_errors
def eval_models(
    models: list[str] = typer.Argument(..., help="Model folders, run directories or Hub ids (several → compared)."),
    sts: str | None = typer.Option(
        None, "--sts", help="'all' or a comma list of tasks (sts12, sts13, sts14, sts15, sts16, stsb, sickr). "
                            "Default: all (unless --pairs)."
    ),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", envvar="SENTADAPT_DATA_DIR",
        help="Folder of STS JSON Lines files (stsb.test.jsonl, ...). Default: MTEB datasets on the Hub (online).",
    ),
    pairs: list[Path] = typer.Option(
        [], "--pairs", help="Your own labelled pairs (.tsv/.csv/.jsonl: sentence1, sentence2, score)."
    ),
    split: str = typer.Option("test", "--split", help="test | dev (dev: STS-B and SICK-R only)."),
    aggregate: str = typer.Option(
        "all", "--aggregate", help="all (one correlation per task) | mean | wmean of subsets."
    ),
    pooling: str | None = typer.Option(None, "--pooling",
                                       help="Override pooling: cls | mean | max | last2avg | firstlast."),
    batch_size: int = typer.Option(128, "--batch-size", min=1),
    max_length: int | None = typer.Option(None, "--max-length", min=8, help="Default: the model's max_seq_length."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32 | bf16 | fp16 (autocast)."),
    device: str | None = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... Default: cuda if available."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the results as JSON to this file."),
    show_subsets: bool = typer.Option(False, "--subsets", help="Also print per-subset scores."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow model code from the Hub."),
    allow_pickle: bool = typer.Option(False, "--allow-pickle", help="Allow pickle (.bin) weights you trust."),
) -> None:
    """Score models on STS: one row per task, a column per model, the average, and deltas."""
    from sentadapt.encoder import DTYPES, Encoder
    from sentadapt.errors import ConfigError
    from sentadapt.evaluation.sts import StsEvaluator, parse_task_list, resolve_data_dir
    from sentadapt.resolve import resolve_model

    if split not in ("test", "dev"):
        raise ConfigError(f"--split: '{split}' is not one of test, dev")
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype: '{dtype}' is not one of {', '.join(DTYPES)}")
    resolved = [resolve_model(model) for model in models]  # fail on a bad name before loading anything
    evaluators: list[StsEvaluator] = []
    if sts is not None or not pairs:
        names = parse_task_list(sts or "all", split)
        evaluators.append(StsEvaluator.from_sts(names, split, resolve_data_dir(data_dir), aggregate))
    evaluators += [StsEvaluator.from_pairs_file(path, aggregate) for path in pairs]

    reports: list[list[StsReport]] = []
    for model in resolved:
        encoder = Encoder.load(model, pooling=pooling, max_length=max_length, device=device,
                               trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
        model_reports = []
        for evaluator in evaluators:
            with progress_bar(f"encoding {model.name}", len(evaluator.sentences)) as advance:
                model_reports.append(evaluator(encoder, batch_size=batch_size, dtype=dtype, progress=advance))
        reports.append(model_reports)
        note(f"{model.name}: pooling {encoder.pooling_name} (from {encoder.pooling_source}), "
             f"max_length {encoder.max_length}, {dtype}, {sum(r.seconds for r in model_reports):.1f}s")
        del encoder

    for index in range(len(evaluators)):
        console.print(render_table([r[index] for r in reports], show_subsets))
        sources = sorted({t.source for t in reports[0][index].tasks})
        note("data: " + "; ".join(sources) + f" — protocol: Spearman×100 of cosine, aggregate '{aggregate}'")
    if json_out is not None:
        payload = [{"model": m.name, "reports": [r.to_dict() for r in rs]} for m, rs in zip(resolved, reports)]
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        note(f"wrote {json_out}")


def render_table(reports: list[StsReport], show_subsets: bool = False) -> Table:
    """Tasks as rows, a column per model, Δ columns against the first model, the average last."""
    table = Table(title=f"STS ({reports[0].split}, Spearman × 100)", show_footer=False)
    table.add_column("task")
    table.add_column("pairs", justify="right")
    for i, report in enumerate(reports):
        table.add_column(f"{report.model}\n[{report.pooling}]", justify="right")
        if i > 0:
            table.add_column("Δ", justify="right")
    first = reports[0]
    for row, task in enumerate(first.tasks):
        cells = [_display(task.task), str(task.pairs)]
        for i, report in enumerate(reports):
            cells.append(f"{report.tasks[row].spearman:.2f}")
            if i > 0:
                cells.append(_delta(report.tasks[row].spearman - task.spearman))
        table.add_row(*cells)
        if show_subsets:
            for subset, score in task.subsets.items():
                sub_cells = [f"  {subset}", ""]
                for i, report in enumerate(reports):
                    sub_cells.append(f"{report.tasks[row].subsets.get(subset, float('nan')):.2f}")
                    if i > 0:
                        sub_cells.append(_delta(report.tasks[row].subsets.get(subset, float("nan")) - score))
                table.add_row(*sub_cells, style="dim")
    if len(first.tasks) > 1:
        cells = ["[bold]avg[/]", ""]
        for i, report in enumerate(reports):
            cells.append(f"[bold]{report.average:.2f}[/]")
            if i > 0:
                cells.append(_delta(report.average - first.average))
        table.add_row(*cells, end_section=True)
    return table


def _display(task: str) -> str:
    from sentadapt.evaluation.sts import TASKS

    return TASKS[task].display if task in TASKS else task


def _delta(value: float) -> str:
    color = "green" if value > 0 else "red" if value < 0 else "white"
    return f"[{color}]{value:+.2f}[/]"
