"""`sentadapt decide`: weigh a finished run's model against its base on new or more labels, and record the decision."""

from __future__ import annotations

from pathlib import Path

import typer

from sentadapt.cli import shared_options as shared
from sentadapt.cli._common import friendly_errors, progress_bar, say
from sentadapt.config.schema import DEFAULT_DECISION, DEFAULT_RISK
from sentadapt.errors import NoImprovement


@friendly_errors
def decide_command(
    run: Path = typer.Argument(..., help="A finished run directory (sentadapt adapt --output)."),
    dev: Path = typer.Option(..., "--dev", help="Labelled pairs (.tsv .csv .jsonl .parquet; a 'weight' column "
                                                "from `pairs --teacher/--run` is the design's)."),
    decision: str = typer.Option(DEFAULT_DECISION, "--decision", help="The use/keep rule: risk | strict | positive "
                                                            "(as `adapt --decision`)."),
    risk: float = typer.Option(DEFAULT_RISK, "--risk", help="The risk rule's limit over every look (as adapt's)."),
    require_improvement: bool = typer.Option(False, "--require-improvement",
                                             help="Exit with code 3 when the decision is keep-base."),
    redecide: bool = typer.Option(False, "--redecide", help="Decide again on labels already decided on, under "
                                                            "another rule or limit (refused without it)."),
    batch_size: int = shared.batch_size(),
    max_length: int | None = shared.max_length(),
    device: str | None = shared.device(),
    trust_remote_code: bool = shared.trust_remote_code(),
    allow_pickle: bool = shared.allow_pickle(),
) -> None:
    """Decide again whether to use the run's model, on new labels, without training: pairs chosen by `sentadapt
    pairs --run RUN` or any labelled pairs; the decision is recorded in RUN/metrics.json."""
    from sentadapt.api import decide_again

    result = decide_again(run, dev, decision=decision, risk=risk, batch_size=batch_size, max_length=max_length,
                          device=device, trust_remote_code=trust_remote_code, allow_pickle=allow_pickle,
                          progress=progress_bar, redecide=redecide)
    say(result.lines())
    if require_improvement and result.decision.keep_base:
        raise NoImprovement(f"--require-improvement: keep the base model: {result.decision.reason}")
