"""What `adapt` reports at the end of a run, as plain data: the summary table (sentadapt.text_tables) and the lines
saying which defaults the preset chose. The CLI draws them; `AdaptResult.summary` holds the same table."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from sentadapt.config.schema import DEFAULT_RISK, flat_values
from sentadapt.decision.sizes import walk_order
from sentadapt.run.folder_card import CARD_FILE
from sentadapt.text_tables import BAD, GOOD, WARN, Cell, TextTable, some_of
from sentadapt.train.steps import StepPlan


def preset_lines(config: Any) -> list[str]:
    """Which defaults apply and why, and each value the preset changed (paper value → preset value)."""
    from sentadapt.config.merging import YIELDED
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.presets import preset_changes

    preset = config.preset
    if not preset:
        return []
    lines = [f"preset: {preset['name']} ({preset['reason']})"]
    changes = preset_changes(preset, RECIPES.get(config.recipe))
    if not changes:
        kept = f"{config.recipe} declares no tuned-base defaults, so " if preset["name"] == "tuned-base" else ""
        lines.append(f"preset {preset['name']}: {kept}the recipe's paper defaults apply")
    final = {**flat_values(config.train), **dataclasses.asdict(config.recipe_args)}
    for key, old, new in changes:
        source = config.sources.get(f"train.{key}", "")
        overridden = "" if final.get(key) == new else (f" ({source})" if source.startswith(YIELDED) else
                                                       f" (overridden: {final[key]} from the YAML, a flag or --set)")
        lines.append(f"preset {preset['name']}: {key} {old} → {new}{overridden}")
    return lines


@dataclasses.dataclass(frozen=True)
class DryRunDocument:
    """One resolved config as `adapt --dry-run` prints it: notes before it (stderr), the YAML document (stdout, a
    YAML file: its recipe, train and recipe_args are a `--config` file), notes after it (the preset's, the model
    resolved)."""

    before: list[str]
    text: str
    after: list[str]


def dry_run_documents(outcome: Any) -> list[DryRunDocument]:
    """Each config `adapt --dry-run` resolved (an AdaptOutcome's), one per `--recipe auto` candidate."""
    from sentadapt.config.merging import dry_run_yaml

    documents = []
    for index, run in enumerate(outcome.resolved):
        config, base = run.config, run.base
        before = [f"candidate {index + 1}/{len(outcome.configs)}: {outcome.candidates[index]} → {config.output}"
                  ] if outcome.candidates else []
        plans = outcome.plans[index] if outcome.plans else []
        planned = [planned_line(plan, config, run.dev.name is not None,
                                f"stage {number}/{len(plans)} ({plan.stage}): " if plan.stage else "")
                   for number, plan in enumerate(plans, start=1)]
        arithmetic = outcome.arithmetic[index] if outcome.arithmetic else ""
        after = [*preset_lines(config), *planned, *([arithmetic] if arithmetic else []),
                 f"model: {base.name} → {base.location} ({base.source}); nothing loaded (--dry-run)"]
        separator = "---\n" if index and outcome.candidates else ""  # YAML's documents, one per candidate
        documents.append(DryRunDocument(before, separator + dry_run_yaml(config), after))
    return documents


def planned_line(plan: StepPlan, config: Any, scored: bool, stage: str = "") -> str:
    """"planned: 372 steps, 4 passes over 3000 sentences (batch 32); dev every 93 steps": what the run will train,
    its corpus counted as the run reads it. `scored`: the run has a dev set; `stage`: which stage of several
    ("stage 1/2 (sup): ")."""
    if plan.problem is not None:
        return f"planned: {stage}no step; the run would stop with: {plan.problem}"
    train = config.train
    accumulated = f" × grad_accum {train.grad_accum}" if train.grad_accum > 1 else ""
    if not plan.counted:  # a Hub dataset: its size is known once the run has read it
        if plan.steps:
            return (f"planned: {stage}{_count(plan.steps, 'step')} (max_steps), batch {train.batch_size}{accumulated}; "
                    f"the {plan.noun}s are counted when the run reads them")
        return (f"planned: {stage}batch {train.batch_size}{accumulated}; the {plan.noun}s, and so the steps, are "
                "counted when the run reads them")
    # whole passes as counted ("4 passes"), a part of one as the summary will say it ("0.067 of a pass")
    passes = "1 pass" if plan.passes == 1 else \
        f"{plan.passes:.0f} passes" if plan.passes == int(plan.passes) else _passes(plan.passes)
    limit = " (max_steps)" if train.max_steps else ""
    text = (f"planned: {stage}{_count(plan.steps, 'step')}{limit}, {passes} over {_count(plan.examples, plan.noun)} "
            f"(batch {train.batch_size}{accumulated})")
    if not scored:
        return text
    # the loop scores the last step too, so an interval as long as the run is "at the end"
    every = f"; dev every {_count(plan.eval_every, 'step')}"
    return text + (every if 0 < plan.eval_every < plan.steps else "; dev at the end")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def adapt_summary_table(result: Any, config: Any = None) -> TextTable:
    """A finished stage (a TrainResult) of the run `config` (its RunConfig): where it is, how long it ran and on
    what, what ran (the settings, LoRA, prompt, teacher, as the user gave them), the dev scores and the decision
    in plain words."""
    state = result.state
    table = TextTable("sentadapt adapt — summary", show_header=False)
    table.column("")
    table.column("", fold=True)  # a long path (the base model's folder) folds instead of ending in …
    table.row("output", str(result.output))
    table.row("steps", f"{state.step} / {state.total_steps} ({result.stopped})")
    table.row("time", _clock(result.seconds))
    for name, value in environment_rows(result.environment):
        table.row(name, value)
    for name, value in run_rows(config, result.base_model) if config is not None else []:
        table.row(name, value)
    if result.dev_name is None:
        table.row("model kept", f"last step ({result.published_step}); no dev data, selection was blind")
        table.row("decision", Cell("unknown: nothing measured whether this beats the base model; --dev FILE with "
                                   "~100 labelled pairs from your domain would measure it", WARN))
        table.row("card", CARD_ROW.format(card=Path(result.output) / CARD_FILE))
        table.row("next", what_next(result, config))
        return table
    table.row("dev set", result.dev_name)
    table.row("base model dev", _score(state.base_score))
    table.row("best dev", f"{_score(state.best_score)} at step {state.best_step}")
    if result.teacher_table is not None and result.teacher_table.score is not None:
        table.row("teacher dev", teacher_text(result.teacher_table, state.base_score, state.best_score))
    for name, value in distillation_rows(result):
        table.row(name, value)
    table.row("decision", decision_cell(result.decision))
    if result.sizes is not None:
        table.row("smallest size", sizes_text(result.sizes, kept_base=result.decision.decision == "keep-base"))
    if result.decision_note:
        table.row("dev set", Cell(result.decision_note, WARN))  # its weights, and whether it is too small
    table.row("card", CARD_ROW.format(card=Path(result.output) / CARD_FILE))
    table.row("next", what_next(result, config))
    return table


CARD_ROW = "{card}: the decision first, how to use the model, what was measured (each decide rewrites it)"


def what_next(result: Any, config: Any) -> str:
    """What to do with the run, for the decision it reached: label pairs where it moved and decide (no dev set),
    label more (an inconclusive look), use, compare and ship it (use-adapted), or use the base (keep-base)."""
    import shlex

    output = shlex.quote(str(result.output))
    base = shlex.quote(str(result.base_model or getattr(config, "base", None) or "BASE"))
    corpus = " ".join(shlex.quote(str(item)) for item in (getattr(config, "corpus", None) or ["CORPUS"]))
    if result.dev_name is None:
        return (f"label 100 pairs where the run moved: sentadapt pairs {corpus} --run {output} -n 100 --output "
                f"to-label.tsv; once labelled: sentadapt decide {output} --dev to-label.tsv")
    decision = result.decision
    if decision.label_more is not None:
        return "label more pairs (the dev set row above says how), then sentadapt decide on them: see the note"
    if decision.keep_base:
        return (f"use the base model {base}; compare on held-out pairs: sentadapt eval {base} {output} --pairs "
                "test.tsv")
    return (f"use it: SentenceTransformer({str(result.output)!r}); compare on held-out pairs: sentadapt eval {base} "
            f"{output} --pairs test.tsv; ship it: sentadapt export {output} OUT/")


def sizes_text(sizes: dict[str, Any], kept_base: bool = False) -> str:
    """The sizes decision in one line: the smallest size and precision that keeps the gain, or that none does, and
    where the fixed-sequence walk stopped (rows after it are not weighed, however they score: decision/sizes.py).
    `kept_base`: the decision kept the base, so a named size is the adapted model's that scores as the base's
    whole vectors on dev, at less storage. A row's `below` is the share of resamples in which it scores below the
    base's whole vectors: each size's own figure, not the decision's risk (which weighs every evaluated step)."""
    rows = sizes["rows"]
    whole = rows[0]
    reference = f"the base's {whole['dim']} fp32 ({sizes['base_full_score']:.2f})"
    model = "the adapted model's " if kept_base else ""
    kept, stop = sizes["smallest"], _first_failing(rows)
    if kept is None:
        return (f"none: the adapted model's whole {whole['dim']} fp32 vectors do not keep the dev score of "
                f"{reference} ({_weighed(whole)}), so no smaller size is weighed{_unreached(rows, 0)}; metrics.json "
                "has every size")
    row = next(row for row in rows if row["dim"] == kept["dim"] and row["precision"] == kept["precision"])
    if row is whole:
        head = (f"only {model}whole {whole['dim']} fp32 vectors keep the dev score of {reference} ({_weighed(row)}); "
                "no smaller size to export")
    else:
        saving = whole["bytes_per_vector"] / row["bytes_per_vector"]
        head = (f"{model}{row['dim']} {row['precision']}: {row['bytes_per_vector']:g} bytes a vector ({saving:g}× "
                f"smaller), dev {row['score']:.2f}, {_weighed(row)} vs {reference}; `sentadapt export RUN OUT --dim "
                f"{row['dim']}` ships it"
                + ("" if row["precision"] == "fp32" else f", stored as {row['precision']} codes (quantize_embeddings)"))
    return head + ("" if stop is None else _stopped_at(rows, stop))


def _weighed(row: dict[str, Any]) -> str:
    below = "" if row["risk"] is None else f", below it in {100 * row['risk']:.0f} % of resamples"
    return f"Δ {row['delta_vs_base_full']:+.2f} {_interval(row['ci'])}{below}"


def _first_failing(rows: list[dict[str, Any]]) -> int | None:
    """The index of the row where the walk stopped (decision/sizes.named_in_sequence's order), None if none."""
    return next((index for index in walk_order(rows) if not rows[index]["keeps_gain"]), None)


def _stopped_at(rows: list[dict[str, Any]], stop: int) -> str:
    """Where the walk stopped, and a row after it that would have passed alone."""
    failed = rows[stop]
    return f"; the walk stopped at {failed['dim']} {failed['precision']} ({_weighed(failed)}){_unreached(rows, stop)}"


def _unreached(rows: list[dict[str, Any]], stop: int) -> str:
    """A smaller row after the one where the walk stopped that passes alone: never named (the fixed sequence)."""
    order = walk_order(rows)
    unreached = next((rows[i] for i in order[order.index(stop) + 1:] if rows[i]["keeps_gain"]), None)
    if unreached is None:
        return ""
    return (f"; {unreached['dim']} {unreached['precision']}, smaller, passes alone but is not named (a size is "
            "weighed only when every larger one kept the score: docs/sizes.md)")


def distillation_rows(result: Any) -> list[tuple[str, str]]:
    """A distilling run's length in passes, its distillation term averaged over the first and the last 10 % of the
    steps (train.log's lines), and the dev curve."""
    state = result.state
    if state.distill_first is None:
        return []
    passes = result.passes
    length = "" if passes is None else f"{_passes(passes)} over {_count(result.examples, 'example')}; "
    if state.distill_logged == 1:  # a run shorter than log_every: its first step is the one logged
        term = f"term {state.distill_first:.4g} at the one logged step (the run is shorter than log_every)"
    else:
        term = (f"term {state.distill_first:.4g} over the first 10 % of steps → {state.distill_last:.4g} over the "
                "last 10 %")
    rows = [("distillation", length + term)]
    curve = dev_curve(state.history)
    if curve:
        rows.append(("dev curve", curve))
    return rows


def _passes(passes: float) -> str:
    """"2.4 passes"; a run of a few steps keeps two significant digits ("0.016 of a pass"), never "0.0 passes"."""
    if passes >= 0.095:
        return f"{passes:.1f} passes"
    return f"{passes:.2g} of a pass"


def dev_curve(history: list[dict[str, float]], most: int = 8) -> str:
    """"84.97 → 85.40 (s40) → 85.62 (s80)": the dev score at each evaluation (step 0 is the base), the last `most`
    when there were more."""
    points = [f"{point['dev']:.2f}" + (f" (s{point['step']})" if point["step"] else "") for point in history]
    if len(points) < 2:
        return ""
    return " → ".join(points if len(points) <= most else [points[0], "…", *points[-(most - 1):]])


def run_rows(config: Any, base_model: str | None = None) -> list[tuple[str, str]]:
    """What ran, as the user gave it: the base and the recipe, the defaults and every setting that differs from
    them, the effective learning rate, and LoRA, the prompt and the teacher when used. `base_model`: the model the
    decision weighed against when training started from another (a later stage: from the stage before)."""
    from sentadapt.model.lora import settings_of

    train = config.train
    rows = [("base model", shown_path(base_model or config.base))]
    if base_model is not None and base_model != config.base:
        rows.append(("trained from", shown_path(config.base)))
    rows += [("corpus", some_of([shown_path(c) for c in config.corpus])), ("recipe", str(config.recipe))]
    preset = config.preset
    if preset:  # None for runs saved before presets existed
        rows.append(("defaults", f"{preset['name']} ({preset['reason']})"))
    changed = changed_settings(config)
    rows.append(("settings", ", ".join(f"{key} {_value(value)}" for key, value in changed.items())
                 if changed else "the defaults"))
    optim = train.optim
    rows.append(("lr", f"{train.lr:g} (peak; {optim.schedule} decay after {optim.warmup_ratio:.0%} warm-up)"))
    adapters = settings_of(train)
    if adapters is not None:
        rows.append(("LoRA", f"r {adapters.r}, alpha {adapters.alpha:g}, dropout {adapters.dropout:g}, targets "
                             f"{adapters.targets}; the base frozen, the saved model merged"))
    if config.prompt and config.prompt != "none":
        rows.append(("prompt", str(config.prompt)))
    if config.teacher is not None:
        rows.append(("teacher", shown_path(config.teacher)))
    return rows


def changed_settings(config: Any) -> dict[str, Any]:
    """Every training and recipe setting whose value differs from the recipe's defaults under the run's preset
    (what the YAML, the flags and --set changed); the LoRA fields have their own row."""
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.presets import paper_values

    defaults = {**paper_values(RECIPES.get(config.recipe)), **((config.preset or {}).get("values") or {})}
    final = {**flat_values(config.train), **dataclasses.asdict(config.recipe_args)}
    return {key: value for key, value in final.items()
            if key in defaults and value != defaults[key] and not key.startswith("lora_")}


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "+".join(map(str, value)) or "none"
    return str(value)


def decision_cell(decision: Any) -> Cell:
    """The run's decision (decision/rule.py) in plain words: use the adapted model, or keep the base."""
    if decision.keep_base:
        # the path is the `output` row above: a long one would be cut short in this cell
        return Cell(f"keep the base model: {decision.reason}. The run directory (output, above) still holds what "
                    "this run trained (its best checkpoint), for inspection", BAD)
    return Cell(f"use the adapted model (the run directory, output above): {decision.reason}", GOOD)


def teacher_text(teacher: Any, base: float | None, student: float | None) -> str:
    """"84.09 (all-MiniLM-L6-v2); the student keeps 61 % of its +1.08 over the base at 2.0× its speed"."""
    text = f"{teacher.score:.2f} ({teacher.name})"
    share = teacher.gap_closed(base, student)
    speed = "" if teacher.speedup is None else f"the student encodes {teacher.speedup:.1f}× as fast"
    if share is None:
        return text + "; not ahead of the base on this dev set: it has no gain to pass on here" + (
            f" ({speed})" if speed else "")
    assert base is not None and student is not None  # gap_closed gives None without them
    if share <= 0:  # a negative share ("keeps -93 %") reads as nonsense: say what the student scored instead
        return (text + f"; none of its {teacher.score - base:+.2f} over the base reached the student "
                f"({student - base:+.2f}" + (f"; {speed})" if speed else ")"))
    text += f"; the student keeps {100 * share:.0f} % of its {teacher.score - base:+.2f} over the base"
    return text + (f" at {teacher.speedup:.1f}× its encode speed" if speed else "")


def environment_rows(env: dict[str, Any]) -> list[tuple[str, str]]:
    """Where and how the run trained (metrics.json's "environment"), as summary rows."""
    if not env:
        return []
    processes = f"{env['processes']} process" + ("es" if env["processes"] > 1 else "")
    backend = f", {env['distributed']}/{env['backend']}" if env["backend"] else ""
    versions = ", ".join(f"{name} {version}" for name, version in env["versions"].items())
    reason = f" ({env['precision_reason']})" if env.get("precision_reason") else ""
    chunks = "" if env.get("pass_cost") is None else f", length chunks where they save over {env['pass_cost']} tokens"
    return [
        ("ran on", f"{processes} on {env['device']}{backend}, mixed precision {env['mixed_precision']}{reason}"
                   + ("" if env.get("tf32") is None else f", TF32 {'on' if env['tf32'] else 'off'}") + chunks),
        ("batch", f"{env['global_batch']} global ({env['per_process_batch']} per process) × grad_accum "
                  f"{env['grad_accum']}, seed {env['seed']}"),
        ("versions", versions),
    ]


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def auto_table(record: dict[str, Any]) -> TextTable:
    """`--recipe auto` (auto_outcome.json's record): one row per candidate — dev score, Δ, its plain CI, what the
    decision rule weighed (strict: the Bonferroni-adjusted CI; risk: the candidate's max-T risk, for those the
    fixed sequence tested), best step, time — the chosen one marked. Columns are named after the rule used."""
    rule = record.get("decision_rule") or "strict"
    confidence = record["adjustment"]["confidence"]
    steps = {row["steps"] for row in record["candidates"] if row["steps"] is not None} or {0}
    if rule == "strict":
        weighed = "adjusted CI" if confidence is None else f"{100 * confidence:.2f} % CI".replace(".00 %", " %")
        how = f"decision rule: strict, {weighed} = Bonferroni over the candidates"
    elif rule == "risk":
        weighed = "risk"
        how = (f"decision rule: risk ≤ the first look's share of --risk {record.get('risk_limit', DEFAULT_RISK):g}, "
               "candidates tested in order (fixed sequence), each one's risk max-T over its own checkpoints")
    else:
        weighed, how = None, "decision rule: positive (any dev Δ > 0)"
    table = TextTable(f"sentadapt adapt --recipe auto — {len(record['candidates'])} candidates, "
                      f"{'/'.join(map(str, sorted(steps)))} steps each, on {record['dev']} (base model "
                      f"{record['base_score']:.2f}); {how}")
    # the name is the folder under candidates/: folded onto a second line when the terminal is narrow, never cut
    table.column("candidate", fold=True)
    headers = ["dev", "Δ, 95 % CI", *([weighed] if weighed else []), "step", "time"]  # step: the one chosen
    for header in headers:
        interval = header.endswith("CI")  # the cells that may wrap on a narrow terminal (the interval below)
        table.column(header, right=True, fold=interval, whole=not interval)
    any_risk = any(row.get("risk") is not None for row in record["candidates"])
    for row in record["candidates"]:
        if row.get("failed"):
            table.row(row["name"], Cell("failed", BAD), *["–"] * (len(headers) - 2), _clock(row["seconds"]))
            continue
        chosen = row["name"] == record["chosen"]
        if rule == "strict":
            weighed_cells = [_interval(row["dev_change_adjusted_ci"])]
        elif rule == "risk":  # no risk: not tested (the walk stopped before it), or none computed (bootstrap off)
            weighed_cells = [f"{row['risk']:.3f}" if row.get("risk") is not None
                             else "untested" if any_risk else "–"]
        else:
            weighed_cells = []
        change = f"{row['dev_change']:+.2f}" + (f" {_interval(row['dev_change_ci'])}" if row["dev_change_ci"] else "")
        table.row(Cell(("→ " if chosen else "") + row["name"], GOOD if chosen else ""), f"{row['dev_score']:.2f}",
                  change, *weighed_cells, str(row["best_step"]), _clock(row["seconds"]))
    return table


def auto_verdict(record: dict[str, Any], output: Any) -> Cell:
    """The choice of an auto run in one line, toned good (a candidate is used) or bad (the base is kept)."""
    from sentadapt.storage.run_folder import RunDir

    reason = record["decision_reason"]
    if record["chosen"] is None:
        return Cell(f"keep the base model: {reason}. Nothing is published at {output}; each candidate's run stays "
                    f"in {RunDir(output).candidates}", BAD)
    return Cell(f"use {record['chosen']} (published at {output}): {reason}", GOOD)


def _clock(seconds: float | None) -> str:
    return "–" if seconds is None else time.strftime("%H:%M:%S", time.gmtime(seconds))


def _interval(values: list[float] | None) -> str:
    return "–" if not values else f"[{values[0]:+.2f}, {values[1]:+.2f}]"


def shown_path(value: str) -> str:
    """A path of the run as the user likely typed it: config.yaml keeps paths absolute; the summary shows the
    shorter of that and the path relative to the working directory (Hub ids as they are)."""
    if not os.path.isabs(value):
        return value
    relative = os.path.relpath(value)
    return relative if len(relative) < len(value) else value
