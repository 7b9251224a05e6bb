"""train/objective.py: how the recipe's terms and the distillation term's kinds are weighed, scaled and summed.

Fake terms with known values stand in for a recipe, so each rule of the sum is checked by its arithmetic:
factor, the process count for a local term, a term taken once, recipe_weight, W and the logged parts."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sentadapt.recipes.base import Embedded, Term
from sentadapt.recipes.matryoshka import Matryoshka
from sentadapt.train.objective import Objective

VECTORS = torch.arange(1.0, 9.0).reshape(2, 4)  # rows [1, 2, 3, 4] and [5, 6, 7, 8]


def squares(cut):  # type: ignore[no-untyped-def]
    return cut(VECTORS).pow(2).sum()


class Fixed:
    """A recipe whose terms are given (no encoder pass); `exported`: the rows it hands a distillation term."""

    def __init__(self, terms: list[Term]) -> None:
        self.terms, self.calls = terms, []

    def embed(self, encoder, heads, batch, exported):  # type: ignore[no-untyped-def]
        self.calls.append(exported)
        return Embedded(self.terms, exported=VECTORS if exported else None)


class Distilled:
    """A distillation term of two kinds with known values, weight W and recipe_weight r; it records what it got."""

    def __init__(self, weight: float, recipe_weight: float) -> None:
        self.weight, self.recipe_weight, self.received = weight, recipe_weight, []

    def needs_recipe_loss(self, heads: nn.ModuleDict) -> bool:
        return self.recipe_weight > 0

    def terms(self, encoder, batch, exported=None, frozen_rows=None):  # type: ignore[no-untyped-def]
        self.received.append(exported)
        return [Term("kl", lambda cut: torch.tensor(2.0)), Term("cosine", lambda cut: torch.tensor(3.0), 0.5,
                                                                  sized=False)]


def test_terms_are_summed_with_their_factors_and_logged_before_them() -> None:
    whole = float(VECTORS.pow(2).sum())  # 204
    recipe = Fixed([Term("contrastive", squares), Term("classification", squares, factor=0.25),
                    Term("regularizer", lambda cut: torch.tensor(7.0), sized=False)])
    output = Objective(recipe)(None, nn.ModuleDict(), {})  # type: ignore[arg-type]
    assert output.total.item() == pytest.approx(whole + 0.25 * whole + 7.0)
    assert {name: value.item() for name, value in output.parts.items()} == {
        "contrastive": whole, "classification": whole, "regularizer": 7.0}
    assert recipe.calls == [False]  # no distillation term: the recipe is not asked for its exported rows


def test_sizes_apply_to_sized_terms_only() -> None:
    recipe = Fixed([Term("contrastive", squares), Term("regularizer", lambda cut: torch.tensor(7.0), sized=False)])
    output = Objective(recipe, Matryoshka.of((4, 2), (1.0, 0.5)))(None, nn.ModuleDict(), {})  # type: ignore[arg-type]
    prefix = float(VECTORS[:, :2].pow(2).sum())  # 1 + 4 + 25 + 36 = 66
    assert output.parts["contrastive"].item() == pytest.approx(204 + 0.5 * prefix)
    assert output.parts["regularizer"].item() == 7.0


def test_a_local_term_is_divided_by_the_process_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sentadapt.train.objective.world_size", lambda: 4)
    recipe = Fixed([Term("contrastive", squares), Term("classification", lambda cut: torch.tensor(8.0), local=True)])
    output = Objective(recipe)(None, nn.ModuleDict(), {})  # type: ignore[arg-type]
    assert output.total.item() == pytest.approx(204 + 8.0 / 4)  # the loop multiplies it back by 4: 8 per process
    assert output.parts["classification"].item() == 8.0


@pytest.mark.parametrize(("recipe_weight", "expected"), [(1.0, 204 + 3 * 3.5), (0.5, 102 + 3 * 3.5),
                                                         (0.0, 3 * 3.5)])
def test_distillation_adds_w_times_its_kinds_to_r_times_the_recipe(recipe_weight: float, expected: float) -> None:
    recipe = Fixed([Term("contrastive", squares)])
    distillation = Distilled(weight=3.0, recipe_weight=recipe_weight)
    output = Objective(recipe, distillation=distillation)(None, nn.ModuleDict(), {})  # type: ignore[arg-type]
    assert output.total.item() == pytest.approx(expected)  # D = 2 + 0.5 · 3 = 3.5, W = 3
    assert output.parts["distill"].item() == pytest.approx(3 * 3.5)
    if recipe_weight == 0:  # the term alone: the recipe's views are not computed
        assert recipe.calls == [] and distillation.received == [None]
    else:  # the recipe is asked for the exported rows, and the term gets them
        assert recipe.calls == [True] and distillation.received[0] is VECTORS
