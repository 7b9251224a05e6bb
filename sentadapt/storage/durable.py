"""Durable writes: what has been renamed into place survives a crash or a power cut.

A rename is atomic, but without fsync the kernel may persist the rename before the data it points to,
leaving a complete-looking file of zeros after a crash. The order used everywhere: write under a temporary
name, fsync the file, rename it into place, fsync the directory that holds the new name. Standard library
only, so every layer (data, train, evaluation caches, export) can use it.

Folders (model folders, checkpoints, exports) are written the same way as a whole: under a temporary name, every
file fsynced, a manifest of SHA-256 sums written last, then renamed into place in one step — a reader sees the
old folder or the new one, never a half-written one, and `verify_folder` detects a truncated or corrupted one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sentadapt.errors import CheckpointError, StorageError

MANIFEST = "manifest.json"
TMP_PREFIX = ".tmp-"  # a write in progress (or killed): never read, removed by recover_interrupted_writes
OLD_PREFIX = ".old-"  # the previous version of a folder, kept until its replacement is in place
# errnos of a write that the user can fix (space, size limit, permissions, read-only or failing disk)
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})
_TORCH_WRITER_MARKERS = ("inline_container.cc", "PytorchStreamWriter")


def fsync(path: Path) -> None:
    """Flush a file's data, or a directory's entries (new names, renames), to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def replace_durably(tmp: Path, target: Path) -> None:
    """Rename the finished file or folder `tmp` onto `target`: data first, then the name, both on disk."""
    if tmp.is_file():
        fsync(tmp)
    os.replace(tmp, target)
    fsync(target.parent)


def write_text_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so that a reader (or a crash) sees the old content or the new, never half."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        tmp.write_text(text, encoding="utf-8")
        replace_durably(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def strict_json(data: Any) -> Any:
    """`data` with every non-finite float (NaN, ±inf: a correlation of constant scores, an overflow) as None, so
    what is written is JSON that every reader accepts (JSON has no NaN; Python's `json` would write one)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: strict_json(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [strict_json(value) for value in data]
    return data


def json_text(data: object, indent: int | None = None) -> str:
    """Strict JSON text (json.loads(..., allow_nan=False) reads it back) of `data`, one trailing newline."""
    return json.dumps(strict_json(data), indent=indent, allow_nan=False) + "\n"


def write_json_file(path: str | Path, data: object) -> Path:
    """`data` as indented, strict JSON at `path` (its folder made if missing), written atomically; returns the
    path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json_text(data, indent=2))
    return path


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read a MiB at a time: disk speed (≈ 1 s per GB) without holding the file in
    memory (manifests, what --overwrite may replace, a corpus's fingerprint for --resume)."""
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


@contextmanager
def atomic_folder(target: Path, manifest_extra: dict[str, Any] | None = None) -> Iterator[Path]:
    """`with atomic_folder(target) as folder:` write into `folder`, a temporary sibling; at the block's end a manifest
    is added and the folder swapped into `target` (the previous version kept if the block or the swap fails). A
    context manager rather than a callback, so the writer (a model, a checkpoint) is called by its owner."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    old = target.parent / f".old-{target.name}-{os.getpid()}"
    try:
        yield tmp
        _default_modes(tmp)
        files = {str(p.relative_to(tmp)): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
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


def _default_modes(folder: Path) -> None:
    """Every file and folder with the modes a plain write gives under the user's umask (0644 and 0755 under 022): a
    library that writes through a private temporary file (sentence-transformers' weights: 0600) would otherwise
    leave one file of a shared model unreadable to the others."""
    umask = os.umask(0o022)
    os.umask(umask)
    for path in folder.rglob("*"):
        if not path.is_symlink():
            path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


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
        if file_sha256(path) != expected:
            raise CheckpointError(f"{path}: checksum mismatch (truncated or corrupted)")
    return manifest


def publish_model(source: Path, output: Path) -> dict[str, str]:
    """Copy a verified model folder's files into the run directory, each replaced atomically (temp + rename);
    returns their paths relative to it with their SHA-256 (what metrics.json records as the run's own model files:
    what `--overwrite` may replace, storage/ownership.py).

    The run directory is itself a sentence-transformers folder; `modules.json` is written last, so a
    reader never finds a model description that points at files from another step.
    """
    sums = verify_folder(source)["files"]
    files = sorted((p for p in source.rglob("*") if p.is_file() and p.name != MANIFEST),
                   key=lambda p: p.name == "modules.json")
    staged = _stage_copies(files, source, output)
    # Renames need no space and cannot half-happen: after the copies succeeded, the model appears in one
    # quick sequence (a disk that fills up during the copies leaves the run directory as it was).
    for tmp, destination in staged:
        os.replace(tmp, destination)
    fsync(output)
    return {name: sums[name] for name in sorted(str(path.relative_to(source)) for path in files)}


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


def describe_write_failure(error: BaseException) -> str | None:
    """The reason a write failed (e.g. "No space left on device"), or None when `error` is not a write failure.

    torch.save and safetensors do their own I/O in C++ / Rust, so a full disk reaches Python as a RuntimeError
    or a SafetensorError instead of an OSError; both are recognised by their messages.
    """
    if isinstance(error, OSError):
        return (error.strerror or str(error)) if error.errno in WRITE_ERRNOS else None
    text = str(error)
    if type(error).__name__ == "SafetensorError" and "I/O error" in text:
        return text.split("I/O error:", 1)[1].strip()
    if isinstance(error, RuntimeError) and any(marker in text for marker in _TORCH_WRITER_MARKERS):
        return "torch.save could not write the file"
    return None
