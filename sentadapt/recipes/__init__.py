"""Recipes register themselves by name; importing this package registers the built-ins.

A new recipe is one module here (a `RecipeBase` subclass decorated with `@register_recipe(NAME)`) imported
below, plus its YAML under recipes/. Imported by name, not discovered: the helper modules (losses.py) import
torch, which option checking must not load.
"""

from sentadapt.data.readers import TrainingData
from sentadapt.recipes import (
    clsr,  # noqa: F401  (registers "clsr")
    consert,  # noqa: F401  (registers "consert")
    sgopt,  # noqa: F401  (registers "sg-opt")
)
from sentadapt.recipes.base import RECIPES, Embedded, Recipe, RecipeBase, Term, register_recipe

DEFAULT_RECIPE = "consert"  # --recipe's default, when no --config file names one

__all__ = ["DEFAULT_RECIPE", "RECIPES", "Embedded", "Recipe", "RecipeBase", "Term", "TrainingData", "register_recipe"]
