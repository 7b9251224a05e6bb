"""A new run's config, assembled in one place: every run (plain, staged, each `--recipe auto` candidate) gets its
RunConfig from `assemble`, which layers, lowest first: the dataclass defaults < the recipe's paper settings < the
preset for the base (the tuned-base defaults, and the teacher-run defaults with --teacher) < the `--config` file
< flags < `--set` and the API's config keywords < a candidate's own settings (`consert:lr=1e-5`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sentadapt.config.schema import RunConfig
from sentadapt.errors import ConfigError
from sentadapt.model.resolve import ResolvedModel
from sentadapt.run.plan.settings import Settings


def recipe_of(config_file: Path | None) -> str | None:
    if config_file is None:
        return None
    from sentadapt.config.merging import load_yaml

    return load_yaml(config_file).get("recipe")


def new_config(settings: Settings) -> RunConfig:
    """The config of a new run (`assemble`'s layers)."""
    return new_config_and_base(settings)[0]


def new_config_and_base(settings: Settings) -> tuple[RunConfig, ResolvedModel | None]:
    """`new_config`, and the base model when preset detection resolved it (None when it did not need it): given to
    `check_run` so that the base is resolved once."""
    from sentadapt.model.resolve import DEFAULT_BASE_MODEL, resolve_model

    if not settings.corpus:
        raise ConfigError("CORPUS: give at least one corpus file (or --resume to continue a run)")
    recipe_name = settings.recipe or recipe_of(settings.config_file) or "consert"
    base_name = settings.base or DEFAULT_BASE_MODEL
    resolved: list[ResolvedModel] = []

    def resolve_base() -> ResolvedModel:
        resolved.append(resolve_model(base_name))
        return resolved[0]

    config = assemble(recipe_name, settings, resolve_base, corpus=list(settings.corpus), output=str(settings.output))
    return config, resolved[0] if resolved else None


def assemble(recipe_name: str, settings: Settings, resolve_base: Callable[[], ResolvedModel], *, corpus: list[str],
             output: str, yaml_train: dict[str, Any] | None = None,
             candidate_values: dict[str, Any] | None = None) -> RunConfig:
    """Every run's RunConfig, in the layers of the module docstring, lowest first. `resolve_base()` gives the base
    model when the preset needs to look at it (called at most once). A single run reads its `--config` file (its
    train and recipe_args); `--recipe auto` gives the file's `train:` values (`yaml_train`, read once for every
    candidate) and each candidate's own settings (`candidate_values`, above everything)."""
    from sentadapt.config.merging import build_config
    from sentadapt.model.resolve import DEFAULT_BASE_MODEL
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.presets import choose_preset

    recipe_class = RECIPES.get(recipe_name)
    # the preset: the tuned-base defaults when the base is sentence-tuned, and the teacher-run defaults on top
    preset = choose_preset(settings.preset, resolve_base, recipe_class, settings.flags.get("teacher") is not None)
    config = build_config(recipe_name, recipe_class.Config, recipe_class.train_defaults, settings.config_file,
                          settings.train_flags(), list(settings.set_options), set_values=settings.set_values,
                          yaml_train=yaml_train, candidate_values=candidate_values,
                          preset_values=preset.values, preset=preset.to_dict(),
                          base=settings.base or DEFAULT_BASE_MODEL, corpus=corpus, output=output,
                          **settings.run_flags())
    return dataclasses.replace(config, sources={**config.sources,
                                                **_run_sources(settings, candidate_values, config.sources)})


def _run_sources(settings: Settings, candidate_values: dict[str, Any] | None, built: dict[str, str]) -> dict[str, str]:
    """Where the run's own options came from (a flag, or their default; an auto candidate's recipe is the
    candidate's), as `--dry-run` shows them beside the training values' (`built`: build_config's)."""
    from sentadapt.config.merging import CANDIDATE, DEFAULT, FLAG
    from sentadapt.run.adapt_options import ADAPT_OPTIONS, RUN

    # a value equal to the option's default is the default: the command line passes --decision, --risk,
    # --encoding-errors and --streaming with their defaults whether typed or not
    given = {"base": settings.base, "recipe": settings.recipe, **settings.run_flags()}
    sources = {option.name: FLAG if given.get(option.name) not in (None, option.default) else DEFAULT
               for option in ADAPT_OPTIONS if option.target == RUN or option.name in ("recipe", "base")}
    if candidate_values is not None:
        sources["recipe"] = CANDIDATE
    elif settings.recipe is None:  # the --config file's, when it names one (build_config read it)
        sources["recipe"] = built.get("recipe", DEFAULT)
    return sources
