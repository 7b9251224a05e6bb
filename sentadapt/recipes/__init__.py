"""Recipes register themselves by name; importing this package registers the built-ins."""

from sentadapt.recipes import (
    clsr,  # noqa: F401  (registers "clsr")
    consert,  # noqa: F401  (registers "consert")
    sgopt,  # noqa: F401  (registers "sg-opt")
)
from sentadapt.recipes.base import RECIPES, LossOutput, Recipe, register_recipe

__all__ = ["RECIPES", "LossOutput", "Recipe", "register_recipe"]
