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
                           ) -> TokenizedExamples:
    max_length = config.train.max_length
    if needs == "sentences":
        from sentadapt.data.corpus import read_corpus

        corpus = read_corpus(config.corpus, text_column=config.text_column, dedup=config.train.dedup,
                             encoding_errors=config.encoding_errors)
        note(corpus.report.summary())
        return TokenizedExamples([tokenize_and_report(encoder, corpus.sentences, max_length, note)])
    if needs == "nli":
        from sentadapt.data.nli import read_nli

        files = list(getattr(config.recipe_args, "nli", ()) or ())
        nli = read_nli(files)
        note(f"NLI: {len(nli.labels)} labelled pairs from {', '.join(files)}")
        return TokenizedExamples(
            [tokenize_and_report(encoder, nli.premises, max_length, note, "premises"),
             tokenize_and_report(encoder, nli.hypotheses, max_length, note, "hypotheses")],
            labels=list(nli.labels),
        )
    raise DataError(f"recipe {config.recipe}: data kind '{needs}' is not supported by the loop")


def tokenize_and_report(encoder: Encoder, texts: list[str], max_length: int, note: Callable[[str], None],
                        what: str = "sentences") -> list[list[int]]:
    """Token ids truncated to max_length; says how many texts were longer (their ends are not trained on)."""
    ids = encoder.tokenize_ids(texts, max_length)
    truncated = count_truncated(encoder, texts, ids, max_length)
    if truncated:
        note(f"{truncated} of {len(texts)} {what} are longer than --max-length {max_length} tokens and were "
             "truncated")
    return ids


def count_truncated(encoder: Encoder, texts: list[str], ids: list[list[int]], max_length: int) -> int:
    """Texts cut by truncation: only those that fill max_length exactly are tokenized again, one token longer."""
    full = [text for text, row in zip(texts, ids) if len(row) >= max_length]
    if not full:
        return 0
    longer = encoder.tokenize_ids(full, max_length + 1)
    return sum(len(row) > max_length for row in longer)


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
        examples = load_training_examples(config, recipe.needs, encoder, note)
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
