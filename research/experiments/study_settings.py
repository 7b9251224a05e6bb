"""What a stored study ran with, and the check that every figure the docs quote follows the product's defaults
(issue 83: the docs quoted the power of a 0.20 limit for weeks after the default became 0.10, because the file the
figure tests read was never regenerated).

A study whose tables the docs quote at the product's default decision records `settings` (product_settings() when
it ran); research/tests/test_study_settings.py fails when a quoted study records none, or others than the
product's defaults now — re-run it (`python -m research.experiments.NAME --study`) when a default changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# the stored studies whose figures README.md, docs/decision.md and docs/evaluation.md quote at the default decision
QUOTED = {
    Path("research/results/distill/dev-size-power.json"): "dev_size_power",
    Path("research/results/distill/chosen-labels.json"): "chosen_labels",
}


def product_settings() -> dict[str, Any]:
    """The defaults a decision figure depends on: the rule, its limit, and the label-more loop's spending and cap."""
    from sentadapt.config.schema import DEFAULT_DECISION, DEFAULT_RISK, DEFAULT_SPENDING, LABEL_CAP

    return {"rule": DEFAULT_DECISION, "max_risk": DEFAULT_RISK, "spending": DEFAULT_SPENDING, "cap": LABEL_CAP}


def stale(path: Path, record: dict[str, Any], module: str) -> str | None:
    """Why the study in `path` no longer shows the product's default (None when it does)."""
    settings = record.get("settings")
    now = product_settings()
    if settings == now:
        return None
    made = "records no settings (made before studies recorded them)" if settings is None else f"ran with {settings}"
    return (f"{path}: {made}, but the product's defaults are {now}; re-run it: python -m "
            f"research.experiments.{module} --study")
