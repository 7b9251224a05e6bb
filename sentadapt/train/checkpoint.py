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

from sentadapt.errors import SentadaptError

MANIFEST = "manifest.json"
CHECKPOINT_PREFIX = "step-"


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
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    _fsync_directory(folder)


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
        _fsync_directory(target.parent)
        if old.exists():
            shutil.rmtree(old)
    except BaseException:
        if old.exists() and not target.exists():
            os.replace(old, target)  # interrupted between the two renames: put the previous version back
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _fsync_directory(folder: Path) -> None:
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


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
    for path in files:
        destination = output / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        tmp = destination.parent / f".tmp-{destination.name}"
        shutil.copyfile(path, tmp)
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, destination)
