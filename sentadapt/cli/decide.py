"""`sentadapt decide`: weigh a finished run's model against its base on new or more labels, and record the decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import friendly_errors, progress_bar, say
from sentadapt.cli.shared_options import Option
from sentadapt.config.schema import DEFAULT_DECISION, DEFAULT_RISK
from sentadapt.errors import NoImprovement

OPTIONS = (  # sentadapt.decide_again's keywords, and --require-improvement's exit code
    Option("run", Path, ..., "A finished run directory (sentadapt adapt --output).", argument=True),
    Option("dev", Path, ..., "Labelled pairs (.tsv .csv .jsonl .parquet; a 'weight' column from `pairs --teacher/"
           "--run` is the design's)."),
    Option("decision", str, DEFAULT_DECISION, "The use/keep rule: risk | strict | positive (as `adapt --decision`)."),
    Option("risk", float, DEFAULT_RISK, "The risk rule's limit over every look (as adapt's)."),
    Option("require_improvement", bool, False, "Exit with code 3 when the decision is keep-base.", renders=True),
    Option("redecide", bool, False, "Decide again on labels already decided on, under another rule or limit "
           "(refused without it)."),
    shared.batch_size(),
    shared.MAX_LENGTH,
    shared.DEVICE,
    *shared.SAFETY,
)


@friendly_errors
def decide_command(**options: Any) -> None:
    """Decide again whether to use the run's model, on new labels, without training: pairs chosen by `sentadapt
    pairs --run RUN` or any labelled pairs; the decision is recorded in RUN/metrics.json."""
    from sentadapt.api import decide_again

    keywords, rendering = shared.split(options, OPTIONS)
    result = decide_again(**keywords, progress=progress_bar)
    say(result.lines())
    if rendering["require_improvement"] and result.decision.keep_base:
        raise NoImprovement(f"--require-improvement: keep the base model: {result.decision.reason}")


decide_command.__signature__ = shared.signature(OPTIONS)  # type: ignore[attr-defined]
