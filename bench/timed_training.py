"""One sentadapt training run for the benchmarks, with data preparation and the training loop timed apart.

Imported by bench.bench_train and bench.bench_clsr.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class TimedRun:
    prepare_seconds: float  # model load + data reading/tokenising (+ CLSR's cached vectors)
    train_seconds: float  # the training loop alone, from its first step to its end
    inputs: Any  # the TrainingInputs the run used (encoder, examples)


def timed_run(recipe_name: str, flags: dict[str, Any], *, base: str, corpus: list[str], output: str,
              device: str | None = None) -> TimedRun:
    """Train `recipe_name` with its defaults overridden by `flags`, no dev set; return the two timings."""
    from sentadapt.config.merging import build_config
    from sentadapt.recipes import RECIPES
    from sentadapt.run.execute import train_stage
    from sentadapt.run.inputs import build_inputs
    from sentadapt.train.loop import SilentReporter, Trainer

    class LoopClock(SilentReporter):
        def start(self, total_steps: int, start_step: int) -> None:
            self.started = time.perf_counter()

        def finish(self) -> None:
            self.seconds = time.perf_counter() - self.started

    recipe = RECIPES.get(recipe_name)
    config = build_config(recipe_name, recipe.spec.settings, recipe.spec.train_defaults, None, flags, [], base=base,
                          corpus=corpus, output=output, dev="none")
    Path(output).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    inputs = build_inputs(config, lambda _text: None, device=device)
    prepare_seconds = time.perf_counter() - started
    clock = LoopClock()
    train_stage(Trainer(inputs, clock))  # the run folder as `adapt` leaves it: model published, metrics.json
    return TimedRun(prepare_seconds, clock.seconds, inputs)
