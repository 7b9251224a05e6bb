"""The processes of a run (torchrun / accelerate launch set RANK and WORLD_SIZE): which one this is (rank 0 writes
the run directory and talks to the user), the device it trains on, the processes together for the work they share
before the loop starts (a teacher's or the base's table of every example, each encoding its share once), and the
process group released when the command ends."""

from __future__ import annotations

import os
import sys
from typing import Any


def training_processes() -> Any:
    """The processes of this run (torchrun / accelerate launch set WORLD_SIZE), which build the teacher's table
    together: each encodes its share, once (embedding_cache._table_together). accelerate's process state is made
    here, before the Trainer's Accelerator, which reuses it."""
    from sentadapt.model.embedding_cache import Processes

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Processes()
    import torch
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return Processes(state.process_index, state.num_processes, state.wait_for_everyone)


def is_main_process() -> bool:
    # accelerate launch / torchrun set RANK; only rank 0 writes the run directory and talks to the user
    return int(os.environ.get("RANK", "0")) == 0


def release_processes() -> None:
    """Destroy the process group that torchrun / accelerate launch set up, when the process is about to end: a
    gloo or NCCL group left to the interpreter's exit can abort the process there ("terminate called without an
    active exception"), after the work is done. Not inside a run: --recipe auto and later stages reuse the group.
    Imports nothing: a command that failed before torch was imported (a bad option) does not import it here, and
    one stopped by Ctrl-C while torch was being imported does not import it again from a half-made module."""
    dist = sys.modules.get("torch.distributed")
    is_available = getattr(dist, "is_available", None)
    is_initialized = getattr(dist, "is_initialized", None)
    if is_available is None or is_initialized is None:  # not imported, or its import was cut short
        return
    if is_available() and is_initialized():
        dist.destroy_process_group()  # type: ignore[union-attr]


def training_device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"
