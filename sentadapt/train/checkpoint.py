"""Training checkpoints (checkpoints/step-NNNNNNN/): what exact resume needs, written and read.

A checkpoint holds the TrainingModule's weights (safetensors), optimizer, scheduler and (fp16) grad-scaler state,
every process's RNG state and the trainer state (JSON). It is written as an atomic, verified folder
(durable.atomic_folder); resume takes the newest one that verifies (a truncated or corrupted one is
skipped). The loop decides when to write one and which process does what; the run directory's layout (where
checkpoints live, their names) is run_folder.py's.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from sentadapt.errors import CheckpointError
from sentadapt.storage.durable import atomic_folder, verify_folder
from sentadapt.storage.run_folder import CHECKPOINT_WEIGHTS_FILE, checkpoint_name, list_checkpoints


def newest_usable_checkpoint(folder: Path, report: Callable[[str], None]) -> Path | None:
    """The newest checkpoint that passes verification; each one skipped is reported with the reason."""
    for candidate in list_checkpoints(folder):
        try:
            verify_folder(candidate)
        except CheckpointError as error:
            report(f"skipping checkpoint: {error}")
            continue
        return candidate
    return None


def prune_checkpoints(folder: Path, keep: int) -> None:
    for old in list_checkpoints(folder)[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def stage_rng_state(checkpoints: Path, rank: int) -> None:
    """Each process leaves its RNG state beside the checkpoints; the main process moves them all in."""
    checkpoints.mkdir(parents=True, exist_ok=True)
    torch.save(rng_state(), checkpoints / f".rng-rank{rank}.pt")


def write_training_checkpoint(checkpoints: Path, step: int, module: torch.nn.Module, optimizer: Any, scheduler: Any,
                              scaler: Any, trainer_state: dict[str, Any], keep: int) -> Path:
    """Write checkpoint `step` atomically (with the staged RNG states of every process), then keep the newest
    `keep`. Main process only, after every process ran `stage_rng_state`."""
    path = checkpoints / checkpoint_name(step)
    with atomic_folder(path, {"step": step}) as folder:
        state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
        save_file(state, str(folder / CHECKPOINT_WEIGHTS_FILE))
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        torch.save(scheduler.state_dict(), folder / "scheduler.pt")
        if scaler is not None:  # fp16 loss scale: without it resume re-warms the scale
            torch.save(scaler.state_dict(), folder / "scaler.pt")
        for rank_file in checkpoints.glob(".rng-rank*.pt"):
            os.replace(rank_file, folder / rank_file.name[1:])
        (folder / "trainer_state.json").write_text(json.dumps(trainer_state, indent=1) + "\n")
    prune_checkpoints(checkpoints, keep)
    return path


def load_training_checkpoint(folder: Path, module: torch.nn.Module, optimizer: Any, scheduler: Any, scaler: Any,
                             rank: int, world: int) -> dict[str, Any]:
    """Load a verified checkpoint into the given objects and this process's RNG; returns the trainer state."""
    from sentadapt.errors import ConfigError

    module.load_state_dict(load_file(str(folder / CHECKPOINT_WEIGHTS_FILE)))
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=True))
    if scaler is not None and (folder / "scaler.pt").is_file():
        scaler.load_state_dict(torch.load(folder / "scaler.pt", weights_only=True))
    rng_file = folder / f"rng-rank{rank}.pt"
    if not rng_file.is_file():
        raise ConfigError(f"--resume: {folder} was written by fewer processes than this run has "
                          f"({world}); resume with the same number of processes")
    set_rng_state(torch.load(rng_file, weights_only=True))
    return json.loads((folder / "trainer_state.json").read_text())
