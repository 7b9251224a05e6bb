"""`sentadapt pairs`: pairs for a person to label — spread over the base model's cosines from a corpus
(pairs/devset.py), or chosen among candidates where two models disagree (pairs/chosen.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sentadapt.events import Progress
from sentadapt.options import ENCODE_BATCH_SIZE, checked
from sentadapt.pairs import DEFAULT_SAMPLE, PAIRS_SEED
from sentadapt.pairs.chosen import ChosenPairs, choose_pairs
from sentadapt.pairs.devset import ProposedPairs, propose_spread_pairs


@checked({"corpus": "CORPUS", "model": "--base", "n": "-n"})
def propose_pairs(
    corpus: Sequence[str | Path],
    model: str | None,
    n: int,
    output: Path,
    seed: int = PAIRS_SEED,
    sample: int = DEFAULT_SAMPLE,
    batch_size: int = ENCODE_BATCH_SIZE,
    max_length: int | None = None,
    device: str | None = None,
    text_column: str | None = None,
    overwrite: bool = False,
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    candidates: Path | None = None,
    teacher: str | None = None,
    run: Path | None = None,
    progress: Progress | None = None,
) -> ProposedPairs | ChosenPairs:
    """Write `n` pairs to label to `output` (.tsv or .csv); deterministic for a given `seed`. From `corpus`, spread
    over the cosine range of `model` (None: the default base model); with `candidates` (pairs to choose among),
    `teacher` or `run`, chosen as pairs/chosen.py says, and a ChosenPairs is returned. Bad input fails
    before any weights load."""
    from sentadapt.model.resolve import DEFAULT_BASE_MODEL

    def load(resolved: Any) -> Any:  # called only once every option is checked: no weights load before
        from sentadapt.model.encoder import Encoder

        return Encoder.load(resolved, max_length=max_length, device=device, trust_remote_code=trust_remote_code,
                            allow_pickle=allow_pickle)

    if candidates is not None or teacher is not None or run is not None:
        return choose_pairs(corpus, candidates, model, DEFAULT_BASE_MODEL, n, output, load, teacher, run, seed, sample,
                            batch_size, text_column, overwrite, progress)
    return propose_spread_pairs(corpus, model or DEFAULT_BASE_MODEL, n, output, load, seed, sample, batch_size,
                                text_column, overwrite, progress)
