"""The run's decision: use the adapted model, or keep the base model.

One rule, used by the summary, metrics.json, the trackers, the model card and `--require-improvement`:
use the adapted model only when its dev score beats the base model's (Δ > 0) and the paired 95 %
bootstrap interval of Δ excludes 0. A Δ whose interval includes 0 is within noise: the base model is kept,
because nothing shows the adapted one is better. Without a bootstrap (resamples 0) a positive Δ decides,
and the reason says no interval was computed. Without a dev set nothing was measured: no decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

USE_ADAPTED = "use-adapted"
KEEP_BASE = "keep-base"


@dataclass(frozen=True)
class Decision:
    decision: str | None  # use-adapted | keep-base | None (no dev set)
    reason: str  # one line: the Δ, its interval and why

    @property
    def keep_base(self) -> bool:
        return self.decision == KEEP_BASE


def decide(dev_change: float | None, interval: Sequence[float] | None, dev_name: str | None) -> Decision:
    """The decision from the dev Δ (best − base) and its paired 95 % CI (None: bootstrap off)."""
    if dev_change is None:
        return Decision(None, "unknown: no dev set, so nothing measured whether the adapted model beats the base "
                              "model")
    shown = f"Δ {dev_change:+.2f}" + (f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "")
    on = f" on {dev_name}" if dev_name else ""
    if dev_change <= 0:
        return Decision(KEEP_BASE, f"no checkpoint beat the base model{on} ({shown})")
    if interval is None:
        return Decision(USE_ADAPTED, f"the adapted model beats the base model{on} ({shown}); no confidence "
                                     "interval was computed (bootstrap off)")
    if interval[0] <= 0:
        return Decision(KEEP_BASE, f"within noise{on} ({shown}): the paired 95 % CI includes 0")
    return Decision(USE_ADAPTED, f"the adapted model beats the base model{on} ({shown}): the paired 95 % CI "
                                 "excludes 0")


def decision_of(metrics: Mapping[str, Any]) -> Decision:
    """A run record's decision: as recorded, or decided from its Δ for runs recorded before decisions were."""
    if "decision" in metrics:
        return Decision(metrics["decision"], str(metrics.get("decision_reason") or ""))
    return decide(metrics.get("dev_change"), metrics.get("dev_change_ci"), metrics.get("dev"))
