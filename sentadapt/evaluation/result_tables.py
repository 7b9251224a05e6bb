"""`eval`'s result as tables (sentadapt.text_tables): a row per task (several tasks: the main metric, then the average)
or per metric (one task), a column per model with its 95 % CI, Δ columns against the first model with the
paired CI (* when it excludes 0). `EvalResult.tables()` returns them; the CLI draws them."""

from __future__ import annotations

from collections.abc import Sequence

from sentadapt.evaluation.bootstrap import few_labels_note
from sentadapt.evaluation.evaluator import Comparison, Delta, EvalReport, Evaluator
from sentadapt.text_tables import BAD, DIM, GOOD, STRONG, Cell, TextTable, short_names, signed


def result_table(evaluator: Evaluator, reports: Sequence[EvalReport], comparisons: Sequence[Comparison | None],
                 subsets: bool = False) -> TextTable:
    first = reports[0]
    single = first.tasks[0] if len(first.tasks) == 1 else None
    # one task: its count in the title (a column repeating it on every metric's row cost a narrow table its metric
    # names: `recall@1…`); several: a column, each task its own count
    table = TextTable(first.title if single is None else f"{first.title}, {single.units} {single.unit_name}")
    table.column("task" if single is None else "metric")
    if single is None:
        units = {t.unit_name for t in first.tasks}
        table.column(first.tasks[0].unit_name if len(units) == 1 else "units", right=True)
    for i, report in enumerate(reports):
        table.column(f"{report.model}\n[{report.pooling}]", right=True)
        if i > 0:
            table.column("Δ", right=True)
    if len(first.tasks) > 1:
        _task_rows(table, reports, comparisons, subsets)
    else:
        _metric_rows(table, evaluator, reports, comparisons, subsets)
    return table


def forms_table(evaluator: Evaluator, rows: Sequence[str], forms: Sequence[dict[str, object]],
                reports: Sequence[EvalReport], comparisons: Sequence[Comparison | None]) -> TextTable:
    """`eval --dims/--quantize`: a row per model and form (size, precision, bytes per vector) with its averaged
    score and its paired Δ against the first row (the first model's whole float32 vectors). Each form carries its
    model's name."""
    first = reports[0]
    table = TextTable(first.title)
    for header, right in (("model", False), ("dims", True), ("precision", False), ("bytes", True),
                          (first.metric or _main_metrics(first), True), ("Δ vs first", True)):
        table.column(header, right=right, name=header == "model")
    model_of = [str(form["model"]) for form in forms]  # each row's model as eval named it (a name may hold " @ ")
    shown = short_names(model_of)
    for i, (report, form, comparison) in enumerate(zip(reports, forms, comparisons)):
        bytes_per_vector = float(form["bytes_per_vector"])  # type: ignore[arg-type]
        table.row(shown[model_of[i]] if i == 0 or model_of[i] != model_of[i - 1] else "", str(form["dim"]),
                  str(form["precision"]), f"{bytes_per_vector:g}",
                  Cell(_value(report.average, report.average_interval), STRONG if i == 0 else ""),
                  "" if comparison is None or comparison.average is None else delta_cell(comparison.average),
                  section_end=i + 1 < len(rows) and model_of[i + 1] != model_of[i])
    return table


def _main_metrics(report: EvalReport) -> str:
    names = sorted({result.main_metric for result in report.tasks})
    return names[0] if len(names) == 1 else "avg"


def protocol(evaluator: Evaluator, aggregate: str) -> str:
    """The line under a table: where the data came from and how it was scored."""
    sources = sorted({t.source for t in evaluator.tasks})
    kinds = {task.kind for task in evaluator.tasks}
    how = (f"protocol: Spearman×100 of cosine, aggregate '{aggregate}'" if kinds == {"sts"}
           else "protocol: cosine; metrics × 100 (docs/evaluation.md)")
    weighted = sorted(task.name for task in evaluator.tasks if task.weights is not None)
    chosen = (f"; {', '.join(weighted)}: pairs weighted by their 'weight' column, so each figure and its CI estimate "
              "the candidates they were chosen from (docs/decision.md)") if weighted else ""
    few = [note for task in evaluator.tasks if (note := few_labels_note(task.source, task.units, task.unit_name))]
    return "data: " + "; ".join(sources) + f" — {how}{chosen}" + "".join(f"; {note}" for note in few)


def _task_rows(table: TextTable, reports: Sequence[EvalReport], comparisons: Sequence[Comparison | None],
               subsets: bool) -> None:
    first = reports[0]
    for row, result in enumerate(first.tasks):
        metric = first.selected(result)
        cells: list[str | Cell] = [_display(result.task), str(result.units)]
        for i, report in enumerate(reports):
            task = report.tasks[row]
            cells.append(_value(task.metrics[metric], task.intervals.get(metric)))
            if i > 0:
                cells.append(delta_cell(comparisons[i].tasks[result.task][metric]))  # type: ignore[union-attr]
        table.row(*cells)
        if subsets:
            _subset_rows(table, reports, row)
    cells = [Cell("avg", STRONG), ""]
    for i, report in enumerate(reports):
        cells.append(Cell(_value(report.average, report.average_interval), STRONG))
        if i > 0:
            cells.append(delta_cell(comparisons[i].average))  # type: ignore[union-attr, arg-type]
    table.row(*cells, section_end=True)


def _metric_rows(table: TextTable, evaluator: Evaluator, reports: Sequence[EvalReport],
                 comparisons: Sequence[Comparison | None], subsets: bool) -> None:
    result = reports[0].tasks[0]
    for metric in evaluator.tasks[0].metric_names:
        cells: list[str | Cell] = [Cell(metric, STRONG if metric == reports[0].selected(result) else "")]
        for i, report in enumerate(reports):
            task = report.tasks[0]
            cells.append(_value(task.metrics[metric], task.intervals.get(metric)))
            if i > 0:
                cells.append(delta_cell(comparisons[i].tasks[result.task][metric]))  # type: ignore[union-attr]
        table.row(*cells)
    for extra in ("f1_threshold", "accuracy_threshold"):
        if extra in result.extras:
            cells = [f"  {extra.replace('_', ' ')}"]
            for i, report in enumerate(reports):
                cells += [f"{report.tasks[0].extras[extra]:.4f}"] + ([""] if i > 0 else [])
            table.row(*cells, tone=DIM)
    if subsets:
        _subset_rows(table, reports, 0, units_column=False)


def _subset_rows(table: TextTable, reports: Sequence[EvalReport], row: int, units_column: bool = True) -> None:
    for subset, score in (reports[0].tasks[row].extras.get("subsets") or {}).items():
        cells: list[str | Cell] = [f"  {subset}", *([""] if units_column else [])]
        for i, report in enumerate(reports):
            value = report.tasks[row].extras["subsets"].get(subset, float("nan"))
            cells += [f"{value:.2f}"] + ([signed(value - score)] if i > 0 else [])
        table.row(*cells, tone=DIM)


def _display(task: str) -> str:
    from sentadapt.evaluation.tasks import TASKS

    return TASKS[task].display if task in TASKS else task


def _value(value: float, interval: tuple[float, float] | None) -> str:
    return f"{value:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")


def delta_cell(delta: Delta) -> Cell:
    """'+2.68 [+0.90, +4.40] *', good or bad when the paired CI excludes 0; dim (and no *) when it does not."""
    if delta.interval is None:
        return signed(delta.value)
    text = f"{delta.value:+.2f} [{delta.interval[0]:+.2f}, {delta.interval[1]:+.2f}]"
    if not delta.significant:
        return Cell(f"{text}  ", DIM)
    return Cell(f"{text} *", GOOD if delta.value > 0 else BAD)
