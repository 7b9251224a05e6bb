"""Sentence pairs from the user's own corpus for a person to label: the dev set that decides whether an adapted
model is used (`sentadapt pairs`).

Random pairs from a corpus are nearly all unrelated, and a dev set of unrelated pairs cannot tell a better model
from a worse one. So the pairs are chosen to spread over the base model's cosine range:

1. a seeded sample of at most a few thousand distinct sentences, drawn while the corpus streams past (the
   sentences with the smallest seeded hash, so memory does not grow with the corpus);
2. candidates: each sentence with its nearest neighbours at several ranks (near-duplicates, then ever looser
   matches) and with a few random partners (unrelated), similarities computed a block of rows at a time;
3. the candidates' cosine range cut into equal-width bins, and pairs taken round-robin from the bins (seeded order
   inside each bin), so rare near-duplicates count as much as the abundant unrelated pairs; once a bin runs out,
   the fuller bins fill the rest. No sentence is used twice, so every label says something new.

The file is written in a random row order (a person labelling rows sorted by similarity anchors on the order).
"""

from __future__ import annotations

import csv
import io
import shlex
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sentadapt.data.corpus import (
    KEEP,
    CorpusReport,
    check_sources,
    classify,
    corpus_files,
    scan_corpus,
    settle_statuses,
    text_hashes,
)
from sentadapt.data.pair_files import LABEL_FILE_MARK, LABEL_RULE
from sentadapt.errors import ConfigError, DataError, StorageError
from sentadapt.events import Progress
from sentadapt.options import check_writable_place
from sentadapt.storage.durable import write_text_atomically
from sentadapt.text_tables import some_of

if TYPE_CHECKING:
    import torch

BINS = 10
# Neighbour ranks (1 = nearest other sentence), spaced geometrically: rank 1 gives the near-duplicates, the
# deeper ranks the borderline pairs between them and the random partners.
NEIGHBOUR_RANKS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
RANDOM_PARTNERS = 4  # per sentence: the unrelated end of the range
SIMILARITY_BLOCK = 1 << 24  # entries of one block of rows × sentences (64 MB of float32), never the N × N matrix
LABEL_FORMATS = {".tsv": "\t", ".csv": ","}
_MASK64 = (1 << 64) - 1


BAR_WIDTH = 30  # characters of the fullest bin's bar in the printed histogram


@dataclass
class ProposedPairs:
    """What `propose_pairs` wrote: the pairs in file order, each with the base model's cosine."""

    path: Path
    sentence1: list[str]
    sentence2: list[str]
    cosines: np.ndarray  # float64, one per pair, in file order
    edges: np.ndarray  # BINS + 1 equal-width edges over the candidates' cosine range
    counts: np.ndarray  # pairs written per bin
    candidates: np.ndarray  # candidate pairs per bin (what the bins could offer)
    corpus: CorpusReport
    sampled: int  # distinct sentences encoded
    model: str
    pooling: str
    next_command: str  # the `adapt` command that uses the labelled file

    def __len__(self) -> int:
        return len(self.sentence1)

    def sampled_note(self) -> str:
        return (f"corpus: {self.corpus.summary()}; {self.sampled} sentences sampled and encoded with {self.model} "
                f"(pooling {self.pooling})")

    def lines(self) -> list[str]:
        """What `sentadapt pairs` prints: how many pairs, the cosine range they cover with the count per bin (most
        similar first, as a person reads a histogram of pairs), where the file is, what to do next."""
        widest, edges = max(int(self.counts.max()), 1), self.edges
        bins = [f"  {edges[index]:+.2f} … {edges[index + 1]:+.2f}  {int(count):4d}  "
                + "█" * round(BAR_WIDTH * int(count) / widest)
                for index, count in reversed(list(enumerate(self.counts)))]
        return [f"wrote {len(self)} pairs to label to {self.path}; base-model cosine {self.cosines.min():.2f} to "
                f"{self.cosines.max():.2f}, pairs per bin:", *bins, *label_then(self.next_command)]


def label_then(command: str) -> list[str]:
    """The lines after a file of pairs to label: how to label it, and the command that reads it."""
    return ["next: fill in the label column (1 = same meaning, 0 = different, or a score such as 0-5) in every row, "
            "delete rows you cannot judge, then:", f"  {command}"]


def propose_spread_pairs(corpus: Sequence[str | Path], model: str, n: int, output: Path, load: Callable[[Any], Any],
                         seed: int, sample: int, batch_size: int, text_column: str | None, overwrite: bool,
                         progress: Progress | None) -> ProposedPairs:
    """Write `n` pairs of sentences from `corpus` for labelling to `output` (.tsv or .csv), spread over the cosine
    range of `model` (`load(resolved model)` gives its encoder); deterministic for a given `seed`. Bad input fails
    before any weights load."""
    from sentadapt.model.resolve import resolve_model

    if not corpus:
        raise ConfigError("CORPUS: pass the text files to propose pairs from, or --candidates FILE")
    check_pairs_request(n, output, overwrite)
    resolved = resolve_model(model)
    files = corpus_files(corpus)  # a folder or a pattern: its files (the next command keeps the user's words)
    check_sources(files)
    result = spread_pairs(files, lambda: load(resolved), n, output, seed, sample, batch_size, text_column, progress)
    result.next_command = next_step(corpus, model, output)
    write_label_file(result)
    return result


def spread_pairs(corpus: Sequence[str | Path], load: Callable[[], Any], n: int, output: Path, seed: int, sample: int,
                 batch_size: int, text_column: str | None, progress: Progress | None,
                 wanted: int | None = None) -> ProposedPairs:
    """The n pairs of the module docstring, not yet written (`load()` gives the base model's encoder); with
    `wanted`, up to that many (as many as the sentences allow, at least n: the candidates of a chosen dev set)."""
    sentences, report = sample_sentences(corpus, max(sample, 3 * (wanted or n)), seed, text_column)
    if report.sentences < 2 * n:
        raise DataError(f"{some_of(report.files)}: {report.sentences} distinct sentences; -n {n} needs at least "
                        f"{2 * n} (each sentence is used in one pair only); pass more text or a smaller -n")
    n = min(wanted, len(sentences) // 2) if wanted else n
    encoder = load()
    with progress(f"encoding {encoder.name}", len(sentences)) if progress else nullcontext(None) as advance:
        vectors = encoder.encode(sentences, batch_size=batch_size, progress=advance)
    units = torch_normalize(vectors)
    rng = np.random.default_rng(seed & _MASK64)
    first, second, cosines = candidate_pairs(units, rng)
    edges = bin_edges(cosines)
    chosen = pick_per_bin(first, second, bin_of(cosines, edges), BINS, n, rng)
    a, b = complete_pairs(first[chosen], second[chosen], len(sentences), n, rng)
    order = rng.permutation(n)  # random row order: no anchoring on a sorted list
    a, b = a[order], b[order]
    pair_cosines = pair_cosine(units, a, b)
    result = ProposedPairs(
        path=output, sentence1=[sentences[i] for i in a], sentence2=[sentences[i] for i in b], cosines=pair_cosines,
        edges=edges, counts=np.bincount(bin_of(pair_cosines, edges), minlength=BINS),
        candidates=np.bincount(bin_of(cosines, edges), minlength=BINS), corpus=report, sampled=len(sentences),
        model=encoder.name, pooling=encoder.pooling_name, next_command="",
    )
    return result


def check_pairs_request(n: int, output: Path, overwrite: bool) -> None:
    """The options, checked before the corpus is read or the model loads."""
    if n < 1:
        raise ConfigError(f"-n {n}: must be ≥ 1 (the number of pairs to propose)")
    if output.suffix.lower() not in LABEL_FORMATS:
        raise ConfigError(f"--output {output}: must end in .tsv or .csv (the formats `eval --pairs` and "
                          "`adapt --dev` read)")
    if output.is_dir():
        raise ConfigError(f"--output {output}: is a directory; pass a file name such as to-label.tsv")
    if output.exists() and not overwrite:
        raise ConfigError(f"--output {output}: exists (labels in it would be lost); pass --overwrite to replace it")
    if output.exists():
        _check_replaceable_label_file(output)
    check_writable_place(f"--output {output}", output.parent)


def _check_replaceable_label_file(path: Path) -> None:
    """--overwrite replaces a file `pairs` wrote whose labels are still empty, nothing else: a user's own pairs
    file, or one they have started labelling, is refused (the labels are what they paid for)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    if not lines or not lines[0].startswith(LABEL_FILE_MARK):
        raise ConfigError(f"--output {path}: not a file `sentadapt pairs` wrote (its first line is not the "
                          f"'{LABEL_FILE_MARK}' comment); --overwrite replaces only such a file; choose another name")
    rows = list(csv.reader(lines[1:], delimiter=LABEL_FORMATS[path.suffix.lower()]))
    column = rows[0].index("label") if rows and "label" in rows[0] else None
    labelled = sum(1 for row in rows[1:] if column is not None and len(row) > column and row[column].strip())
    if labelled:
        raise ConfigError(f"--output {path}: {labelled} of its {len(rows) - 1} pairs are labelled, and --overwrite "
                          "would lose them; move the file, or choose another --output")


# ------------------------------------------------------------------------------------------------ the sample


# A line longer than this is a document, not a sentence to judge beside another: it is not proposed (issue 82: a
# 12 MB line went whole into the file to label, which Python's csv could not read back; training cuts a text to
# max_length tokens anyway, ~64 words by default)
MAX_PAIR_CHARS = 2000


def sample_sentences(sources: Sequence[str | Path], size: int, seed: int,
                     text_column: str | None = None) -> tuple[list[str], CorpusReport]:
    """At most `size` distinct sentences of the corpus, a seeded uniform sample, read as `adapt` reads a corpus
    (same formats, blank lines skipped, duplicates dropped, none longer than MAX_PAIR_CHARS); the report counts the
    whole corpus."""
    sampler = _SmallestKeys(size, seed)
    statuses: list[np.ndarray] = []
    hashes: list[np.ndarray] = []

    def consume(batch: list[str | None]) -> None:
        status, hashed = classify(batch, 1), text_hashes(batch)
        statuses.append(status)
        hashes.append(hashed)
        kept = np.array([i for i in np.flatnonzero(status == KEEP) if len(batch[i] or "") <= MAX_PAIR_CHARS],
                        dtype=np.int64)
        sampler.offer([batch[i] for i in kept], hashed[kept])  # type: ignore[misc]

    report = scan_corpus(sources, consume, text_column)
    status = np.concatenate(statuses) if statuses else np.empty(0, dtype=np.uint8)
    settle_statuses(report, status, np.concatenate(hashes) if hashes else np.empty(0, dtype=np.uint64), 1)
    return sampler.texts, report


class _SmallestKeys:
    """The `size` distinct texts with the smallest seeded keys among all offered: a uniform sample that does not
    depend on the order of the corpus or on repeated lines (a text's key is a function of the text), and holds
    `size` texts whatever the corpus size."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.salt = _mix(np.array([seed & _MASK64], dtype=np.uint64))[0]
        self.texts: list[str] = []
        self.keys = np.empty(0, dtype=np.uint64)

    def offer(self, texts: list[str], hashes: np.ndarray) -> None:
        keys = _mix(hashes ^ self.salt)
        if len(self.keys) == self.size:  # full: only keys below the largest kept one can enter
            below = np.flatnonzero(keys < self.keys[-1])
            texts, keys = [texts[i] for i in below], keys[below]
        if not len(keys):
            return
        merged = [*self.texts, *texts]
        unique, first = np.unique(np.concatenate([self.keys, keys]), return_index=True)  # sorted, repeats once
        self.texts = [merged[i] for i in first[: self.size]]
        self.keys = unique[: self.size]


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads nearby 64-bit values (hash ^ seed) over the whole range."""
    x = values.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


# -------------------------------------------------------------------------------------------- the selection


def torch_normalize(vectors: torch.Tensor) -> torch.Tensor:
    """Unit rows, so a dot product is the cosine (whether or not the model normalises its output)."""
    import torch

    return torch.nn.functional.normalize(vectors.float(), dim=1)


def candidate_pairs(units: torch.Tensor, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, cosine) of the candidate pairs, first < second, each pair once: every sentence with its
    neighbours at NEIGHBOUR_RANKS and with RANDOM_PARTNERS random others."""
    import torch

    count = len(units)
    ranks = torch.as_tensor([rank for rank in NEIGHBOUR_RANKS if rank < count], dtype=torch.long)
    firsts, seconds = [], []
    rows_per_block = max(1, SIMILARITY_BLOCK // count)
    for start in range(0, count, rows_per_block):
        rows = torch.arange(start, min(start + rows_per_block, count))
        similarity = units[rows] @ units.T
        similarity[torch.arange(len(rows)), rows] = -float("inf")  # a sentence is not its own neighbour
        nearest = similarity.topk(int(ranks[-1]), dim=1).indices[:, ranks - 1]
        firsts.append(rows.repeat_interleave(len(ranks)).numpy())
        seconds.append(nearest.reshape(-1).numpy())
    own = np.repeat(np.arange(count), RANDOM_PARTNERS)
    firsts.append(own)
    seconds.append((own + rng.integers(1, count, size=len(own))) % count)  # never the sentence itself
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    low, high = np.minimum(first, second), np.maximum(first, second)
    _, once = np.unique(low * count + high, return_index=True)  # (a, b) and (b, a) are one pair
    low, high = low[once], high[once]
    return low, high, pair_cosine(units, low, high)


def pair_cosine(units: torch.Tensor, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    import torch

    left, right = units[torch.as_tensor(first)], units[torch.as_tensor(second)]
    return (left.double() * right.double()).sum(dim=1).numpy()


def bin_edges(cosines: np.ndarray, bins: int = BINS) -> np.ndarray:
    return np.linspace(float(cosines.min()), float(cosines.max()), bins + 1)


def bin_of(cosines: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The bin of each cosine; the top edge belongs to the last bin, values outside the range to the nearest."""
    return np.clip(np.searchsorted(edges, cosines, side="right") - 1, 0, len(edges) - 2)


def pick_per_bin(first: np.ndarray, second: np.ndarray, which: np.ndarray, bins: int, n: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Indices of at most `n` candidates taken round-robin from the bins (`which`: each candidate's bin; highest
    similarity first in each round, seeded order inside a bin), skipping candidates with a sentence already used.
    A bin that runs out drops out of the rounds, so the fuller bins fill what it could not."""
    order = rng.permutation(len(which))
    queues = [order[which[order] == b] for b in reversed(range(bins))]
    heads = [0] * len(queues)
    used = np.zeros(int(max(first.max(initial=-1), second.max(initial=-1))) + 1, dtype=bool)
    chosen: list[int] = []
    while len(chosen) < n:
        taken = len(chosen)
        for b, queue in enumerate(queues):
            head = heads[b]
            while head < len(queue) and (used[first[queue[head]]] or used[second[queue[head]]]):
                head += 1
            if head < len(queue):
                pick = int(queue[head])
                chosen.append(pick)
                used[first[pick]] = used[second[pick]] = True
                head += 1
            heads[b] = head
            if len(chosen) == n:
                break
        if len(chosen) == taken:  # every bin is out of usable candidates
            break
    return np.asarray(chosen, dtype=np.int64)


def complete_pairs(first: np.ndarray, second: np.ndarray, count: int, n: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The chosen pairs, plus random pairs of still-unused sentences when the candidates could not give `n`
    disjoint pairs (a small corpus: 2·n sentences always make n pairs)."""
    missing = n - len(first)
    if missing <= 0:
        return first, second
    unused = np.ones(count, dtype=bool)
    unused[first] = unused[second] = False
    spare = rng.permutation(np.flatnonzero(unused))[: 2 * missing]
    return np.concatenate([first, spare[0::2]]), np.concatenate([second, spare[1::2]])


# ------------------------------------------------------------------------------------------------ the file


def next_step(corpus: Sequence[str | Path], model: str, output: Path) -> str:
    """The `adapt` command that uses the labelled file, for the file's comment line."""
    words = ["sentadapt", "adapt", *map(str, corpus), "--base", model, "--dev", str(output), "--output",
             str(free_run_folder(output))]
    return " ".join(shlex.quote(word) for word in words)


def free_run_folder(label_file: Path) -> Path:
    """runs/NAME for a label file NAME.tsv (runs/NAME-2, -3, ... when taken): where the next `adapt` may write."""
    stem = Path(label_file).name.split(".")[0] or "adapted"
    folder = Path("runs") / stem
    number = 2
    while folder.exists():
        folder, number = Path("runs") / f"{stem}-{number}", number + 1
    return folder


def write_label_file(result: ProposedPairs) -> None:
    """A one-line comment (how to label, what to run next), the header and one row per pair with an empty label,
    written atomically: an interrupted run never leaves half a file."""
    write_pairs_file(result.path, result.next_command, ["sentence1", "sentence2", "label"],
               [[s1, s2, ""] for s1, s2 in zip(result.sentence1, result.sentence2)])


def write_pairs_file(path: Path, next_command: str, header: list[str], rows: list[list[str]]) -> None:
    """A label file: the comment line `--overwrite` recognises, the header, the rows (.tsv or .csv), atomically."""
    delimiter = LABEL_FORMATS[path.suffix.lower()]
    buffer = io.StringIO()
    buffer.write(f"{LABEL_FILE_MARK}: {LABEL_RULE}, in every row; delete rows you cannot judge. Then: "
                 f"{next_command}\n")
    if delimiter == "\t":  # TSV is read without quoting: a tab or line break inside a sentence becomes a space
        for row in [header, *rows]:
            buffer.write("\t".join(_tsv_cell(cell) for cell in row) + "\n")
    else:
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, buffer.getvalue())
    except OSError as error:
        raise StorageError(f"{path}: could not be written ({error.strerror or error})") from None


def _tsv_cell(text: str) -> str:
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")
