"""`sentadapt adapt --recipe auto`: the summary of an auto run (the run itself: sentadapt/train/auto_run.py; the
rule: sentadapt/evaluation/selection.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from sentadapt.cli._common import console
from sentadapt.rundir import RunDir


def _duration(seconds: float | None) -> str:
    import time

    return "–" if seconds is None else time.strftime("%H:%M:%S", time.gmtime(seconds))


def _interval(values: list[float] | None) -> str:
    return "–" if not values else f"[{values[0]:+.2f}, {values[1]:+.2f}]"


def print_auto_summary(output: Path, record: dict[str, Any]) -> None:
    """One row per candidate (dev score, Δ, plain and adjusted CI, steps, time), then the choice and why."""
    adjustment = record["adjustment"]
    confidence = adjustment["confidence"]
    adjusted = "adjusted CI" if confidence is None else f"{100 * confidence:.2f} % CI".replace(".00 %", " %")
    steps = {row["steps"] for row in record["candidates"] if row["steps"] is not None} or {0}
    table = Table(title=f"sentadapt adapt --recipe auto — {len(record['candidates'])} candidates, "
                        f"{'/'.join(map(str, sorted(steps)))} steps each, on {record['dev']} (base model "
                        f"{record['base_score']:.2f}); {adjusted}: Bonferroni over the candidates; decision rule: "
                        f"{record.get('decision_rule') or 'strict'}")
    table.add_column("candidate", no_wrap=True)  # the name is the folder under candidates/: never cut
    for header in ("dev", "Δ", "95 % CI", adjusted, "best step", "time"):
        interval = header in ("95 % CI", adjusted)  # the cells that may wrap on a narrow terminal, never cut
        table.add_column(header, justify="right", no_wrap=not interval, overflow="fold" if interval else "ellipsis")
    for row in record["candidates"]:
        if row.get("failed"):
            table.add_row(escape(row["name"]), "failed", "–", "–", "–", "–", _duration(row["seconds"]))
            continue
        chosen = row["name"] == record["chosen"]
        table.add_row(("→ " if chosen else "") + escape(row["name"]), f"{row['dev_score']:.2f}",
                      f"{row['dev_change']:+.2f}", _interval(row["dev_change_ci"]),
                      _interval(row["dev_change_adjusted_ci"]), str(row["best_step"]), _duration(row["seconds"]))
    console.print(table)
    reason = escape(record["decision_reason"])
    if record["chosen"] is None:
        console.print(f"[red]keep the base model[/]: {reason}. Nothing is published at {escape(str(output))}; "
                      f"each candidate's run stays in {escape(str(RunDir(output).candidates))}", soft_wrap=True)
    else:
        console.print(f"[green]use {escape(record['chosen'])}[/] (published at {escape(str(output))}): {reason}",
                      soft_wrap=True)
