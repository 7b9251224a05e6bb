"""RUN/README.md: the run folder's card, the decision first (issue 82).

A run folder is a loadable sentence-transformers model whatever the decision was, so a keep-base run holds weights
the decision rejected: the card says so at its top, and how to use the base instead. It is written when the run
finishes and rewritten by every `decide` (from metrics.json alone: no model is loaded), and listed with its SHA-256
among the run's own files (metrics.json's `model_files`), so `--overwrite` replaces it — unless the user edited it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sentadapt.storage.durable import write_text_atomically
from sentadapt.storage.run_folder import RunDir

CARD_FILE = "README.md"


def card_text(run: RunDir, metrics: dict[str, Any]) -> str:
    """The card: the decision and what to do with it, what it was measured on, how the run trained."""
    decision, base = metrics.get("decision"), metrics.get("base_model") or "the base model"
    look = metrics.get("decision_look") or {}
    path = str(run.path)
    if decision == "use-adapted":
        headline = "**Decision: use the adapted model.**"
        use = f'model = SentenceTransformer("{path}")'
    elif decision == "keep-base" and look.get("verdict") == "more":
        headline = (f"**Decision so far: keep the base model ({base}) — inconclusive.** These weights were not "
                    f"chosen yet: label {look.get('next_labels', 0) - look.get('sizes', [0])[-1]} more pairs and "
                    f"run `sentadapt decide {path} --dev FILE` again.")
        use = f'model = SentenceTransformer("{base}")  # the base, until a decision chooses this run'
    elif decision == "keep-base":
        headline = (f"**Decision: keep the base model ({base}).** The weights in this folder were trained but not "
                    "chosen: they did not show a gain over the base on the labelled pairs.")
        use = f'model = SentenceTransformer("{base}")  # the base: this run was not chosen'
    else:
        headline = (f"**Decision: none yet** — no labelled pairs measured whether this beats {base}. Label pairs where "
                    f"the run moved: `sentadapt pairs CORPUS --run {path} -n 100 --output to-label.tsv`, then "
                    f"`sentadapt decide {path} --dev to-label.tsv`.")
        use = f'model = SentenceTransformer("{path}")  # not measured against the base yet'
    lines = [f"# {run.path.name}: a run of `sentadapt adapt`", "", headline, "",
             f"Why: {metrics.get('decision_reason') or 'no decision recorded'}", "", "## Use", "", "```python",
             "from sentence_transformers import SentenceTransformer", "", use, "```", "",
             f"Compare on held-out pairs: `sentadapt eval {base} {path} --pairs test.tsv`; ship: `sentadapt export "
             f"{path} OUT/` (its card carries this decision).", "", "## Measured", ""]
    lines += _measured(metrics)
    lines += ["", "## Trained", "", f"- recipe: {metrics.get('recipe')}", f"- base model: {base}",
              f"- steps: {metrics.get('steps')} of {metrics.get('total_steps')}; the model published is step "
              f"{metrics.get('published_step')}", "- every setting: `config.yaml`; every evaluation: `metrics.json` "
              "(`history`), `dev_outputs.json`; the log: `train.log`", ""]
    return "\n".join(lines)


def _measured(metrics: dict[str, Any]) -> list[str]:
    if metrics.get("dev") is None:
        return ["Nothing yet: the run had no dev set."]
    interval = metrics.get("dev_change_ci")
    shown = f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else ""
    change = metrics.get("dev_change")
    lines = [f"- labelled pairs: {metrics.get('dev')}",
             f"- base {_score(metrics.get('base_score'))}, adapted {_score(metrics.get('best_score'))}"
             + (f": Δ {change:+.2f}{shown}" if isinstance(change, (int, float)) else "")]
    risk = metrics.get("decision_risk")
    if isinstance(risk, (int, float)):
        lines.append(f"- risk that it is no better: {risk:.2f} (rule: {metrics.get('decision_rule')})")
    return lines


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "–"


def write_card(run: RunDir, metrics: dict[str, Any]) -> dict[str, Any]:
    """Write RUN/README.md and return `metrics` with the card listed among the run's own files (its SHA-256); a run
    recorded before its files were (no `model_files`) gets no card, which `--overwrite` could not tell from a user's."""
    if metrics.get("model_files") is None:
        return metrics
    text = card_text(run, metrics)
    write_text_atomically(run.path / CARD_FILE, text)
    recorded = metrics.get("model_files") or {}
    files = dict(recorded) if isinstance(recorded, dict) else {str(name): None for name in recorded}
    files[CARD_FILE] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return {**metrics, "model_files": files}
