"""Durable writes: what has been renamed into place survives a crash or a power cut.

A rename is atomic, but without fsync the kernel may persist the rename before the data it points to,
leaving a complete-looking file of zeros after a crash. The order used everywhere: write under a temporary
name, fsync the file, rename it into place, fsync the directory that holds the new name. Standard library
only, so every layer (data, train, evaluation caches) can use it.
"""

from __future__ import annotations

import os
from pathlib import Path


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


def write_json_file(path: str | Path, data: object) -> Path:
    """`data` as indented JSON at `path` (its folder made if missing), written atomically; returns the path."""
    import json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps(data, indent=2) + "\n")
    return path
