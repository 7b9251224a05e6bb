"""What a run is asked for (`Settings`: the CLI's flags, the API's keywords) and where it reports what happens
(`Events`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.config.schema import FLAT_KEYS, RunConfig
from sentadapt.events import Note, Progress, quiet
from sentadapt.train.ranks import is_main_process

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
    # the options given that set config fields, by config key (run/adapt_options.py: their types are the fields'):
    # a TrainConfig flat key (lr, batch_size, lora_r, …) or a RunConfig field (dev, teacher, decision, …)
    flags: dict[str, ConfigValue] = field(default_factory=dict)
    # any TrainConfig or recipe field as a typed value (the API's keywords beyond its options): --set's precedence
    set_values: dict[str, ConfigValue] = field(default_factory=dict)

    def train_flags(self) -> dict[str, ConfigValue]:
        """The flags that set TrainConfig fields, by flat key."""
        return {key: value for key, value in self.flags.items() if key in FLAT_KEYS}

    def run_flags(self) -> dict[str, ConfigValue]:
        """The flags that set RunConfig fields."""
        return {key: value for key, value in self.flags.items() if key not in FLAT_KEYS}

    @property
    def num_proc(self) -> int | None:
        """--num-proc: the one setting of the machine, not the run (a resumed run applies it)."""
        value = self.flags.get("num_proc")
        return value if isinstance(value, int) else None
