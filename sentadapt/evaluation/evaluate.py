"""`sentadapt eval` as one library call: options checked, every data set read, each model loaded and scored, the
paired Δs against the first model computed and, when asked, the `--json` document written.

`evaluate()` is public as `sentadapt.evaluate`; the CLI parses its options, calls it and renders the result.
Nothing here imports torch at module level (the encoder loads inside the call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentadapt.errors import ConfigError
from sentadapt.evaluation import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, STS_AGGREGATE
from sentadapt.evaluation.evaluator import Comparison, EvalReport, Evaluator
from sentadapt.evaluation.forms import forms_of, parse_dims, parse_precisions
from sentadapt.evaluation.forms import resolved as resolved_forms
from sentadapt.events import Note, Progress, progress_step, quiet
from sentadapt.model.prompts import SIDES, PromptChoice, Prompts, read_prompts
from sentadapt.options import (
    ENCODE_BATCH_SIZE,
    TEST_SPLIT,
    VECTOR_DTYPE,
    check_at_least,
    check_output_file,
    checked,
    save_result,
)
from sentadapt.storage.durable import write_json_file
from sentadapt.text_tables import TextTable

SPLITS = ("test", "dev")
PAIR_TASK_TYPES = ("sts", "pair-classification")  # what --task may force for --pairs files


@dataclass
class EvalResult:
    """The scores of every model on every evaluator, with the paired Δs against the first model.

    `reports[m][e]` is model m on evaluator e (an `EvalReport`: metrics with their 95 % CIs per task, the
    average); `comparisons[m][e]` is model m against model 0 on evaluator e (None for model 0)."""

    models: list[str]  # as given (a folder, a run directory, a Hub id)
    evaluators: list[Evaluator]
    reports: list[list[EvalReport]]
    comparisons: list[list[Comparison | None]]
    bootstrap: int  # resamples behind every interval (0: none)
    seed: int
    aggregate: str
    # with --dims/--quantize: each row's form ({dim, precision, bytes_per_vector}; `models` then names model and
    # form, one row per pair, the whole float32 vector of each model first) and where int8's ranges came from
    forms: list[dict[str, Any]] | None = None
    calibration: str | None = None

    def to_json(self) -> list[dict[str, Any]]:
        """What `sentadapt eval --json` writes: one entry per model with its reports and its Δ against the first."""
        entries = [{"model": model, "reports": [report.to_dict() for report in reports],
                    "delta_vs_first": None if row[0] is None else [c.to_dict() for c in row]}  # type: ignore[union-attr]
                   for model, reports, row in zip(self.models, self.reports, self.comparisons)]
        for entry, form in zip(entries, self.forms or []):
            ranges = {"int8_ranges": self.calibration} if form["precision"] == "int8" else {}
            entry["form"] = {**form, **ranges}  # type: ignore[assignment]
        return entries

    def write_json(self, path: str | Path) -> Path:
        return write_json_file(path, self.to_json())

    def intervals_note(self) -> str:
        """How to read the tables' intervals ("" without them): what the CIs are, and the Δs' and the * when a row
        is compared with the first (a second model, or a size or precision of the first)."""
        if not self.bootstrap:
            return ""
        note = (f"[low, high]: 95 % percentile bootstrap CI ({self.bootstrap} resamples of the pairs/queries, seed "
                f"{self.seed})")
        if len(self.models) > 1:
            note += ("; Δ CIs are paired: Δ ± 1.96 × its calibrated SE (the influence function; best-threshold "
                     "F1/accuracy: the paired bootstrap); * = the Δ's CI excludes 0")
        return note

    def __repr__(self) -> str:
        """What a notebook shows: each evaluator's average per model, with its CI and Δ rounded as the table prints
        them (the full reports are `reports` and `comparisons`, the tables `tables()`)."""
        lines = [f"EvalResult(models={self.models!r}, bootstrap={self.bootstrap}, seed={self.seed})"]
        for e, evaluator in enumerate(self.evaluators):
            lines.append(f"  {evaluator.title}:")
            for model, reports, row in zip(self.models, self.reports, self.comparisons):
                report, delta = reports[e], row[e]
                text = f"    {model}: {report.average:.2f}{_interval(report.average_interval)}"
                if delta is not None and delta.average is not None:
                    text += f", Δ {delta.average.value:+.2f}{_interval(delta.average.interval, signed=True)}"
                lines.append(text)
        return "\n".join(lines)

    def tables(self, subsets: bool = False) -> list[TextTable]:
        """One table per evaluator, as `sentadapt eval` prints it (`print(table)` gives plain text); `subsets`:
        per-subset STS rows too."""
        from sentadapt.evaluation.result_tables import forms_table, result_table

        if self.forms:
            return [forms_table(evaluator, self.models, self.forms, [reports[e] for reports in self.reports],
                                [row[e] for row in self.comparisons]) for e, evaluator in enumerate(self.evaluators)]
        return [result_table(evaluator, [reports[e] for reports in self.reports],
                             [row[e] for row in self.comparisons], subsets)
                for e, evaluator in enumerate(self.evaluators)]

    def fitted_tables(self, width: int, subsets: bool = False) -> list[tuple[TextTable, str]]:
        """(table, its protocol line) as a terminal `width` wide shows them: a table whose models do not fit is drawn
        as several, the first model in each with as many others (and their Δ) as fit — a column is never cut (issue
        82: the third model's Δ read `[77.33, 95`)."""
        from sentadapt.text_tables import least_width

        if self.forms or len(self.models) <= 2:
            return list(zip(self.tables(subsets), self.protocols(), strict=True))
        out: list[tuple[TextTable, str]] = []
        for e, (evaluator, line) in enumerate(zip(self.evaluators, self.protocols(), strict=True)):
            reports, comparisons = [row[e] for row in self.reports], [row[e] for row in self.comparisons]
            others = list(range(1, len(self.models)))
            per = len(others)
            while per > 1 and least_width(self._part(evaluator, reports, comparisons, others[:per], subsets),
                                          width) > width:
                per -= 1
            groups = [others[start:start + per] for start in range(0, len(others), per)]
            for group in groups:
                table = self._part(evaluator, reports, comparisons, group, subsets)
                if len(groups) > 1:
                    shown = ", ".join(str(i + 1) for i in [0, *group])
                    table.title = f"{table.title} — models {shown} of {len(self.models)}"
                out.append((table, line))
        return out

    @staticmethod
    def _part(evaluator: Any, reports: list[Any], comparisons: list[Any], group: list[int], subsets: bool,
              ) -> TextTable:
        from sentadapt.evaluation.result_tables import result_table

        return result_table(evaluator, [reports[0], *(reports[i] for i in group)],
                            [comparisons[0], *(comparisons[i] for i in group)], subsets)

    def protocols(self) -> list[str]:
        """Per evaluator, the line printed under its table: the data and how it was scored."""
        from sentadapt.evaluation.result_tables import protocol

        lines = [protocol(evaluator, self.aggregate) for evaluator in self.evaluators]
        if self.forms:
            how = "; sizes: each vector's prefix"
            precisions = {form["precision"] for form in self.forms}
            if "int8" in precisions:
                how += f"; int8: {self.calibration}"
            if "binary" in precisions:
                how += "; binary: 1 − 2·Hamming/d (the cosine of the ±1 bits)"
            lines = [line + how for line in lines]
        return lines


@checked({"models": "MODELS", "json_out": "--json"})
def evaluate(
    models: str | Path | Sequence[str | Path],
    *,
    sts: str | None = None,
    data_dir: str | Path | None = None,
    pairs: Sequence[str | Path] = (),
    rerank: Sequence[str | Path] = (),
    retrieval: Sequence[str | Path] = (),
    task: str | None = None,
    split: str = TEST_SPLIT,
    aggregate: str = STS_AGGREGATE,
    bootstrap: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    cache_embeddings: bool = False,
    pooling: str | None = None,
    prompt: str | None = None,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
    batch_size: int = ENCODE_BATCH_SIZE,
    max_length: int | None = None,
    dtype: str = VECTOR_DTYPE,
    device: str | None = None,
    dims: str | Sequence[int] | None = None,
    quantize: str | Sequence[str] | None = None,
    calibration: str | Path | None = None,
    json_out: str | Path | None = None,
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    progress: Progress | None = None,
    note: Note | None = None,
) -> EvalResult:
    """Score `models` side by side (what `sentadapt eval` does; the keywords are its options): STS (`sts`, with
    `data_dir`), your pairs files (`pairs`: scored → STS, 0/1 labels → pair classification), reranking files
    (`rerank`) and BEIR folders (`retrieval`); with none of them, the 7 STS test sets. Every number gets a 95 %
    percentile bootstrap CI (`bootstrap` resamples, `seed`); every model after the first a paired Δ against it.
    Prompts (a model's prompt names, or "none"): `prompt` for both sentences of pairs (default: the model's
    default_prompt_name), `query_prompt` / `document_prompt` for the queries and documents of reranking and
    retrieval (default: its "query" prompt, and its first of "document", "passage", "corpus").
    `dims` / `quantize` (`--dims 384,192,96 --quantize none,int8,binary`): every model also scored at each size
    (the vectors' prefix) and precision, from one encoding (evaluation/forms.py), each a row with its Δ against the
    first model's whole float32 vectors; int8's ranges come from `calibration` (a text file, one sentence per line,
    its first 10,000) or else from the evaluated sentences.

    Bad options and data raise `ConfigError` / `DataError` / `ModelError` before any model loads. `progress`
    (description, total) → context manager yielding advance(n), and `note` (one line) report as the CLI does."""
    from sentadapt.model.encoder import Encoder

    note = note or quiet
    _check_options(bootstrap=bootstrap, batch_size=batch_size, max_length=max_length, split=split, dtype=dtype,
                   device=device, json_out=json_out, calibration=calibration, quantize=quantize, task=task)
    choice = PromptChoice(prompt, query_prompt, document_prompt)
    resolved = _checked_models(models, choice)
    forms = forms_of(parse_dims("--dims", dims), parse_precisions("--quantize", quantize))
    if forms:  # a size one model cannot give fails before the first model is encoded, not after
        _check_forms_fit(forms, resolved)
    calibration_texts = read_calibration(calibration) if calibration is not None else None
    evaluators = build_evaluators(sts, data_dir, pairs, rerank, retrieval, task, split, aggregate,
                                  {"resamples": bootstrap, "seed": seed, "cache_embeddings": cache_embeddings})

    reports: list[list[EvalReport]] = []  # a row per model, or per model and form
    rows: list[str] = []
    row_forms: list[dict[str, Any]] = []
    for model in resolved:
        encoder = Encoder.load(model, pooling=pooling, max_length=max_length, device=device,
                               trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
        model_forms = resolved_forms(forms, encoder.embedding_dim, model.name) if forms else []
        per_evaluator = _score_model(model.name, encoder, evaluators, model_forms, calibration_texts, choice,
                                     batch_size, dtype, progress, note)
        reports += [[form_reports[f] for form_reports in per_evaluator] for f in range(len(per_evaluator[0]))]
        if model_forms:
            rows += [f"{model.name} @ {form.label(encoder.embedding_dim)}" for form in model_forms]
            row_forms += [{"model": model.name, **form.to_dict(encoder.embedding_dim)} for form in model_forms]
        else:
            rows.append(model.name)
        model_reports = [form_reports[0] for form_reports in per_evaluator]
        note(f"{model.name}: pooling {encoder.pooling_name} (from {encoder.pooling_source}), "
             f"max_length {encoder.max_length}, {dtype}, {sum(r.seconds for r in model_reports):.1f}s"
             + _prompts_line(model_reports))
        del encoder

    comparisons: list[list[Comparison | None]] = [[None] * len(evaluators)]
    for model_reports in reports[1:]:
        comparisons.append([evaluator.compare(first, other)
                            for evaluator, first, other in zip(evaluators, reports[0], model_reports)])
    calibrated_by = None
    if any(form["precision"] == "int8" for form in row_forms):
        calibrated_by = (f"ranges from {len(calibration_texts)} sentences of {calibration}"
                         if calibration_texts is not None else "ranges from the evaluated sentences")
    result = EvalResult(rows, evaluators, reports, comparisons, bootstrap, seed, aggregate,
                        row_forms or None, calibrated_by)
    if json_out is not None:
        note(f"wrote {save_result('--json', json_out, result, lambda: result.write_json(json_out))}")
    return result


def _check_options(*, bootstrap: int, batch_size: int, max_length: int | None, split: str, dtype: str,
                   device: str | None, json_out: str | Path | None, calibration: str | Path | None,
                   quantize: str | Sequence[str] | None, task: str | None) -> None:
    """The options that need no file read, each failing with the line the CLI prints."""
    from sentadapt.model.encoder import default_device
    from sentadapt.model.half_precision import check_dtype

    check_at_least("--bootstrap", bootstrap, 0)
    check_at_least("--batch-size", batch_size, 1)
    check_at_least("--max-length", max_length, 8)
    if split not in SPLITS:
        raise ConfigError(f"--split: '{split}' is not one of {', '.join(SPLITS)}")
    check_dtype(dtype, (device or default_device().type).split(":")[0])
    check_output_file("--json", json_out, "eval.json")
    if calibration is not None and not quantize:
        raise ConfigError("--calibration: sets int8's ranges; use it with --quantize int8")
    if task is not None and task not in PAIR_TASK_TYPES:
        raise ConfigError(f"--task: '{task}' is not one of {', '.join(PAIR_TASK_TYPES)} (--rerank and --retrieval "
                          "name their type themselves)")


def _checked_models(models: str | Path | Sequence[str | Path], choice: PromptChoice) -> list[Any]:
    """Every model resolved, with weights and the prompts asked for, before the first one loads."""
    from sentadapt.model.resolve import check_has_weights, resolve_model

    names = [str(models)] if isinstance(models, (str, Path)) else [str(model) for model in models]
    resolved = [resolve_model(name) for name in names]  # fail on a bad name before loading anything
    for model in resolved:  # a folder without weights too, before the first model is encoded
        check_has_weights(model)
    for model in resolved:  # an unknown prompt name fails before any weights load
        check_prompt_choice(read_prompts(model), choice, model.name)
    return resolved


def _score_model(name: str, encoder: Any, evaluators: list[Evaluator], model_forms: list[Any],
                 calibration_texts: list[str] | None, choice: PromptChoice, batch_size: int, dtype: str,
                 progress: Progress | None, note: Note) -> list[list[EvalReport]]:
    """One model on every evaluator: per evaluator, a report per form (one report without --dims/--quantize)."""
    per_evaluator = []
    with encoder.keep_cast_copy():  # bf16/fp16: the weights are cast once for all evaluators, then released
        calibrated = None
        if calibration_texts is not None and any(form.precision == "int8" for form in model_forms):
            calibrated = encoder.encode(calibration_texts, batch_size=batch_size, dtype=dtype,
                                        prompt=encoder.prompts.for_side("pair", choice.of("pair"),
                                                                        encoder.name)).float().numpy()
        for evaluator in evaluators:
            total = evaluator.encodings(encoder, choice)
            with progress_step(progress, f"encoding {name}", total) as advance:
                if model_forms:
                    per_evaluator.append(evaluator.score_forms(encoder, model_forms, calibrated, batch_size,
                                                               dtype=dtype, progress=advance, note=note,
                                                               prompts=choice))
                else:
                    per_evaluator.append([evaluator(encoder, batch_size=batch_size, dtype=dtype,
                                                    progress=advance, note=note, prompts=choice)])
    return per_evaluator


def _check_forms_fit(forms: Sequence[Any], models: Sequence[Any]) -> None:
    """--dims/--quantize against every local model's width, read from its files (a Hub model is checked as it
    loads)."""
    from sentadapt.model.st_format import layout_width

    for model in models:
        width = layout_width(Path(model.location)) if model.is_local else None
        if width is not None:
            resolved_forms(forms, width, model.name)


CALIBRATION_LIMIT = 10_000  # sentences of a --calibration file read: min/max per dimension settle long before


def read_calibration(path: str | Path) -> list[str]:
    """--calibration: a text file, one sentence per line; its first CALIBRATION_LIMIT distinct non-empty lines."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"--calibration {path}: is a directory; give a text file of sentences, one per line")
    if not path.is_file():
        raise ConfigError(f"--calibration {path}: no such file; give a text file of sentences, one per line")
    try:
        with path.open(encoding="utf-8") as handle:
            texts: dict[str, None] = {}
            for line in handle:
                if line.strip():
                    texts[line.strip()] = None
                if len(texts) >= CALIBRATION_LIMIT:
                    break
    except UnicodeDecodeError as error:
        raise ConfigError(f"--calibration {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    if len(texts) < 2:
        raise ConfigError(f"--calibration {path}: {len(texts)} sentences; int8 ranges need at least 2 (a sample of "
                          "the texts you will index)")
    return list(texts)


def _interval(interval: Sequence[float] | None, signed: bool = False) -> str:
    if not interval:
        return ""
    low, high = interval
    return f" [{low:+.2f}, {high:+.2f}]" if signed else f" [{low:.2f}, {high:.2f}]"


def check_prompt_choice(prompts: Prompts, choice: PromptChoice, model: str) -> None:
    """Each prompt name given must be one of the model's (a one-line ConfigError listing them)."""
    for side in SIDES:
        prompts.name_for(side, choice.of(side), model)


def _prompts_line(reports: list[EvalReport]) -> str:
    """", prompts: query 'query: ', document 'passage: '" — only when some side got a prompt."""
    used = {side: text for report in reports for side, text in report.prompts.items()}
    return (", prompts: " + ", ".join(f"{side} {text!r}" for side, text in used.items())) if used else ""


def build_evaluators(sts: str | None, data_dir: str | Path | None, pairs: Sequence[str | Path],
                     rerank: Sequence[str | Path], retrieval: Sequence[str | Path], task: str | None, split: str,
                     aggregate: str, options: dict[str, object]) -> list[Evaluator]:
    """Every requested data set read and checked before any model loads (bad input: one line, nothing run)."""
    from sentadapt.evaluation.sts import StsEvaluator
    from sentadapt.evaluation.task_types import read_task
    from sentadapt.evaluation.tasks import parse_task_list, resolve_data_dir

    evaluators: list[Evaluator] = []
    if sts is not None or not (pairs or rerank or retrieval):
        names = parse_task_list(sts or "all", split)
        evaluators.append(StsEvaluator.from_sts(names, split, resolve_data_dir(data_dir), aggregate,
                                                **options))  # type: ignore[arg-type]
    files = ([(Path(path), task) for path in pairs] + [(Path(path), "reranking") for path in rerank]
             + [(Path(path), "retrieval") for path in retrieval])
    for path, kind in files:
        loaded = read_task(path, kind, split=split, aggregate=aggregate)
        evaluators.append(Evaluator([loaded], split=split, title=f"{loaded.name} — {loaded.title}",
                                    **options))  # type: ignore[arg-type]
    return evaluators
