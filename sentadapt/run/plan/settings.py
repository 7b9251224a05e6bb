"""What a run is asked for (`Settings`: the CLI's flags, the API's keywords) and where it reports what happens
(`Events`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.config import RunConfig
from sentadapt.events import Note, Progress, quiet
from sentadapt.run.adapt_options import RunFlags, TrainFlags
from sentadapt.run.execute.processes import is_main_process

# a config value given by name: what a TrainConfig or recipe field holds
ConfigValue = bool | int | float | str | tuple[int, ...] | tuple[float, ...] | tuple[str, ...] | None


@dataclass
class Events:
    """Where a run reports what happens. Every callback is optional; the defaults are silent."""

    note: Note = quiet  # one line: what was read, skipped, resumed, decided
    progress: Progress | None = None  # a progress bar for long preparations (corpus tokenizing, encoding)
    reporter: Callable[[], Any] | None = None  # a train.tracking.Reporter for the training line, made per stage
    stage_done: Callable[[Any, RunConfig], None] | None = None  # (TrainResult, the stage's RunConfig) per stage
    checkpoint_written: Callable[[Path], None] | None = None  # each checkpoint's folder, once it is complete

    def for_process(self) -> Events:
        """The events of this process: other ranks than 0 stay silent."""
        return self if is_main_process() else Events()


@dataclass
class Settings:
    """What a new single-recipe run is asked for (the CLI's flags, the API's keywords). None: the config decides."""

    corpus: Sequence[str] = ()
    output: Path = Path("runs/x")
    recipe: str | None = None
    base: str | None = None
    config_file: Path | None = None
    set_options: Sequence[str] = ()
    preset: str | None = None
    # the options that set config fields, typed dataclasses generated from the run spec (never a second list)
    flags: TrainFlags = field(default_factory=TrainFlags)  # TrainConfig fields: max_steps, lr, batch_size, …
    run_fields: RunFlags = field(default_factory=RunFlags)  # RunConfig fields: dev, dev_metric, decision, …
    # any TrainConfig or recipe field as a typed value (the API's keywords beyond its options): --set's precedence
    set_values: dict[str, ConfigValue] = field(default_factory=dict)
