"""Disk space: what a path holds, a size as people read it, and the preflight check that a run fits.

Nothing here imports torch: the CLI runs the free-space check before any weights load.

A run directory holds, at its largest: `keep_checkpoints` checkpoints plus the one being written (each the
weights and AdamW's two moment tensors, so ~3× the weights), the best model twice while it is swapped, and
the published copy. The estimate is deliberately simple; `SENTADAPT_NO_SPACE_CHECK=1` skips it when it is
wrong for a filesystem (compression, quotas that `statvfs` does not see). A write that fails anyway becomes one
line (storage/durable.py's `describe_write_failure`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sentadapt.errors import StorageError

SKIP_ENV = "SENTADAPT_NO_SPACE_CHECK"
CHECKPOINT_FACTOR = 3  # weights + AdamW exp_avg + exp_avg_sq
BEST_AND_PUBLISHED_FACTOR = 3  # best/ (old and new during the atomic swap) + the published copy
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def free_bytes(path: Path) -> int:
    """Free space for an unprivileged writer on the filesystem holding `path` (the tests' seam)."""
    return shutil.disk_usage(path).free


def bytes_on_disk(path: Path) -> int:
    """A file's size, or the sum of a folder's files; 0 when nothing is there."""
    if path.is_file():
        return path.stat().st_size
    return sum(child.stat().st_size for child in path.rglob("*") if child.is_file()) if path.is_dir() else 0


def size_text(count: float) -> str:
    """A size in bytes as people read it: 512 B, 1.2 KB, 3.4 MB, 5.6 GB, 7.8 TB (powers of 1024, as `du -h` and
    `ls -lh` count)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(count) < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TB"


def weights_bytes(model_folder: Path) -> int | None:
    """Bytes of weight files in a local model folder (safetensors preferred); None when unknown (Hub id)."""
    if not model_folder.is_dir():
        return None
    files = [p for p in model_folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES]
    safetensors = [p for p in files if p.suffix == ".safetensors"]
    chosen = safetensors or files
    return sum(p.stat().st_size for p in chosen) if chosen else None


def estimate_run_bytes(weights: int, keep_checkpoints: int) -> int:
    checkpoints = CHECKPOINT_FACTOR * weights * (keep_checkpoints + 1)
    return checkpoints + BEST_AND_PUBLISHED_FACTOR * weights


def check_free_space(output: Path, weights: int, keep_checkpoints: int, output_is_room: bool = True) -> None:
    """Raise StorageError before training when the run cannot fit. What `output` already holds counts as room when
    the run reuses it (`output_is_room`); not under --overwrite, which keeps the run it replaces until the new one
    has finished (run/execute.py)."""
    if os.environ.get(SKIP_ENV) == "1":
        return
    existing = output
    while not existing.exists():
        existing = existing.parent
    need = estimate_run_bytes(weights, keep_checkpoints) - (bytes_on_disk(output) if output_is_room else 0)
    free = free_bytes(existing)
    if need > free:
        raise StorageError(
            f"--output {output}: needs about {size_text(need)} free for checkpoints and the model, but "
            f"{existing} has {size_text(free)}; free space, pass --set keep_checkpoints=1, or set "
            f"{SKIP_ENV}=1 if the estimate is wrong"
        )
