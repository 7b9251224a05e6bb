"""Which look of the label-more loop a decision is, from the decisions the run recorded (issue 83).

Every decision the run records keeps a short key of each labelled row it read (Evaluator.row_keys: the pair and its
label). A later `decide` whose labels hold all of an earlier decision's — the next round's file, or the user's own
file grown by more rows — is a later look of the same loop: the risk limit it is held to is the one the looks share
(decision/sequential.py), however the labels grew, so deciding again on more labels is not a second chance for
noise. Growing labels under another rule or limit than the earlier look's is refused (it would pick the rule after
seeing an answer), as deciding the same labels again is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentadapt.decision.rule import DEFAULT_RISK, DecisionRule
from sentadapt.errors import ConfigError


def history_of(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Every decision recorded for the run, oldest first: `adapt`'s own (when it made one), then each `decide`."""
    history = list(metrics.get("decisions") or [])
    if not history and metrics.get("decision") is not None:  # the run's own decision, first
        history.append({"by": "sentadapt adapt", "dev": metrics.get("dev"), "labels": metrics.get("dev_labels"),
                        "decision": metrics.get("decision"), "reason": metrics.get("decision_reason"),
                        "risk": metrics.get("decision_risk"),
                        "rule": metrics.get("decision_settings") or {"rule": metrics.get("decision_rule"),
                                                                     "max_risk": None}})
    return history


def rule_of(entry: dict[str, Any]) -> DecisionRule | None:
    """The rule an entry of the history decided by (records of older versions name the rule alone)."""
    rule = entry.get("rule")
    name, limit = (rule.get("rule"), rule.get("max_risk")) if isinstance(rule, dict) else (rule, None)
    if name is None:
        return None
    return DecisionRule(str(name), DEFAULT_RISK if limit is None else float(limit))


def same_rule(first: DecisionRule, second: DecisionRule) -> bool:
    return first.name == second.name and (first.name != "risk" or abs(first.risk - second.risk) < 1e-12)


def rule_words(rule: DecisionRule) -> str:
    return f"the risk rule at {rule.risk:g}" if rule.name == "risk" else f"the {rule.name} rule"


def rule_flags(rule: DecisionRule) -> str:
    return f"--decision risk --risk {rule.risk:g}" if rule.name == "risk" else f"--decision {rule.name}"


# An earlier look counts when the new labels hold nearly all of its rows: a user who grows the file may also delete a
# few rows found unjudgeable on a second reading (10 % of them), and that is still a later look, not a fresh start.
KEPT_SHARE = 0.9


def _extended(earlier: set[str], current: set[str]) -> bool:
    return len(earlier & current) >= KEPT_SHARE * len(earlier)


def earlier_looks(metrics: dict[str, Any], keys: list[str] | None, rule: DecisionRule, dev: Path,
                  redecide: bool) -> list[int]:
    """The labels of each earlier look whose rows these labels extend (KEPT_SHARE of them at least; sorted sizes,
    fewer than these); one under
    another rule or limit is refused without --redecide (module docstring). Nothing without row keys (a named dev
    set, or decisions recorded before issue 83)."""
    if not keys:
        return []
    current = set(keys)
    sizes: set[int] = set()
    for entry in history_of(metrics):
        earlier = (entry.get("labels") or {}).get("row_keys")
        decided_by = rule_of(entry)
        if not earlier or decided_by is None or len(earlier) >= len(current) or not _extended(set(earlier), current):
            continue
        if not same_rule(decided_by, rule) and not redecide:
            raise ConfigError(f"--dev {dev}: these labels extend the {len(earlier)} labelled pairs decided on by "
                              f"{entry.get('by')} ({entry.get('decision')}, {rule_words(decided_by)}); the looks of "
                              f"the label-more loop share one rule and limit: keep {rule_flags(decided_by)}, or pass "
                              "--redecide to start anew")
        if same_rule(decided_by, rule):
            sizes.add(len(earlier))
    return sorted(sizes)
