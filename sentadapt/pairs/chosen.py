"""`sentadapt pairs --candidates FILE` / `--teacher M` / `--run DIR`: choose which pairs to label.

The candidates are the pairs a user already has (a file with sentence1/sentence2 columns; its other columns are kept)
or, from a corpus, the pairs `sentadapt pairs` would propose (pairs/devset.py) at CANDIDATES_PER_PAIR times the
size. Among them n are chosen:
- with `--teacher M` (before training) or `--run DIR` (after it), by the importance design of pairs/design.py,
  toward the pairs where the base model and the teacher (or the run's model) rank the candidates differently; each
  row carries its weight and FILE.design.json records the design, so the dev Δ estimates the candidates' Δ;
- with neither, uniformly at random (every weight equal: no weight column).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.corpus import corpus_files, is_hub_source
from sentadapt.data.pair_files import WEIGHT, pair_records
from sentadapt.data.positives import is_pair_file
from sentadapt.data.textfile import at
from sentadapt.errors import ConfigError, DataError
from sentadapt.events import Progress
from sentadapt.pairs.design import (
    UNIFORM_SHARE,
    Design,
    disagreement,
    draw_sample,
    write_candidates,
    write_design,
)
from sentadapt.pairs.devset import (
    check_pairs_request,
    free_run_folder,
    label_then,
    spread_pairs,
    write_pairs_file,
)
from sentadapt.storage.run_folder import RunDir
from sentadapt.text_tables import some_of

CANDIDATES_PER_PAIR = 5  # from a corpus: the spread proposal at 5·n pairs is the population the n stand for
RESERVED_COLUMNS = ("label", "score", WEIGHT)  # what the written file's own columns are


@dataclass
class Candidates:
    """Candidate pairs and whatever else their rows held."""

    sentence1: list[str]
    sentence2: list[str]
    columns: list[str]  # the other columns, in file order
    extra: list[list[str]]  # their cells, one list per pair
    source: str

    def __len__(self) -> int:
        return len(self.sentence1)


@dataclass
class ChosenPairs:
    """What `choose_pairs` wrote."""

    path: Path
    design_path: Path | None
    rows: np.ndarray  # the chosen candidates, in file order
    weights: np.ndarray | None
    candidates: Candidates
    guide: str | None  # teacher | run | None (uniform)
    guide_model: str | None
    base: str
    next_command: str
    short_of: int | None = None  # from a corpus: the 5·n candidates asked for when its sentences gave fewer

    def __len__(self) -> int:
        return len(self.rows)

    def lines(self) -> list[str]:
        """What `sentadapt pairs` prints: how many pairs among how many candidates, chosen how, where the file and
        its design are, what to do next."""
        how = {"teacher": f"where {self.base} and the teacher {self.guide_model} disagree most",
               "run": f"where the run {self.guide_model} and its base {self.base} disagree most",
               None: "uniformly at random"}[self.guide]
        lines = [f"wrote {len(self)} pairs to label to {self.path}, chosen among {len(self.candidates)} candidates "
                 f"({self.candidates.source}) {how}"]
        if self.short_of:
            lines.append(f"note: {self.short_of} candidates (5·n) were wanted; the corpus's distinct sentences give "
                         f"{len(self.candidates)} disjoint pairs (each sentence in one pair). Fewer candidates leave "
                         "less room to choose: more text would sharpen the estimate")
        if self.weights is not None:
            lines.append(f"each row's weight (1 / its chance of being chosen) runs from {self.weights.min():.2f} to "
                         f"{self.weights.max():.2f}; keep the column: the decision reads it. Design: "
                         f"{self.design_path}")
        return lines + label_then(self.next_command)


def read_candidates(path: Path) -> Candidates:
    """sentence1/sentence2 records of a .tsv, .csv or .jsonl file; the other columns are kept (reserved names are
    refused: the written file has its own label and weight); a pair listed twice is an error."""
    if path.is_dir():
        raise DataError(f"--candidates {path}: a folder; pass one file of pairs (.tsv, .csv or .jsonl with "
                        "sentence1 and sentence2)")
    if not path.is_file():
        raise DataError(f"--candidates {path}: no such file")
    first: list[str] = []
    second: list[str] = []
    extra: list[list[str]] = []
    columns: list[str] | None = None
    seen: dict[tuple[str, str], int] = {}
    for number, record in pair_records(path, ("sentence1", "sentence2")):
        if columns is None:
            columns = [name for name in record if name not in ("sentence1", "sentence2")]
            reserved = [name for name in columns if name in RESERVED_COLUMNS]
            if reserved:
                raise DataError(f"{path}: has a '{reserved[0]}' column; candidates are pairs still to label: drop or "
                                "rename it (the file `pairs` writes has its own label and weight columns)")
        s1, s2 = record.get("sentence1"), record.get("sentence2")
        if not isinstance(s1, str) or not isinstance(s2, str) or not s1.strip() or not s2.strip():
            raise DataError(f"{at(path, number)}: sentence1 and sentence2 must be non-empty text")
        key = (s1.strip(), s2.strip()) if s1.strip() <= s2.strip() else (s2.strip(), s1.strip())
        if key in seen:
            raise DataError(f"{at(path, number)}: the pair of line {seen[key]} again; keep each candidate once (a "
                            "repeated one would be twice as likely to be chosen)")
        seen[key] = number
        first.append(s1)
        second.append(s2)
        extra.append(["" if record.get(name) is None else str(record.get(name)) for name in columns])
    if not first:
        raise DataError(f"--candidates {path}: no sentence pairs in it")
    return Candidates(first, second, columns or [], extra, str(path))


def run_base(run: Path, base: str | None) -> tuple[str, Path]:
    """(the base model of a finished run, the run's model folder); `--base` must name the same model if given."""
    folder = RunDir(run)
    metrics = folder.finished_metrics(f"--run {run}")
    run_base_model = str(metrics.get("base_model") or "")
    if base is not None and not same_model(base, run_base_model):
        raise ConfigError(f"--base {base}: the run {run} adapted {run_base_model}; leave --base out (the run's base "
                          "is used) or pass that model")
    return run_base_model, folder.path


def run_corpus(run: Path, text_column: str | None) -> tuple[list[str], str | None]:
    """`pairs --run RUN` without a CORPUS: the corpus the run trained on, as its config.yaml records it (the files, or
    a Hub dataset), and its text column unless one is given."""
    import yaml

    folder = RunDir(run)  # a --recipe auto run: its candidates' configs, which share the corpus
    places = [folder, *(RunDir(path) for path in sorted(folder.candidates.glob("*")))]
    configured = next((place for place in places if place.has_config()), None)
    if configured is None:
        raise ConfigError(f"--run {run}: no config.yaml names the corpus it trained on; pass the CORPUS to choose "
                          "pairs from")
    saved = yaml.safe_load(configured.read_config_text()) or {}
    corpus = [str(source) for source in saved.get("corpus") or []]
    gone = [source for source in corpus if not Path(source).exists() and not is_hub_source(source)]
    if gone:
        raise ConfigError(f"--run {run}: the corpus it trained on is gone ({gone[0]}); pass the CORPUS to choose "
                          "pairs from")
    pairs = [source for source in corpus if Path(source).is_file() and is_pair_file(Path(source))]
    if pairs:  # CLSR's: its sentences are not one per record
        raise ConfigError(f"--run {run}: it trained on sentence pairs ({pairs[0]}); pass a CORPUS of your domain's "
                          "sentences, or --candidates FILE (pairs still to label)")
    return corpus, text_column or saved.get("text_column")


def same_model(first: str, second: str) -> bool:
    """Two names of one model: equal, or the same local folder."""
    if first == second:
        return True
    a, b = Path(first).expanduser(), Path(second).expanduser()
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def choose_pairs(
    corpus: Sequence[str | Path],
    candidates_file: Path | None,
    base: str | None,
    default_base: str,
    n: int,
    output: Path,
    load: Callable[[Any], Any],
    teacher: str | None,
    run: Path | None,
    seed: int,
    sample: int,
    batch_size: int,
    text_column: str | None,
    overwrite: bool,
    progress: Progress | None,
) -> ChosenPairs:
    """Choose n of the candidates (module docstring), write them for labelling to `output` and, when a guide chose
    them, the design beside it; `load(resolved model)` gives an encoder. Every option is checked before a model
    loads."""
    from sentadapt.model.resolve import resolve_model

    if teacher is not None and run is not None:
        raise ConfigError("--teacher and --run: pass one (--teacher before training, --run after it)")
    guide_folder = None
    if run is not None:
        base, guide_folder = run_base(run, base)
        if not corpus and candidates_file is None:
            corpus, text_column = run_corpus(run, text_column)
    if bool(corpus) == (candidates_file is not None):
        raise ConfigError("pass a CORPUS to propose pairs from, or --candidates FILE to choose among, not both"
                          if corpus else "pass a CORPUS or --candidates FILE")
    check_pairs_request(n, output, overwrite)
    base = base or default_base
    resolved = resolve_model(base)
    guide = guide_folder or teacher
    guide_model = resolve_model(guide) if guide is not None else None
    pool = read_candidates(candidates_file) if candidates_file is not None else None
    if pool is not None and len(pool) < n:
        raise ConfigError(f"-n {n}: --candidates {candidates_file} holds {len(pool)} pairs; pass a smaller -n or "
                          "more candidates")

    base_cosines = None
    if pool is None:
        wanted = CANDIDATES_PER_PAIR * n if guide_model is not None else n
        spread = spread_pairs(corpus_files(corpus), lambda: load(resolved), n, output, seed, sample, batch_size,
                              text_column, progress, wanted)
        pool = Candidates(spread.sentence1, spread.sentence2, [], [[] for _ in spread.sentence1],
                          some_of(spread.corpus.files))
        base_cosines = spread.cosines  # the base's cosines of these very pairs: not encoded twice
    rng = np.random.default_rng(seed)
    weights = differences = uniform = None
    if guide_model is None:
        rows = np.sort(rng.permutation(len(pool))[:n])
    else:
        if base_cosines is None:
            base_cosines = pair_cosines(load(resolved), pool, batch_size, progress)
        guide_cosines = pair_cosines(load(guide_model), pool, batch_size, progress)
        differences = disagreement(base_cosines, guide_cosines)
        rows, probabilities, uniform = draw_sample(differences, n, rng, UNIFORM_SHARE)
        weights = 1.0 / probabilities
    guide_kind = None if guide_model is None else ("run" if run is not None else "teacher")
    result = ChosenPairs(output, None, rows, weights, pool, guide_kind, str(run or teacher) if guide_kind else None,
                         resolved.name, next_command(corpus, candidates_file, base, output, run, teacher))
    if candidates_file is None and guide_model is not None and len(pool) < CANDIDATES_PER_PAIR * n:
        result.short_of = CANDIDATES_PER_PAIR * n  # each sentence is in one candidate pair: 2 per candidate
    write_chosen(result, rng)
    if weights is not None and differences is not None and uniform is not None:
        # the candidates, their disagreement and their draw's uniforms: what the label-more loop's next round reads
        write_candidates(output, pool.sentence1, pool.sentence2, pool.columns, pool.extra, differences, uniform)
        domain = "candidates" if candidates_file is not None else "corpus"
        result.design_path = write_design(output, Design(guide_kind or "", result.guide_model or "", resolved.name,
                                                         len(pool), n, UNIFORM_SHARE, seed, domain))
    return result


def pair_cosines(encoder: Any, pool: Candidates, batch_size: int, progress: Progress | None) -> np.ndarray:
    """Each candidate pair's cosine under `encoder`, every unique sentence encoded once."""
    from sentadapt.evaluation.contract import EmbeddingTable, cosine_scores

    texts = list(dict.fromkeys([*pool.sentence1, *pool.sentence2]))
    with progress(f"encoding {encoder.name}", len(texts)) if progress else nullcontext(None) as advance:
        vectors = encoder.encode(texts, batch_size=batch_size, progress=advance)
    table = EmbeddingTable(texts, vectors)
    return cosine_scores(table.of(pool.sentence1), table.of(pool.sentence2))


def write_chosen(result: ChosenPairs, rng: np.random.Generator) -> None:
    """The chosen rows in a random order (no anchoring on a sorted list): sentence1, sentence2, the candidates' other
    columns, the weight when a guide chose them, and the label to fill in, last."""
    pool = result.candidates
    order = rng.permutation(len(result.rows))
    result.rows = result.rows[order]
    if result.weights is not None:
        result.weights = result.weights[order]
    header = ["sentence1", "sentence2", *pool.columns, *([WEIGHT] if result.weights is not None else []), "label"]
    rows = []
    for position, row in enumerate(result.rows):
        weight = [f"{result.weights[position]:.6g}"] if result.weights is not None else []
        rows.append([pool.sentence1[row], pool.sentence2[row], *pool.extra[row], *weight, ""])
    write_pairs_file(result.path, result.next_command, header, rows)


def next_command(corpus: Sequence[str | Path], candidates_file: Path | None, base: str, output: Path,
                 run: Path | None, teacher: str | None = None) -> str:
    """What to run once the file is labelled: decide on the run (--run), or adapt with the file as the dev set —
    with the teacher the pairs were chosen for (--teacher) and an output folder that is not there yet."""
    if run is not None:
        words = ["sentadapt", "decide", str(run), "--dev", str(output)]
    else:
        data = [str(item) for item in corpus] or ["CORPUS"]  # candidates alone: the corpus is the user's to name
        words = ["sentadapt", "adapt", *data, "--base", base, *(["--teacher", teacher] if teacher else []),
                 "--dev", str(output), "--output", str(free_run_folder(output))]
    return " ".join(shlex.quote(word) for word in words)

