"""Resolve a RunConfig into what the loop trains on: model, recipe, tokenized data, dev evaluator."""

from __future__ import annotations

from typing import Any

from sentadapt.config.schema import RunConfig
from sentadapt.data.readers import TrainingData
from sentadapt.errors import ConfigError
from sentadapt.events import Note, Progress, no_progress
from sentadapt.model import lora
from sentadapt.model.encoder import Encoder
from sentadapt.model.prompts import PAIR
from sentadapt.recipes.matryoshka import Matryoshka
from sentadapt.run.plan import ResolvedRun, resolve_run
from sentadapt.storage.run_folder import RunDir
from sentadapt.teacher import teacher_table
from sentadapt.train.compute import training_processes
from sentadapt.train.loop import TrainingInputs


def training_data(config: RunConfig, prompt: str = "") -> TrainingData:
    """What a recipe's `load_examples` reads: the run's inputs and reading options, and the prompt text."""
    return TrainingData(sources=tuple(config.corpus), max_length=config.train.max_length,
                        text_column=config.text_column, dedup=config.train.dedup,
                        encoding_errors=config.encoding_errors, streaming=config.streaming, num_proc=config.num_proc,
                        encode_batch_size=config.train.evaluation.eval_batch_size, prompt=prompt)


def training_prompt(config: RunConfig, encoder: Encoder, note: Note) -> str:
    """The text `--prompt` names ("" for none); the encoder learns its length, which forward() leaves out of
    pooling when the base's Pooling says include_prompt: false (as sentence-transformers trains and encodes)."""
    name = encoder.prompts.name_for(PAIR, config.prompt, encoder.name)
    prompt = encoder.prompts.for_side(PAIR, name, encoder.name)
    encoder.configure(train_prompt_length=encoder.prompt_length(prompt, config.train.max_length))
    if prompt:
        pooled = "pooled" if encoder.prompts.include_prompt else "not pooled (include_prompt: false)"
        note(f"prompt: every training sentence starts with {name} {prompt!r}, {pooled}")
    return prompt


def build_inputs(run: ResolvedRun | RunConfig, note: Note, device: str | None = None,
                 trust_remote_code: bool = False, allow_pickle: bool = False, stage: str | None = None,
                 progress: Progress | None = None,
                 base_dev: tuple[float, dict[str, Any]] | None = None) -> TrainingInputs:
    """`run`: the stage's run as check_run resolved it (a bare RunConfig, as tests and bench build, is resolved
    here). `base_dev`: the base model's (dev score, per-unit outputs) when already known (--recipe auto shares
    them); with a teacher the base is scored here when it is not, once, to weigh the teacher against before
    training."""
    run = run if isinstance(run, ResolvedRun) else resolve_run(run)
    config = run.config
    evaluator = run.dev.evaluator  # read once per run (check_run read it already); bad files fail before loading
    encoder = Encoder.load(run.base, device=device or "cpu", trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
    adapters = lora.settings_of(config.train)
    if adapters is not None:  # a target that names no layer fails now, not after the corpus and the base score
        lora.target_modules(encoder.backbone, adapters.targets)
    recipe = run.recipe_class(config.recipe_args, encoder, stage)
    width = recipe.exported_width(encoder)
    Matryoshka.of(config.train.dims.matryoshka, config.train.dims.matryoshka_weights).check_width(width)
    sizes = config.train.dims.matryoshka
    if sizes and sizes[0] < width:  # the loss then weighs prefixes only: the whole vector is not trained as such
        note(f"--matryoshka {','.join(map(str, sizes))}: the loss weighs these sizes only, so the model's whole "
             f"{width}-dimensional vectors are not trained as such; list {width} first (--matryoshka "
             f"{','.join(map(str, (width, *sizes)))}) to keep them")
    dev_sizes = config.train.dims.sizes
    if dev_sizes and max(dev_sizes) > width:
        raise ConfigError(f"--sizes: {max(dev_sizes)} is above this model's embedding width {width}; list sizes up to "
                          f"{width}")
    data = training_data(config, training_prompt(config, encoder, note))
    examples = recipe.load_examples(data, encoder, note, progress or no_progress)
    table = None
    if config.teacher is not None:  # its vectors of these examples, once, before training
        if base_dev is None and evaluator is not None:  # the loop reuses it
            base_dev = base_dev_outputs(evaluator, encoder, config)
        table = teacher_table(config, examples, device or "cpu", note, progress or no_progress, trust_remote_code,
                              allow_pickle, evaluator, student=encoder, base_dev=base_dev,
                              teacher_source=run.teacher_source, processes=training_processes())
    return TrainingInputs(config, encoder, recipe, examples, evaluator, run.dev.name, base_dev=base_dev,
                          teacher_table=table)


def base_dev_outputs(evaluator: Any, encoder: Encoder, config: RunConfig) -> tuple[float, dict[str, Any]]:
    """(dev score, per-unit outputs) of the base model as the loop scores it (no intervals)."""
    report = evaluator(encoder, batch_size=config.train.evaluation.eval_batch_size, intervals=False)
    return report.average, evaluator.outputs_of(report)


def stage_outputs(config: RunConfig, stages: tuple[str, ...]) -> list[tuple[str, RunConfig]]:
    """One RunConfig per stage, writing to the stage's run directory (RunDir.stages); each starts from the previous
    stage's model."""
    import dataclasses

    plans: list[tuple[str, RunConfig]] = []
    base = config.base
    for stage, folder in zip(stages, RunDir(config.output).stages(stages), strict=True):
        output = str(folder.path)
        plans.append((stage, dataclasses.replace(config, base=base, output=output)))
        base = output
    return plans
