"""Which pairs to label: an importance design that spends the labels where two models disagree.

The decision compares two models on the same dev pairs: Δ = ρ(adapted, gold) − ρ(base, gold). A pair the two models
rank alike moves both correlations alike and says almost nothing about which is better; random sampling spends most
labels on such pairs. Spearman is Pearson of ranks, and the pair's influence on Δ is about

    d_i · (g_i − ρ·m_i)      d_i = z(rank of adapted_i) − z(rank of base_i),  m_i = their mean,  g_i its gold's z-rank

so the variance of Δ's estimate is smallest when pair i is drawn with probability ∝ |d_i| (the gold's residual is
not known before labelling, and is about as large everywhere). `d` comes from the model the decision will weigh (the
run's, after training) or from the teacher it is trained toward (before training). A uniform share of the
probability (a defensive mixture, Hesterberg 1995) keeps every pair drawable, so no region of the pool goes
unlabelled and no weight explodes where `d` is wrong:

    p_i = share / M + (1 − share) · |d_i| / Σ|d|     over the M candidate pairs
    π_i = n · p_i, capped at 1 (a capped pair is certain; the rest of n is spread again)

n pairs are drawn without replacement with these inclusion probabilities by sequential Poisson sampling (Ohlsson
1998: the certain pairs, then the smallest keys ξ_i = U_i / p_i, U_i uniform), and each carries the weight 1/π_i: the
number of candidate pairs it stands for. The keys do not depend on n, so the draw nests: with the same keys, n' > n
pairs contain the n drawn first — what the label-more loop needs (decision/sequential.py): the next round continues
the same design, keeps every labelled pair and draws none again, and every pair's weight is 1/π_i at the new size.
(Pareto πps sampling, used before issue 83, orders by U/(1−U) · (1−π)/π, which moves with n: it does not nest.)
The dev Δ is then the weighted (Hájek) estimate of the candidates' Δ, its interval the bootstrap of
the weighted draws (evaluation/bootstrap.weighted_by) — what `adapt --dev`, `eval --pairs` and `decide` read from
the file's 'weight' column. The uniform share was chosen by a rule written before the study that measured it
(research/findings.md, "Chosen labels").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.pair_files import design_path
from sentadapt.errors import DataError

UNIFORM_SHARE = 0.5  # the defensive share: the pick of the rule in research/findings.md, "Chosen labels"


def standard_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share theirs), centred and scaled to unit SD: what a rank correlation correlates."""
    from scipy.stats import rankdata

    ranks = rankdata(values)
    spread = ranks.std()
    return (ranks - ranks.mean()) / spread if spread > 0 else np.zeros_like(ranks)


def disagreement(base: np.ndarray, other: np.ndarray) -> np.ndarray:
    """d_i: how differently the other model ranks pair i among the candidates than the base model does."""
    return standard_ranks(np.asarray(other, dtype=np.float64)) - standard_ranks(np.asarray(base, dtype=np.float64))


def design_shape(disagreement: np.ndarray, uniform_share: float = UNIFORM_SHARE) -> np.ndarray:
    """p_i of the module docstring (Σ p = 1): the share of a draw each candidate gets before any cap."""
    size = len(disagreement)
    magnitude = np.abs(np.asarray(disagreement, dtype=np.float64))
    total = magnitude.sum()
    return np.full(size, 1.0 / size) if total <= 0 else uniform_share / size + (1 - uniform_share) * magnitude / total


def inclusion_probabilities(disagreement: np.ndarray, n: int, uniform_share: float = UNIFORM_SHARE) -> np.ndarray:
    """π_i of the module docstring: Σ π = n, each at most 1. Without disagreement anywhere, every π_i is n / M."""
    size = len(disagreement)
    if not 0 < n <= size:
        raise ValueError(f"cannot choose {n} of {size} candidates")
    shape = design_shape(disagreement, uniform_share)
    probabilities = np.zeros(size)
    certain = np.zeros(size, dtype=bool)
    while True:  # cap at 1 and spread what is left of n over the uncertain pairs, until none exceeds 1
        left = n - certain.sum()
        probabilities[~certain] = left * shape[~certain] / shape[~certain].sum()
        probabilities[certain] = 1.0
        over = ~certain & (probabilities >= 1.0)
        if not over.any() or left == 0:
            return np.minimum(probabilities, 1.0)
        certain |= over


def order_keys(uniform: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """ξ_i = U_i / p_i: sequential Poisson sampling's keys (the smallest are drawn); `uniform` the U_i, one per
    candidate, kept with the design so that the next round draws with the same keys."""
    return np.asarray(uniform, dtype=np.float64) / shape


def nested_sample(probabilities: np.ndarray, keys: np.ndarray, n: int, kept: np.ndarray | None = None,
                  ) -> np.ndarray:
    """n indices, sorted: the pairs `kept` from an earlier round, the certain ones (π = 1), then the smallest keys
    (sequential Poisson sampling, inclusion probabilities ≈ `probabilities`)."""
    chosen = np.zeros(len(probabilities), dtype=bool)
    if kept is not None:
        chosen[kept] = True
    chosen |= probabilities >= 1.0
    left = n - int(chosen.sum())
    if left > 0:
        order = np.argsort(np.where(chosen, np.inf, keys), kind="stable")
        chosen[order[:left]] = True
    return np.flatnonzero(chosen)


def draw_sample(disagreement: np.ndarray, n: int, rng: np.random.Generator, uniform_share: float = UNIFORM_SHARE,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, their inclusion probabilities, every candidate's U) of a first round of n: one uniform per candidate,
    the first thing `rng` draws."""
    uniform = rng.random(len(disagreement))
    probabilities = inclusion_probabilities(disagreement, n, uniform_share)
    rows = nested_sample(probabilities, order_keys(uniform, design_shape(disagreement, uniform_share)), n)
    return rows, probabilities[rows], uniform


@dataclass(frozen=True)
class Design:
    """How a chosen dev set was drawn: written beside the label file (FILE.design.json) by `sentadapt pairs`, read
    back by every command that reads the file as a dev set."""

    guide: str  # teacher | run: whose disagreement with the base chose the pairs
    guide_model: str  # the teacher, or the run's folder
    base: str  # the base model the disagreement was measured against
    candidates: int  # M: the population the weights stand for
    pairs: int  # n proposed
    uniform_share: float
    seed: int
    # candidates: the candidates are the population the labels speak for (a --candidates file: its finite-population
    # factor applies); corpus: they were drawn from a larger one (the two-phase variance, evaluation/variance.py)
    domain: str = "candidates"
    round: int = 1  # the label-more loop's round that wrote the file (its pairs: every round's so far)

    def to_dict(self) -> dict[str, Any]:
        return {"design": "importance (sequential Poisson πps, weight = 1/π)", **asdict(self)}


CANDIDATES_SUFFIX = ".candidates.json.gz"  # FILE.candidates.json.gz: the candidates a design drew FILE's pairs from


def candidates_path(label_file: str | Path) -> Path:
    path = Path(label_file)
    return path.with_name(path.name + CANDIDATES_SUFFIX)


@dataclass(frozen=True)
class DesignCandidates:
    """Every candidate a design drew from, with its disagreement and its draw's uniform U_i (the keys of the next
    round: pairs/rounds.py)."""

    sentence1: list[str]
    sentence2: list[str]
    columns: list[str]
    extra: list[list[str]]
    disagreement: np.ndarray
    uniform: np.ndarray


def write_candidates(label_file: str | Path, sentence1: list[str], sentence2: list[str], columns: list[str],
                     extra: list[list[str]], differences: np.ndarray, uniform: np.ndarray) -> Path:
    """FILE.candidates.json.gz beside the label file (gzip JSON: 2,000 candidates take ~100 KB), atomically."""
    import gzip

    from sentadapt.storage.durable import replace_durably

    path = candidates_path(label_file)
    record = {"sentence1": sentence1, "sentence2": sentence2, "columns": columns, "extra": extra,
              "disagreement": [float(value) for value in differences], "uniform": [float(value) for value in uniform]}
    tmp = path.with_name(f".tmp-{path.name}")
    try:
        tmp.write_bytes(gzip.compress(json.dumps(record).encode("utf-8"), mtime=0))
        replace_durably(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_candidates_of(label_file: str | Path) -> DesignCandidates | None:
    """The candidates beside a label file, None when there are none (a design written before issue 83)."""
    import gzip

    path = candidates_path(label_file)
    if not path.is_file():
        return None
    try:
        data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
        return DesignCandidates(list(data["sentence1"]), list(data["sentence2"]), list(data["columns"]),
                                [list(row) for row in data["extra"]],
                                np.asarray(data["disagreement"], dtype=np.float64),
                                np.asarray(data["uniform"], dtype=np.float64))
    except (OSError, ValueError, KeyError, TypeError, EOFError) as error:
        raise DataError(f"{path}: not the candidates `sentadapt pairs` wrote ({error}); write the pairs "
                        "again") from None


def write_design(label_file: str | Path, design: Design) -> Path:
    from sentadapt.storage.durable import write_text_atomically

    path = design_path(label_file)
    write_text_atomically(path, json.dumps(design.to_dict(), indent=2) + "\n")
    return path


def labels_record(dev: str | Path | None, pairs: int, weighted: bool, rows: str | None = None,
                  keys: list[str] | None = None) -> dict[str, Any] | None:
    """What a decision read, for metrics.json: the dev file, its SHA-256, the digest of its labelled rows (`rows`:
    Evaluator.labels_digest, what a re-decision is keyed on), how many labelled pairs, whether they were weighted
    and the design beside them. None for a named dev set (stsb, sickr) or none."""
    import hashlib

    path = Path(dev) if dev is not None else None
    if path is None or not path.is_file():
        return None
    design = read_design(path)
    return {"file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "rows_sha256": rows,
            "pairs": pairs,
            "weighted": weighted, "design": design.to_dict() if design is not None else None, "row_keys": keys}


def weighted_note(labels: dict[str, Any] | None) -> str | None:
    """One line for a run's summary when its dev pairs carry weights: what the dev Δ then estimates."""
    if not labels or not labels["weighted"]:
        return None
    design = labels["design"]
    population = ("the corpus's pairs they were proposed from" if design and design.get("domain") == "corpus" else
                  f"the {design['candidates']} candidates they were chosen from" if design else "their population")
    return (f"{labels['pairs']} dev pairs weighted by their 'weight' column: the dev Δ estimates {population} "
            "(docs/decision.md)")


def read_design(label_file: str | Path) -> Design | None:
    """The design beside a label file, or None when there is none (a file of weights alone still decides)."""
    path = design_path(label_file)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        defaults = {"domain": "candidates", "round": 1}  # a design written before issue 83
        return Design(**{name: data[name] if name not in defaults else data.get(name, defaults[name])
                         for name in Design.__dataclass_fields__})
    except (ValueError, KeyError, TypeError) as error:
        raise DataError(f"{path}: not a design file written by `sentadapt pairs` ({error}); delete it, or write "
                        "the pairs again") from None
