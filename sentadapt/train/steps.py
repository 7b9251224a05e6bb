"""How many steps a run trains and how often it scores the dev set: arithmetic of its example count and its config,
without torch, so that the loop and `adapt --dry-run` (which counts the corpus's sentences as the run will) agree."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sentadapt.config.schema import RunConfig
from sentadapt.errors import ConfigError


@dataclass(frozen=True)
class StepPlan:
    """What a run of `examples` examples trains: `steps` optimizer steps, `passes` over the examples (the epochs
    the run plans; with max_steps, the share of them its steps take), the dev set scored every `eval_every` steps (0:
    at the end only)."""

    examples: int
    steps: int
    passes: float
    eval_every: int
    noun: str = "sentence"  # what an example is (Stage.noun)
    problem: str | None = None  # why the run would stop before its first step (then steps is 0)
    stage: str = ""  # the stage's name, in a run of several (ConSERT's sup-unsup)
    counted: bool = True  # False: the examples are counted only when the run reads them (a Hub dataset)

    @classmethod
    def uncounted(cls, config: RunConfig, noun: str = "sentence", stage: str = "") -> StepPlan:
        """A stage whose examples are known only once read: its steps are --max-steps' (0 when epochs set them)."""
        return cls(0, config.train.max_steps, 0.0, 0, noun, stage=stage, counted=False)

    @classmethod
    def of(cls, examples: int, config: RunConfig, noun: str = "sentence", stage: str = "") -> StepPlan:
        try:
            steps = total_steps_for(examples, config)
        except ConfigError as error:  # fewer examples than one step: the dry run says so beside the config it prints
            return cls(examples, 0, 0.0, 0, noun, str(error), stage)
        per_step = config.train.batch_size * config.train.grad_accum
        passes = steps * per_step / examples if config.train.max_steps else passes_for(examples, config)
        return cls(examples, steps, passes, eval_interval(examples, config), noun, stage=stage)


def steps_per_epoch(examples: int, config: RunConfig) -> int:
    return (examples // config.train.batch_size) // config.train.grad_accum


def total_steps_for(examples: int, config: RunConfig) -> int:
    per_epoch = steps_per_epoch(examples, config)
    if per_epoch == 0:
        # the smallest batch is 2 (a contrastive step needs an in-batch negative): below that only data helps
        fix = ("add data: a contrastive step needs at least 2 sentences" if examples < 2 * config.train.grad_accum
               else "lower --batch-size or add data")
        raise ConfigError(
            f"the corpus has {examples} example{'' if examples == 1 else 's'}, fewer than one step of batch_size "
            f"{config.train.batch_size} × "
            f"grad_accum {config.train.grad_accum}; {fix}"
        )
    return config.train.max_steps or max(1, math.ceil(passes_for(examples, config) * per_epoch))


def passes_for(examples: int, config: RunConfig) -> float:
    """`epochs`, or with min_examples: enough passes to train on that many examples, within [epochs, max_epochs]
    (20,000 examples: a 2,700-sentence corpus gets 4 passes at max_epochs 4, 8,300 sentences 2.4, 100,000 one)."""
    train = config.train
    if not train.min_examples:
        return train.epochs
    return max(train.epochs, min(train.max_epochs, train.min_examples / examples))


def eval_interval(examples: int, config: RunConfig) -> int:
    """Steps between dev evaluations: eval_every, or a pass over the data / evals_per_pass (0: only at the end)."""
    if config.train.evaluation.evals_per_pass <= 0:
        return config.train.evaluation.eval_every
    return max(1, round(steps_per_epoch(examples, config) / config.train.evaluation.evals_per_pass))
