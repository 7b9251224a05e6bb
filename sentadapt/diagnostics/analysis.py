"""`sentadapt diagnose` as one library call: options checked, the inputs gathered once, each model loaded and
diagnosed, the `--json` document and the `--plot` PNGs written.

`diagnose()` is public as `sentadapt.diagnose`; the CLI parses its options, calls it and renders the result.
Nothing here imports torch at module level (the encoder loads inside the call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sentadapt.diagnostics import (
    DIAGNOSE_BATCH_SIZE,
    SAMPLE_SEED,
    SAMPLE_SENTENCES,
    TOPK_MAX,
    TOPK_STS,
    parse_reports,
    report_tables,
)
from sentadapt.diagnostics.report import DiagnoseInputs, Diagnosis, comparison_dict, gather_inputs, run_reports
from sentadapt.errors import DataError
from sentadapt.events import Note, Progress, quiet
from sentadapt.model.resolve import DEFAULT_BASE_MODEL
from sentadapt.options import check_at_least, check_output_file, check_output_folder, checked, save_result
from sentadapt.storage.durable import write_json_file
from sentadapt.text_tables import TextTable


@dataclass
class DiagnoseResult:
    """One `Diagnosis` per model (the second: `compare`), the inputs they were computed on, the settings."""

    diagnoses: list[Diagnosis]
    inputs: DiagnoseInputs
    settings: dict[str, object]
    plots: list[Path] = field(default_factory=list)  # the PNGs written (`plot`)

    def to_json(self) -> dict[str, object]:
        """What `sentadapt diagnose --json` writes (schema in docs/diagnostics.md)."""
        return comparison_dict(self.diagnoses, self.inputs, self.settings)

    def write_json(self, path: str | Path) -> Path:
        return write_json_file(path, self.to_json())

    # What `sentadapt diagnose` prints, as plain data (sentadapt.text_tables; `print(table)` gives text).
    def summary_table(self) -> TextTable:
        return report_tables.summary_table(self.diagnoses)

    def verdict_lines(self) -> list[tuple[str, str]]:
        return report_tables.verdict_lines(self.diagnoses)

    def spectrum_lines(self) -> list[str]:
        return report_tables.spectrum_lines(self.diagnoses)

    def report_tables(self) -> dict[str, TextTable]:
        return report_tables.report_tables(self.diagnoses)


@checked({"model": "MODEL", "json_out": "--json"})
def diagnose(
    model: str | Path = DEFAULT_BASE_MODEL,
    *,
    compare: str | Path | None = None,
    corpus: str | Path | None = None,
    pairs: str | Path | None = None,
    sample: int = SAMPLE_SENTENCES,
    data_dir: str | Path | None = None,
    sts: str = TOPK_STS,
    report: str | Sequence[str] | None = None,
    max_k: int = TOPK_MAX,
    json_out: str | Path | None = None,
    plot: str | Path | None = None,
    seed: int = SAMPLE_SEED,
    batch_size: int = DIAGNOSE_BATCH_SIZE,
    max_length: int | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    progress: Progress | None = None,
    note: Note | None = None,
) -> DiagnoseResult:
    """Why a model's sentence space is weak (what `sentadapt diagnose` does; the keywords are its options):
    anisotropy, isotropy, spectrum, alignment/uniformity, frequency bias, top-k token removal, layer sweep, each
    with a one-line verdict; with `compare`, a second model on the same inputs. `report`: names or a comma list
    (None: every report that has its data). With no corpus, pairs or STS data the sample shipped with sentadapt
    is used (and a note says so). The JSON is written before the plots: figures that took minutes are never lost.

    Bad options and data raise `ConfigError` / `DataError` / `ModelError` before any model loads."""
    from sentadapt.evaluation.tasks import resolve_data_dir
    from sentadapt.model.resolve import resolve_model

    note = note or quiet
    check_at_least("--max-k", max_k, 1)
    check_at_least("--batch-size", batch_size, 1)
    check_at_least("--max-length", max_length, 8)
    requested = parse_reports(report if report is None or isinstance(report, str) else ",".join(report))
    check_output_file("--json", json_out, "diagnose.json")
    check_output_folder("--plot", plot)
    if plot is not None:
        from sentadapt.diagnostics.plots import require_matplotlib

        require_matplotlib()
    corpus = Path(corpus) if corpus is not None else None
    if corpus is not None and not corpus.exists():
        if not {"*", "?", "["} & set(str(corpus)):
            raise DataError(f"--corpus {corpus}: no such file or folder; pass text with one sentence per line")
        from sentadapt.data.corpus import corpus_files

        corpus_files([corpus])  # a quoted wildcard pattern, as adapt and pairs take it: one line when it matches none
    resolved = [resolve_model(str(name)) for name in (model, compare) if name is not None]
    inputs = gather_inputs(requested, corpus, Path(pairs) if pairs is not None else None, resolve_data_dir(data_dir),
                           sample, seed, sts, bundled_sample=True)
    if inputs.bundled_sample:
        from sentadapt.data.bundled import SAMPLE_DESCRIPTION

        note(f"no --corpus, --pairs or STS data (--data-dir): using the sample shipped with sentadapt "
             f"({SAMPLE_DESCRIPTION}); pass your own data for figures about your domain")
    for name, why in inputs.skipped.items():
        note(f"skipping {name}: {why}")
    from sentadapt.model.encoder import Encoder  # torch loads here, after every check

    diagnoses = []
    for target in resolved:
        encoder = Encoder.load(target, max_length=max_length, device=device, trust_remote_code=trust_remote_code,
                               allow_pickle=allow_pickle)
        diagnoses.append(run_reports(encoder, inputs, max_k, batch_size, max_length, seed, progress))
        note(f"{target.name}: {encoder.num_layers} layers, dim {encoder.embedding_dim}, pooling "
             f"{encoder.pooling_name} (from {encoder.pooling_source}), {diagnoses[-1].seconds:.1f}s")
        del encoder
    note(f"sentences: {inputs.sentence_source or 'none'}")
    settings: dict[str, object] = {"sample": sample, "seed": seed, "max_k": max_k, "sts": sts,
                                   "batch_size": batch_size, "max_length": max_length}
    result = DiagnoseResult(diagnoses, inputs, settings)
    if json_out is not None:
        note(f"wrote {save_result('--json', json_out, result, lambda: result.write_json(json_out))}")
    if plot is not None:
        from sentadapt.diagnostics.plots import write_plots

        result.plots = save_result("--plot", plot, result, lambda: write_plots(diagnoses, Path(plot)))
        note(f"wrote {len(result.plots)} plots to {plot}: {', '.join(path.name for path in result.plots)}")
    return result
