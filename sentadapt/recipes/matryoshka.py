"""`--matryoshka 384,192,96`: the prefix sizes (and their weights) every loss term is summed over; the objective
(train/objective.py) does the summing, for each recipe's terms and the distillation term alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sentadapt.errors import ConfigError

if TYPE_CHECKING:
    from torch import Tensor

Cut = Callable[["Tensor"], "Tensor"]  # what a Matryoshka term applies to every vector of the space it trains


def whole(vectors: Tensor) -> Tensor:
    """The cut of a term taken on the whole vectors (no --matryoshka, or a term that reads no vectors)."""
    return vectors


@dataclass(frozen=True)
class Matryoshka:
    """`--matryoshka 384,192,96`: a loss term summed over prefixes of the vectors, Σ_k w_k · L(v[:, :d_k]), as
    sentence-transformers' MatryoshkaLoss sums its wrapped loss over `matryoshka_dims`, so each prefix is itself an
    embedding. Default weights: the first (largest) size 2, each other 1 — sentence-transformers weighs all 1; why:
    research/findings.md, "Weighting the full size". Empty `dims`: the term on the whole vectors, exactly as without
    it. `Objective.sized` sums a term over them."""

    dims: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()

    @classmethod
    def of(cls, dims: Sequence[int], weights: Sequence[float]) -> Matryoshka:
        """TrainConfig's `matryoshka` and `matryoshka_weights` (validated there; none: default_weights)."""
        return cls(tuple(dims), tuple(weights) or default_weights(len(dims)))

    def check_width(self, width: int) -> None:
        """Each listed size must fit the exported vectors (a one-line ConfigError otherwise)."""
        if self.dims and self.dims[0] > width:
            raise ConfigError(f"--matryoshka: {self.dims[0]} is above this model's embedding width {width}; list "
                              f"sizes up to {width}, e.g. {_example_sizes(width)}")


FULL_SIZE_WEIGHT = 2.0  # the first --matryoshka size's default weight; each other size weighs 1


def default_weights(sizes: int) -> tuple[float, ...]:
    """`--matryoshka` without `matryoshka_weights`: the largest size FULL_SIZE_WEIGHT, each other 1 (one size: 1,
    the loss as without Matryoshka)."""
    if sizes <= 1:
        return (1.0,) * sizes
    return (FULL_SIZE_WEIGHT,) + (1.0,) * (sizes - 1)


def _example_sizes(width: int) -> str:
    return ",".join(str(size) for size in (width, width // 2, width // 4) if size >= 1)


WHOLE = Matryoshka()  # off
