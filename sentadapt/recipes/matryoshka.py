"""`--matryoshka 384,192,96`: a loss term summed over prefixes of the vectors (sentence-transformers' MatryoshkaLoss);
every recipe's loss and the distillation term go through `Matryoshka.total`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sentadapt.errors import ConfigError

if TYPE_CHECKING:
    from torch import Tensor

Cut = Callable[["Tensor"], "Tensor"]  # what a Matryoshka term applies to every vector of the space it trains


@dataclass(frozen=True)
class Matryoshka:
    """`--matryoshka 384,192,96`: a loss term summed over prefixes of the vectors, Σ_k w_k · L(v[:, :d_k]), as
    sentence-transformers' MatryoshkaLoss sums its wrapped loss over `matryoshka_dims`, so each prefix is itself an
    embedding. Default weights: the first (largest) size 2, each other 1 — sentence-transformers weighs all 1; why:
    research/findings.md, "Weighting the full size". Empty `dims`: the term on the whole vectors, exactly as without
    it. Every recipe's loss and the distillation term go through `total`."""

    dims: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()

    @classmethod
    def of(cls, dims: Sequence[int], weights: Sequence[float]) -> Matryoshka:
        """TrainConfig's `matryoshka` and `matryoshka_weights` (validated there; none: default_weights)."""
        return cls(tuple(dims), tuple(weights) or default_weights(len(dims)))

    def total(self, term: Callable[[Cut], Tensor]) -> Tensor:
        """`term(cut)`: the loss with `cut` applied to the vectors it compares (the identity when off)."""
        if not self.dims:
            return term(_whole)
        from functools import partial

        from sentadapt.recipes.losses import keep_prefix

        total: Tensor | None = None
        for dim, weight in zip(self.dims, self.weights, strict=True):
            value = term(partial(keep_prefix, dim=dim))
            value = value if weight == 1 else weight * value
            total = value if total is None else total + value
        assert total is not None
        return total

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


def _whole(vectors: Tensor) -> Tensor:
    return vectors


def _example_sizes(width: int) -> str:
    return ",".join(str(size) for size in (width, width // 2, width // 4) if size >= 1)


WHOLE = Matryoshka()  # off
