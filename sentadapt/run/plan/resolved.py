"""A run worked out once: what `check_run` resolved and read before any weights load (the base model, the teacher,
the dev set, the recipe class; the prompt is resolved into its config), handed to `train_run` and `build_inputs`
so that nothing is parsed or resolved a second time."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.config.schema import RunConfig
from sentadapt.model.resolve import ResolvedModel, resolve_model

if TYPE_CHECKING:
    from sentadapt.evaluation.evaluator import Evaluator


@dataclass(frozen=True)
class DevSet:
    """The run's dev set: its display name (None: no dev set) and its evaluator, read from disk on first use and
    kept (a `--dry-run` never asks for it, so it never reads the whole file)."""

    name: str | None
    read: Callable[[], Evaluator] | None  # resolve_dev_set's factory: reads and checks the whole dev set

    @classmethod
    def of(cls, config: RunConfig) -> DevSet:
        """The dev set `config` names (its type and metric checked now; nothing read yet)."""
        from sentadapt.evaluation.task_types import resolve_dev_set

        return cls(*resolve_dev_set(config.dev, config.data_dir, config.dev_metric))

    @cached_property
    def evaluator(self) -> Evaluator | None:
        # cached_property writes the instance's __dict__ directly, so it works on a frozen dataclass
        return None if self.read is None else self.read()


def same_dev(config: RunConfig, other: RunConfig) -> bool:
    """Whether two configs name the same dev set (then one DevSet, read once, serves both)."""
    return (config.dev, config.data_dir, config.dev_metric) == (other.dev, other.data_dir, other.dev_metric)


@dataclass(frozen=True)
class ResolvedRun:
    """A RunConfig with what it names resolved: made by `run.plan.checks.check_run` (every check passed) or, for a
    config built by hand (tests, bench), by `resolve_run` (no checks)."""

    config: RunConfig
    base: ResolvedModel  # config.base resolved
    recipe_class: Any  # the recipe's class (a sentadapt.recipes.base.Recipe subclass)
    dev: DevSet
    # --teacher resolved: a model, or a vectors file; None: no teacher (config.teacher is the argument as given)
    teacher_source: ResolvedModel | Path | None = None

    def for_stage(self, stage_config: RunConfig) -> ResolvedRun:
        """The run of one stage: a later stage starts from the previous stage's model, a folder that exists only
        once that stage finished, so it is resolved here, once; the first stage keeps the checked base."""
        base = self.base if stage_config.base == self.config.base else resolve_model(stage_config.base)
        return dataclasses.replace(self, config=stage_config, base=base)


def resolve_run(config: RunConfig) -> ResolvedRun:
    """Resolve a config that `check_run` did not (a RunConfig built in code): no checks, each name resolved once."""
    from sentadapt.recipes import RECIPES
    from sentadapt.teacher import resolve_source

    source = None if config.teacher is None else resolve_source(config.teacher)
    return ResolvedRun(config, resolve_model(config.base), RECIPES.get(config.recipe), DevSet.of(config), source)
