"""The small sample shipped inside the package (sentadapt/data/sample/, see its README.md): what
`sentadapt diagnose` reads when it is given no data, so the bare command works on a fresh offline install."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

SAMPLE_DESCRIPTION = "250 IT-support sentences and 120 labelled pairs from sentadapt's examples"


def _sample_file(name: str) -> Path:
    # a regular (unzipped) install: the resource is a real file, which the corpus and pair readers need
    return Path(str(files("sentadapt.data") / "sample" / name))


def sample_corpus() -> Path:
    return _sample_file("it-support-sentences.txt")


def sample_pairs() -> Path:
    return _sample_file("it-support-pairs.tsv")
