"""What a recipe's `load_examples` reads: the corpus's sentences or NLI files as memory-mapped token ids (read and
tokenized once: data/prepare.py), and their count without tokenizing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sentadapt.events import Progress, no_progress
from sentadapt.options import DEFAULT_ENCODING_ERRORS

if TYPE_CHECKING:
    from sentadapt.data.batching import TokenizedExamples


@dataclass(frozen=True)
class TrainingData:
    """What a recipe reads its training examples from: the run's inputs and reading options (not the whole
    run config). Built by `sentadapt.run.inputs.training_data` from the RunConfig; defaults as TrainConfig's."""

    sources: tuple[str, ...]  # adapt's positional inputs: files or Hub datasets (`trains_on` says which kind)
    max_length: int  # --max-length (capped by the model's position table where token ids are made)
    text_column: str | None = None
    dedup: bool = True
    encoding_errors: str = DEFAULT_ENCODING_ERRORS
    streaming: bool = False
    num_proc: int | None = None
    encode_batch_size: int = 128  # --eval-batch-size: batches for encoding with a frozen model (CLSR)
    prompt: str = ""  # --prompt's text, prepended to every training sentence before it is tokenized or encoded


def counted_sentences(config: Any, progress: Progress = no_progress) -> int | None:
    """`sentence_examples`' count for a RunConfig, read without tokenizing (`Stage.count` of the recipes that
    train on the corpus's sentences); None for a Hub dataset."""
    from sentadapt.data.corpus import count_sentences

    return count_sentences(config.corpus, config.text_column, config.encoding_errors, config.train.dedup, progress)


def sentence_examples(data: TrainingData, tokenizer: Any, limit: int, note: Callable[[str], None],
                      progress: Progress | None = None) -> TokenizedExamples:
    """The inputs as one sentence per line → memory-mapped token ids cut to `limit` (`Encoder.token_limit`), read
    and tokenized once (data/prepare.py)."""
    from sentadapt.data.prepare import prepare_sentences

    prepared = prepare_sentences(data.sources, tokenizer, limit,
                                 text_column=data.text_column, dedup=data.dedup, encoding_errors=data.encoding_errors,
                                 streaming=data.streaming, num_proc=data.num_proc, progress=progress,
                                 prompt=data.prompt)
    for line in prepared.notes:
        note(line)
    return prepared.examples


def nli_examples(files: Sequence[str], data: TrainingData, tokenizer: Any, limit: int, note: Callable[[str], None],
                 progress: Progress | None = None) -> TokenizedExamples:
    """Labelled NLI files → token ids of premises and hypotheses, cut to `limit`, and labels (data/prepare.py)."""
    from sentadapt.data.prepare import prepare_nli

    prepared = prepare_nli(list(files), tokenizer, limit,
                           num_proc=data.num_proc, progress=progress, prompt=data.prompt)
    for line in prepared.notes:
        note(line)
    return prepared.examples
