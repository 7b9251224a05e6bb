"""Atomic, verifiable checkpoints and model folders.

Every folder is written under a temporary name, its files fsynced, a manifest of SHA-256 sums
written last, then renamed into place in one step: a reader sees the old folder or the new one,
never a half-written one. Loading checks the manifest, so a truncated or corrupted checkpoint is
detected (and the previous one used instead).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from sentadapt.durable import fsync
from sentadapt.errors import SentadaptError, StorageError
from sentadapt.train.storage import describe_write_failure

MANIFEST = "manifest.json"
CHECKPOINT_PREFIX = "step-"
TMP_PREFIX = ".tmp-"  # a write in progress (or killed): never read, removed by recover_interrupted_writes
OLD_PREFIX = ".old-"  # the previous version of a folder, kept until its replacement is in place


class CheckpointError(SentadaptError):
    """A checkpoint that fails verification."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            fsync(path)
    fsync(folder)


def write_folder_atomically(target: Path, write: Callable[[Path], None], manifest_extra: dict[str, Any] | None = None,
                            ) -> None:
    """Run `write(tmp)` into a temporary sibling folder, add a manifest, then swap it into `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    old = target.parent / f".old-{target.name}-{os.getpid()}"
    try:
        write(tmp)
        files = {str(p.relative_to(tmp)): _sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        (tmp / MANIFEST).write_text(json.dumps({"files": files, **(manifest_extra or {})}, indent=1) + "\n")
        _fsync_tree(tmp)
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
        fsync(target.parent)
        if old.exists():
            shutil.rmtree(old)
    except BaseException as error:
        if old.exists() and not target.exists():
            os.replace(old, target)  # interrupted between the two renames: put the previous version back
        shutil.rmtree(tmp, ignore_errors=True)
        reason = describe_write_failure(error)  # disk full, file too large, no permission: one readable line
        if reason is None:
            raise
        raise StorageError(f"{target}: could not be written ({reason})") from None


def verify_folder(folder: Path) -> dict[str, Any]:
    """Check every file against the manifest; return the manifest or raise CheckpointError naming the file."""
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(f"{folder}: no {MANIFEST}; the checkpoint is incomplete")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError:
        raise CheckpointError(f"{manifest_path}: corrupted") from None
    for name, expected in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"{path}: missing from the checkpoint")
        if _sha256(path) != expected:
            raise CheckpointError(f"{path}: checksum mismatch (truncated or corrupted)")
    return manifest


def list_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint folders, newest step first."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX)]
    return sorted(found, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX):]), reverse=True)


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


def checkpoint_name(step: int) -> str:
    return f"{CHECKPOINT_PREFIX}{step:07d}"


def prune_checkpoints(folder: Path, keep: int) -> None:
    for old in list_checkpoints(folder)[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def publish_model(source: Path, output: Path) -> None:
    """Copy a verified model folder's files into the run directory, each replaced atomically (temp + rename).

    The run directory is itself a sentence-transformers folder; `modules.json` is written last, so a
    reader never finds a model description that points at files from another step.
    """
    verify_folder(source)
    files = sorted((p for p in source.rglob("*") if p.is_file() and p.name != MANIFEST),
                   key=lambda p: p.name == "modules.json")
    staged = _stage_copies(files, source, output)
    # Renames need no space and cannot half-happen: after the copies succeeded, the model appears in one
    # quick sequence (a disk that fills up during the copies leaves the run directory as it was).
    for tmp, destination in staged:
        os.replace(tmp, destination)
    fsync(output)


def _stage_copies(files: list[Path], source: Path, output: Path) -> list[tuple[Path, Path]]:
    """Copy each file next to its destination under a temporary name (fsynced); on failure remove them all."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path in files:
            destination = output / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            tmp = destination.parent / f"{TMP_PREFIX}{destination.name}"
            staged.append((tmp, destination))
            shutil.copyfile(path, tmp)
            fsync(tmp)
    except BaseException as error:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        reason = describe_write_failure(error)
        if reason is None:
            raise
        raise StorageError(f"{output}: the model could not be published ({reason}); no model file was "
                           "replaced") from None
    return staged


def recover_interrupted_writes(output: Path) -> list[str]:
    """After a crash (kill -9, power cut): put back folders caught between their two renames, delete temporaries.

    Only safe while holding the run's lock: a live writer's temporary files look exactly the same.
    Returns what was done, one line per item, for the caller to report.
    """
    if not output.is_dir():
        return []
    done = _recover_folder(output)  # first, so the subfolders listed next are the recovered ones
    for folder in sorted(p for p in output.iterdir() if p.is_dir()):
        done += _recover_folder(folder)  # checkpoints/, and the published model's module folders
    return done


def _recover_folder(folder: Path) -> list[str]:
    done: list[str] = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(OLD_PREFIX):
            original = folder / path.name[len(OLD_PREFIX):].rsplit("-", 1)[0]
            if not original.exists():
                os.replace(path, original)  # the new version never landed: the old one is the valid one
                done.append(f"restored {original} from an interrupted write")
                continue
        if path.name.startswith((OLD_PREFIX, TMP_PREFIX)):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            done.append(f"removed {path}, left by an interrupted write")
    return done


# ---------------------------------------------------------------------------------- training checkpoints
# A training checkpoint (checkpoints/step-NNNNNNN/) holds what exact resume needs: the TrainingModule's
# weights (safetensors), optimizer, scheduler and (fp16) grad-scaler state, every process's RNG state and
# the trainer state (JSON). The loop decides when to write one and which process does what; these
# functions only read and write the files.

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

    def write(folder: Path) -> None:
        state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
        save_file(state, str(folder / "model.safetensors"))
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        torch.save(scheduler.state_dict(), folder / "scheduler.pt")
        if scaler is not None:  # fp16 loss scale: without it resume re-warms the scale
            torch.save(scaler.state_dict(), folder / "scaler.pt")
        for rank_file in checkpoints.glob(".rng-rank*.pt"):
            os.replace(rank_file, folder / rank_file.name[1:])
        (folder / "trainer_state.json").write_text(json.dumps(trainer_state, indent=1) + "\n")

    write_folder_atomically(path, write, {"step": step})
    prune_checkpoints(checkpoints, keep)
    return path


def load_training_checkpoint(folder: Path, module: torch.nn.Module, optimizer: Any, scheduler: Any, scaler: Any,
                             rank: int, world: int) -> dict[str, Any]:
    """Load a verified checkpoint into the given objects and this process's RNG; returns the trainer state."""
    from sentadapt.errors import ConfigError

    module.load_state_dict(load_file(str(folder / "model.safetensors")))
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
