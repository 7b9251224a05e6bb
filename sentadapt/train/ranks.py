"""The processes of a training run (torchrun / accelerate launch set WORLD_SIZE), for work they share before the
loop starts: a teacher's or the base's table of every example, each encoding its share once."""

from __future__ import annotations

from typing import Any


def training_processes() -> Any:
    """The processes of this run (torchrun / accelerate launch set WORLD_SIZE), which build the teacher's table
    together: each encodes its share, once (embedding_cache._table_together). accelerate's process state is made
    here, before the Trainer's Accelerator, which reuses it."""
    import os

    from sentadapt.model.embedding_cache import Processes

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Processes()
    import torch
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return Processes(state.process_index, state.num_processes, state.wait_for_everyone)
