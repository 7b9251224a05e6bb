"""`sentadapt decide RUN --dev FILE`: decide again, on new or more labels, without training.

The run's published model is weighed against its base model on the dev file, as `adapt` weighs its best checkpoint:
the paired Δ, its bootstrap CI (the design's, when the file carries weights from `pairs --teacher/--run`) and the
risk that the model is no better. What the labels were used for before decides what the risk pays for:
- labels the run never saw (the usual case: `pairs --run` after a run without a dev set): nothing was chosen on them,
  so the risk is the one-sided bootstrap risk of one option;
- the very pairs the run chose its checkpoint on (the per-pair outputs of its base model match the stored ones): the
  choice is paid for again with the max-T rule over every evaluation the run made (a `--recipe auto` run: every
  candidate's; evaluation/evidence.py), on the labels as they are now.
The decision replaces the run's in metrics.json (what `export` and the model card read), with the dev fields beside
it (dev, dev_labels, dev_change, its CI and evidence, the scores), and is appended, with the labels it read, to
metrics.json's `decisions`. Labels already decided on (the same rows, in any file or format) are not decided on
again under another rule or risk limit unless asked (`--redecide`): trying rules until one says use-adapted is a
decision shopped for.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.pair_files import design_path
from sentadapt.decision.rule import (
    DEFAULT_RISK,
    DEFAULT_RULE,
    Decision,
    DecisionRule,
    decide,
    evidence_record,
    small_dev_note,
)
from sentadapt.errors import ConfigError
from sentadapt.evaluation.bootstrap import few_labels_note
from sentadapt.evaluation.evaluator import Delta, Evaluator, dev_evidence
from sentadapt.evaluation.evidence import Evidence
from sentadapt.events import Progress
from sentadapt.options import ENCODE_BATCH_SIZE, checked
from sentadapt.pairs.design import Design, labels_record, read_design
from sentadapt.pairs.rounds import NextRound, write_next_round
from sentadapt.run.folder_card import write_card
from sentadapt.run.looks import earlier_looks, history_of, rule_flags, rule_of, rule_words, same_rule
from sentadapt.storage.run_folder import RunDir
from sentadapt.text_tables import Cell

SAME_OUTPUTS = 1e-4  # |cosine| difference within which stored per-pair outputs are the same pairs re-encoded


@dataclass
class DecideResult:
    """What `decide_again` weighed and decided; `decision` is also in RUN/metrics.json."""

    run: Path
    metrics_file: Path  # where the decision is recorded
    dev: Path
    base_model: str
    pairs: int
    weighted: bool
    design: Design | None
    base_score: float
    adapted_score: float
    delta: Delta
    evidence: Evidence | None
    decision: Decision
    choice_paid: bool  # the labels are those the run chose its checkpoint on: the choice is paid again
    deleted: int  # rows of the design's file no longer there (deleted as unjudgeable)
    notes: list[str] = field(default_factory=list)
    replaces: str | None = None  # the decision this one replaces, in words (None: the run had none)
    next_round: NextRound | None = None  # an inconclusive look's next file to label (pairs/rounds.py)

    def lines(self) -> list[Cell]:
        """What `sentadapt decide` prints: the estimate and what it stands for, the decision (strong), where it is
        recorded."""
        population = (("estimated for your corpus's pairs (the domain: the "
                       f"{self.design.candidates} candidates proposed from it, weighted)") if self.design
                      and self.design.domain == "corpus" else
                      f"estimated for the {self.design.candidates} candidates they were chosen from (weighted)"
                      if self.design else "weighted by the file's 'weight' column" if self.weighted
                      else "the pairs themselves")
        deleted = f"; {self.deleted} of the design's pairs were deleted" if self.deleted else ""
        verdict = "label more" if self.decision.label_more is not None else (
            "keep the base model" if self.decision.keep_base else "use the adapted model")
        replaced = f", replacing {self.replaces}" if self.replaces else ""
        few = few_labels_note(f"--dev {self.dev}", self.pairs, "pairs")
        return [Cell(f"{self.pairs} labelled pairs in {self.dev}: {population}{deleted}"),
                *([Cell(few, "warn")] if few else []),
                Cell(f"base {self.base_model}: {self.base_score:.2f}; the run's model: {self.adapted_score:.2f}; "
                     f"Δ {self.delta}"),
                *([Cell("these are the pairs the run chose its checkpoint on: the risk pays for that choice again")]
                  if self.choice_paid else []),
                Cell(f"{verdict}: {self.decision.reason}", "strong"),
                *[Cell(f"note: {note}") for note in self.notes],
                Cell(f"recorded in {self.metrics_file}{replaced} (every decision stays in its 'decisions')"),
                *([Cell(f"next: {self.next_step()}")] if self.next_step() else [])]

    def next_step(self) -> str | None:
        """What to do for the decision reached (an inconclusive look's next round is in the notes above)."""
        if self.decision.label_more is not None:
            return None
        if self.decision.keep_base:
            return f"use the base model {self.base_model}"
        return (f"use the run's model: SentenceTransformer({str(self.run)!r}); ship it: sentadapt export {self.run} "
                "OUT/")


@checked({"run": "RUN", "dev": "--dev"})
def decide_again(run: Path, dev: Path, decision: str = DEFAULT_RULE, risk: float = DEFAULT_RISK,
                 batch_size: int = ENCODE_BATCH_SIZE, max_length: int | None = None, device: str | None = None,
                 trust_remote_code: bool = False, allow_pickle: bool = False,
                 progress: Progress | None = None, redecide: bool = False) -> DecideResult:
    """Weigh the run's model against its base on `dev` and record the decision (module docstring)."""
    from sentadapt.evaluation.task_types import resolve_dev_set

    folder = RunDir(run)
    metrics = folder.finished_metrics(str(run))
    base_model = str(metrics.get("base_model") or "")
    design = read_design(dev) if dev.is_file() else None
    if design is not None:
        check_design_base(dev, design, base_model, run)
    rule = DecisionRule(decision, risk)
    name, factory = resolve_dev_set(str(dev), None)
    assert factory is not None
    evaluator = factory()
    digest = evaluator.labels_digest()
    check_not_shopping(metrics, dev, digest, rule, redecide)
    keys = evaluator.row_keys()
    earlier = earlier_looks(metrics, keys, rule, dev, redecide)
    score = functools.partial(scored, evaluator, batch_size=batch_size, max_length=max_length, device=device,
                              trust_remote_code=trust_remote_code, allow_pickle=allow_pickle, progress=progress)
    base_outputs = score(base_model)
    adapted_outputs = score(str(folder.path))
    delta = evaluator.compare_outputs(base_outputs, adapted_outputs)
    stored = stored_choice(folder, adapted_outputs, base_outputs)
    evidence = selection_evidence(evaluator, base_outputs, adapted_outputs, stored)
    task = evaluator.tasks[0]
    metric = evaluator.metric or task.main_metric
    made = decide(delta.value, delta.interval, f"{name} by {metric} × 100", evidence, rule,
                  no_gain="the run's model does not beat the base model", earlier=earlier)
    # an inconclusive look says what to label next instead of how many labels a gain of 0.5 would need
    small = small_dev_note(evidence, rule, made.look) if made.label_more is None else None
    notes = [note for note in (design_note(dev, design, run), small) if note]
    next_round = label_more(made, evidence, dev, run, notes)
    result = DecideResult(
        run=folder.path, metrics_file=folder.metrics_file, dev=dev, base_model=base_model, pairs=evaluator.units(),
        weighted=task.weights is not None,
        design=design, base_score=evaluator.from_outputs(base_outputs).average,
        adapted_score=evaluator.from_outputs(adapted_outputs).average, delta=delta, evidence=evidence, decision=made,
        choice_paid=stored is not None, deleted=max(0, design.pairs - evaluator.units()) if design else 0,
        notes=notes, replaces=describe_current(metrics), next_round=next_round)
    try:
        record(folder, metrics, result, rule, evaluator.describe_metric(), digest, keys)
    except OSError as error:  # a read-only or full disk: the decision is still said, with what was not written
        from sentadapt.errors import StorageError
        from sentadapt.storage.durable import describe_write_failure

        verdict = "keep the base model" if made.keep_base else "use the adapted model"
        raise StorageError(f"{folder.metrics_file}: could not be written ({describe_write_failure(error) or error});"
                           f" the decision, not recorded: {verdict}: {made.reason}") from None
    return result


def label_more(made: Decision, evidence: Evidence | None, dev: Path, run: Path, notes: list[str],
               ) -> NextRound | None:
    """An inconclusive look: the next round's file when the dev file's design can be continued (pairs/rounds.py),
    else a note saying how many more labels to add to the file; either way the chance the next look settles it, at
    the Δ measured."""
    import shlex

    from sentadapt.decision.sequential import conditional_power, look_of

    look, more = made.look, made.label_more
    if look is None or more is None or evidence is None:
        return None
    later = look_of([*look.sizes, more], look.alpha, look.spending)
    z = evidence.change / evidence.spread if evidence.spread > 0 else float("nan")
    chance = conditional_power(z, look.sizes[-1], more, later.limit)
    odds = f"at the Δ measured, the next look uses the adapted model with a chance of ~{100 * chance:.0f} %" if (
        chance == chance) else ""
    written = write_next_round(dev, more, lambda path: " ".join(
        shlex.quote(word) for word in ["sentadapt", "decide", str(run), "--dev", str(path)]))
    if written is not None:
        notes.append(f"the next round: {written.added} new pairs to label in {written.path} (with the "
                     f"{written.labelled} labelled ones and every weight for {written.total} pairs); {odds}")
    else:
        notes.append(f"label {more - look.sizes[-1]} more pairs of your domain, drawn as these were, add them to "
                     f"{dev} and run this again: the looks are counted, so the risk stays valid; {odds}")
    return written


def check_not_shopping(metrics: dict[str, Any], dev: Path, rows: str | None, rule: DecisionRule,
                       redecide: bool) -> None:
    """Labels decided on before under another rule or limit: refused without --redecide. The same labels are the
    same (pair, label, weight) rows (`rows`: their digest), in whatever file, format or order they come — a blank
    line, rows reordered, the .tsv saved as .parquet; a record written before rows were digested is matched by the
    file's bytes."""
    import hashlib

    if redecide or not dev.is_file():
        return
    digest = hashlib.sha256(dev.read_bytes()).hexdigest()
    for entry in history_of(metrics):
        labels = entry.get("labels") or {}
        earlier = rule_of(entry)
        same = (labels.get("rows_sha256") == rows) if rows and labels.get("rows_sha256") else (
            labels.get("sha256") == digest)
        if not same or earlier is None or same_rule(earlier, rule):
            continue
        where = labels.get("file")
        named = "" if not where or Path(where) == dev else f", as in {where}"
        raise ConfigError(f"--dev {dev}: these labels ({labels.get('pairs')} labelled pairs{named}) were decided on "
                          f"already by "
                          f"{entry.get('by')} ({entry.get('decision')}, {rule_words(earlier)}); deciding again on "
                          f"them by {rule_words(rule)} picks the rule after seeing its answer; keep "
                          f"{rule_flags(earlier)}, label new pairs, or pass --redecide to replace it anyway")


def describe_current(metrics: dict[str, Any]) -> str | None:
    """The run's decision now, in words, for the line that says what a new decision replaces."""
    history = history_of(metrics)
    if not history:
        return None
    last = history[-1]
    labels = last.get("labels") or {}
    on = labels.get("file") or last.get("dev")
    risk = last.get("risk")
    return (f"{last.get('decision')} by {last.get('by')}" + (f" on {on}" if on else "")
            + (f" (risk {risk:.2f})" if isinstance(risk, (int, float)) else ""))


def design_note(dev: Path, design: Design | None, run: Path) -> str | None:
    """Pairs chosen where another run disagreed with the base: the weights still estimate the candidates' Δ, but
    the labels were not spent where this run differs."""
    if design is None or design.guide != "run":
        return None
    if Path(design.guide_model).expanduser().resolve() == Path(run).expanduser().resolve():
        return None
    return (f"{design_path(dev).name}: its pairs were chosen where {design.guide_model} differs from the base, not "
            f"{run}; the weighted Δ still estimates the {design.candidates} candidates', with a wider interval than "
            f"pairs chosen for this run (sentadapt pairs --run {run})")


def check_design_base(dev: Path, design: Design, base_model: str, run: Path) -> None:
    """Pairs chosen for another base model stand for another comparison: refuse them, naming both."""
    from sentadapt.pairs.chosen import same_model

    if not same_model(design.base, base_model) and Path(design.base).name != Path(base_model).name:
        raise ConfigError(f"--dev {dev}: its pairs were chosen for the base model {design.base} "
                          f"({dev.name}.design.json), but {run} adapted {base_model}; choose pairs for this run "
                          f"(sentadapt pairs --run {run})")


def scored(evaluator: Evaluator, model: str, batch_size: int, max_length: int | None, device: str | None,
           trust_remote_code: bool, allow_pickle: bool, progress: Progress | None) -> dict[str, Any]:
    """The model's per-unit outputs on the dev set (no intervals: the comparison draws them, paired)."""
    from contextlib import nullcontext

    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(model, max_length=max_length, device=device, trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
    with progress(f"encoding {encoder.name}", evaluator.encodings(encoder)) if progress else nullcontext(
            None) as advance:
        report = evaluator(encoder, batch_size=batch_size, max_length=max_length, progress=advance, intervals=False)
    return Evaluator.outputs_of(report)


def stored_choice(folder: RunDir, adapted_outputs: dict[str, Any], base_outputs: dict[str, Any],
                  ) -> tuple[list[dict[str, Any]], int] | None:
    """(every evaluation the run made on these dev pairs, the index of the published model among them) when these are
    the pairs it chose on: a stored base model's outputs are these, pair for pair (a `--recipe auto` run: any of its
    candidates'). None otherwise (new labels: nothing was chosen on them)."""
    runs = [folder]
    if folder.is_auto() and folder.candidates.is_dir():
        runs = [RunDir(path) for path in sorted(folder.candidates.iterdir()) if path.is_dir()]
    options: list[dict[str, Any]] = []
    for run in runs:
        saved = run.read_dev_outputs()
        if saved and "base" in saved and same_outputs(saved["base"], base_outputs):
            options += [rename(saved["evaluations"][step], base_outputs)
                        for step in sorted(saved.get("evaluations") or {}, key=int)]
    if not options:
        return None
    # the published model is one of them (its outputs, re-encoded); if none matches, it counts as one more option
    chosen = next((index for index, outputs in enumerate(options) if same_outputs(outputs, adapted_outputs)), None)
    if chosen is None:
        options.append(adapted_outputs)
        chosen = len(options) - 1
    return options, chosen


def same_outputs(stored: dict[str, Any], fresh: dict[str, Any]) -> bool:
    if len(stored) != 1 or len(fresh) != 1:
        return False
    (first,), (second,) = stored.values(), fresh.values()
    if first.keys() != second.keys():
        return False
    return all(len(first[key]) == len(second[key]) and
               bool(np.allclose(first[key], second[key], atol=SAME_OUTPUTS)) for key in first)


def rename(outputs: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    """Stored outputs under the task name of the evaluator reading them (the file may have been renamed)."""
    ((_, values),), ((name, _),) = outputs.items(), like.items()
    return {name: values}


def selection_evidence(evaluator: Evaluator, base: dict[str, Any], adapted: dict[str, Any],
                       stored: tuple[list[dict[str, Any]], int] | None) -> Evidence | None:
    """The evidence for the run's model: alone (new labels), or paid for among the run's stored evaluations."""
    options, chosen = stored if stored is not None else ([adapted], 0)
    return dev_evidence(evaluator, base, options, chosen)


def record(folder: RunDir, metrics: dict[str, Any], result: DecideResult, rule: DecisionRule, metric: str,
           rows: str | None, keys: list[str] | None) -> None:
    """The decision becomes the run's (metrics.json's decision and dev fields: what `export`, the model card and
    `eval` read) and joins its history, with its labels (and their row keys: a later look finds its earlier ones)."""
    labels = labels_record(result.dev, result.pairs, result.weighted, rows, keys)
    interval = list(result.delta.interval) if result.delta.interval else None
    history = history_of(metrics)
    history.append({
        "by": "sentadapt decide", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "labels": labels,
        "delta": result.delta.value, "ci": interval,
        "choice_paid": result.choice_paid, "evidence": evidence_record(result.evidence, rule, result.decision.look),
        "decision": result.decision.decision, "reason": result.decision.reason, "risk": result.decision.risk,
        "rule": rule.to_dict(), "look": result.decision.to_dict()["decision_look"],
        "next_round": None if result.next_round is None else str(result.next_round.path)})
    current = {"dev": str(result.dev), "dev_labels": labels, "dev_metric": metric, "base_score": result.base_score,
               "best_score": result.adapted_score, "dev_change": result.delta.value, "dev_change_ci": interval,
               "dev_change_ci_excludes_0": result.delta.significant, "improved": result.delta.value > 0,
               "dev_evidence": evidence_record(result.evidence, rule, result.decision.look),
               "dev_note": "; ".join(result.notes) or None, "decision_settings": rule.to_dict()}
    folder.write_metrics(write_card(folder, {**metrics, **current, **result.decision.to_dict(), "decisions": history}))
