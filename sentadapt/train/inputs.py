"""Resolve a RunConfig into what the loop trains on: model, recipe, tokenized data, dev evaluator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sentadapt.config import RunConfig
from sentadapt.data.batching import TokenizedExamples
from sentadapt.encoder import Encoder
from sentadapt.errors import DataError
from sentadapt.evaluation.task_types import resolve_dev_set
from sentadapt.recipes import RECIPES
from sentadapt.train.loop import TrainingInputs


def load_training_examples(config: RunConfig, needs: str, encoder: Encoder, note: Callable[[str], None],
                           progress: Callable[[str, int], Any] | None = None) -> TokenizedExamples:
    """The corpus (or NLI files) as memory-mapped token ids, read and tokenized once (`sentadapt.data.prepare`)."""
    from sentadapt.data.prepare import prepare_nli, prepare_sentences

    limit = token_limit(encoder, config.train.max_length)
    if needs == "sentences":
        prepared = prepare_sentences(config.corpus, encoder.tokenizer, limit, text_column=config.text_column,
                                     dedup=config.train.dedup, encoding_errors=config.encoding_errors,
                                     streaming=config.streaming, num_proc=config.num_proc, progress=progress)
    elif needs == "nli":
        files = list(getattr(config.recipe_args, "nli", ()) or ())
        prepared = prepare_nli(files, encoder.tokenizer, limit, num_proc=config.num_proc, progress=progress)
    else:
        raise DataError(f"recipe {config.recipe}: data kind '{needs}' is not supported by the loop")
    for line in prepared.notes:
        note(line)
    return prepared.examples


def token_limit(encoder: Encoder, max_length: int) -> int:
    """The length `Encoder.tokenize_ids` truncates to: --max-length, capped by the position table."""
    limit = encoder.position_limit
    return min(max_length, limit) if limit is not None else max_length


def build_inputs(config: RunConfig, note: Callable[[str], None], device: str | None = None,
                 trust_remote_code: bool = False, allow_pickle: bool = False, stage: str | None = None,
                 progress: Callable[[str, int], Any] | None = None) -> TrainingInputs:
    recipe_class = RECIPES.get(config.recipe)
    dev_name, make_evaluator = resolve_dev_set(config.dev, config.data_dir, config.dev_metric)
    evaluator = make_evaluator() if make_evaluator is not None else None  # bad dev files fail before the model loads
    encoder = Encoder.load(config.base, device=device or "cpu", trust_remote_code=trust_remote_code,
                           allow_pickle=allow_pickle)
    recipe = recipe_class(config.recipe_args, encoder)
    if stage is not None:
        recipe.use_stage(stage)
    custom_loader = getattr(recipe, "load_examples", None)  # recipes with their own data path (CLSR's cache)
    if custom_loader is not None:
        examples = custom_loader(config, encoder, note, progress or _no_progress)
    else:
        examples = load_training_examples(config, recipe.needs, encoder, note, progress)
    return TrainingInputs(config, encoder, recipe, examples, evaluator, dev_name)


@contextmanager
def _no_progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    yield lambda _n: None


def stage_outputs(config: RunConfig, stages: tuple[str, ...]) -> list[tuple[str, RunConfig]]:
    """One RunConfig per stage: earlier stages write to DIR/stage-K-NAME, the last to DIR; each starts from
    the previous stage's model."""
    import dataclasses

    plans: list[tuple[str, RunConfig]] = []
    base = config.base
    for index, stage in enumerate(stages):
        last = index == len(stages) - 1
        output = config.output if last else str(Path(config.output) / f"stage-{index + 1}-{stage}")
        plans.append((stage, dataclasses.replace(config, base=base, output=output)))
        base = output
    return plans
