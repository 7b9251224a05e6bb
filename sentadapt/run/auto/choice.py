"""`adapt --recipe auto`, the run directory's side: the plan, the base model's dev outputs (scored once and
shared by every candidate), each candidate's outcome, the choice (decision/selection.py), the chosen
candidate's model published at the top of OUTPUT, and OUTPUT/metrics.json. No printing (the CLI does it).

    OUTPUT/auto.yaml                      the plan: candidates in training order, what they share
    OUTPUT/base_dev.json                  the base model's dev score and per-unit outputs
    OUTPUT/candidates/NAME/               one `adapt` run per candidate (config.yaml written before any trains)
    OUTPUT/candidates/NAME/auto_outcome.json   its selected checkpoint's dev outputs and its training time
    OUTPUT/metrics.json                   one row per candidate and the choice; written last (= finished)
    OUTPUT/{modules.json, model files}    the chosen candidate's model; absent when the base model is kept
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentadapt.config.merging import load_run_config
from sentadapt.config.schema import RunConfig
from sentadapt.decision.rule import KEEP_BASE, decision_rule
from sentadapt.decision.selection import Choice, choose, weigh_candidates
from sentadapt.errors import ConfigError
from sentadapt.recipes import RECIPES
from sentadapt.run.auto.candidates import AUTO, Candidate, parse_candidates
from sentadapt.run.execute import write_config
from sentadapt.storage.durable import atomic_folder, publish_model, write_text_atomically
from sentadapt.storage.run_folder import OUTCOME_FILE, RunDir, candidate_folder

NEW, RESUME, FINISHED = "new", "resume", "finished"


@dataclass
class CandidateRun:
    candidate: Candidate
    config: RunConfig

    @property
    def folder(self) -> Path:
        return Path(self.config.output)

    @property
    def run_dir(self) -> RunDir:
        return RunDir(self.config.output)

    @property
    def status(self) -> str:
        """finished (its metrics.json is written) | resume (it has a checkpoint) | new (start it from scratch)."""
        if self.run_dir.is_finished():
            return FINISHED
        return RESUME if self.run_dir.has_progress() else NEW


def write_plan(output: Path, runs: Sequence[CandidateRun], shared: dict[str, Any]) -> None:
    """auto.yaml and every candidate's config.yaml, before anything trains: a resumed run rebuilds nothing."""
    import yaml

    for run in runs:
        write_config(run.config)
    plan = {"recipe": AUTO, "candidates": [run.candidate.spec for run in runs], **shared}
    write_text_atomically(RunDir(output).auto_plan, yaml.safe_dump(plan, sort_keys=False))


def read_plan(output: Path) -> list[CandidateRun]:
    """The candidates of an auto run directory, each with its saved config (authoritative, as for --resume)."""
    run_dir = RunDir(output)
    plan = run_dir.read_plan()
    runs = []
    for candidate in parse_candidates(plan.get("candidates") or [], where=str(run_dir.auto_plan)):
        config_file = run_dir.candidate(candidate.name).config_file
        config = load_run_config(config_file, {name: RECIPES.get(name).spec.settings for name in RECIPES})
        config = dataclasses.replace(config, output=str(config_file.parent))  # the directory may have moved since
        runs.append(CandidateRun(candidate, config))
    if not runs:
        raise ConfigError(f"{run_dir.auto_plan}: lists no candidates")
    return runs


def save_base_dev(output: Path, score: float, outputs: dict[str, Any]) -> None:
    run_dir = RunDir(output)
    run_dir.write_json(run_dir.base_dev_file, {"score": score, "outputs": outputs})


def load_base_dev(output: Path) -> tuple[float, dict[str, Any]] | None:
    run_dir = RunDir(output)
    saved = run_dir.read_json(run_dir.base_dev_file)
    return None if saved is None else (float(saved["score"]), saved["outputs"])


def save_outcome(run: CandidateRun, best_outputs: dict[str, Any] | None, seconds: float | None,
                 failed: str | None = None) -> None:
    """Its selected checkpoint's dev outputs and training time; or why it failed (a diverged candidate is left
    out of the choice rather than stopping the others, and a resumed run does not train it again)."""
    run.run_dir.write_json(run.run_dir.outcome_file, {"outputs": best_outputs, "seconds": seconds, "failed": failed})


def failure_of(run: CandidateRun) -> str | None:
    return (load_outcome(run) or {}).get("failed")


def load_outcome(run: CandidateRun) -> dict[str, Any] | None:
    return run.run_dir.read_json(run.run_dir.outcome_file)


def decide_among(runs: Sequence[CandidateRun], evaluator: Any, base_outputs: dict[str, Any],
                 dev_name: str | None) -> Choice:
    """The choice over every candidate that finished (failed ones are left out and not counted in K: they were
    never compared with the base)."""
    rule = decision_rule(runs[0].config)
    scored = []
    for run in runs:
        outcome = load_outcome(run) or {}
        if outcome.get("failed"):
            continue
        if outcome.get("outputs") is None:
            raise ConfigError(f"{run.folder}: no dev outputs ({OUTCOME_FILE}); resume the run with --resume")
        evaluations = (run.run_dir.read_dev_outputs() or {}).get("evaluations") or {}
        scored.append((run.candidate.name, outcome["outputs"], list(evaluations.values())))
    if not scored:
        return Choice(None, KEEP_BASE, "no candidate finished training (see each one's failure in metrics.json)",
                      None, (), rule.name)
    scores, evidence = weigh_candidates(evaluator, base_outputs, scored)
    return choose(scores, dev_name, rule, evidence)


def publish_choice(output: Path, choice: Choice, runs: Sequence[CandidateRun], load_encoder: Any,
                   ) -> tuple[int | None, dict[str, str]]:
    """Copy the chosen candidate's model to the top of OUTPUT (re-saved by THE encoder, so the folder is exactly
    what `adapt` writes); returns its published step and the files written. Keep-base: nothing is published, and
    any model from an earlier choice is not there (a fresh auto run starts from an empty OUTPUT)."""
    if choice.chosen is None:
        return None, {}
    run = next(r for r in runs if r.candidate.name == choice.chosen)
    metrics = run.run_dir.read_metrics() or {}
    encoder = load_encoder(str(run.folder))
    staging = RunDir(output).chosen_staging
    with atomic_folder(staging, {"candidate": choice.chosen}) as folder:
        encoder.save(folder)
    model_files = publish_model(staging, output)
    shutil.rmtree(staging)
    return metrics.get("published_step"), model_files


def write_auto_metrics(output: Path, runs: Sequence[CandidateRun], choice: Choice, base_score: float,
                       evaluator: Any, dev_name: str | None, published_step: int | None,
                       model_files: dict[str, str]) -> dict[str, Any]:
    """OUTPUT/metrics.json: what `decision_of` reads (decision, decision_reason) plus one row per candidate."""
    rows = []
    scores = {score.name: score for score in choice.scores}
    risks = {row["name"]: row["risk"] for row in choice.to_dict()["candidates"]}  # what the risk rule weighed
    for run in runs:
        metrics = run.run_dir.read_metrics() or {}
        outcome = load_outcome(run) or {}
        score = scores.get(run.candidate.name)
        rows.append({
            "name": run.candidate.name, "spec": run.candidate.spec, "recipe": run.candidate.recipe,
            "output": candidate_folder(run.candidate.name), "preset": (run.config.preset or {}).get("name"),
            **(score.to_dict() if score else {"dev_score": None, "dev_change": None, "dev_change_ci": None,
                                              "dev_change_adjusted_ci": None, "eligible": False}),
            "risk": risks.get(run.candidate.name), "failed": outcome.get("failed"),
            "best_step": metrics.get("best_step"),
            "steps": metrics.get("steps"), "seconds": outcome.get("seconds"),
            "run_decision": metrics.get("decision"),  # the candidate alone, as `adapt --recipe NAME` would decide
        })
    first = runs[0].config
    record = {
        "recipe": AUTO, "base_model": first.base, "dev": dev_name, "dev_metric": evaluator.describe_metric(),
        "base_score": base_score, **choice.to_dict(), "risk_limit": first.risk, "candidates": rows,
        "chosen_output": candidate_folder(choice.chosen) if choice.chosen else None,
        "published_step": published_step, "max_steps": first.train.max_steps, "seed": first.train.seed,
        "bootstrap": {"resamples": evaluator.resamples, "seed": evaluator.seed, "paired": True},
        "model_files": model_files,  # what --overwrite may replace besides the run's records (storage/ownership.py)
    }
    RunDir(output).write_metrics(record)
    return record
