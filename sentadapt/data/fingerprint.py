"""What identifies a run's local input files across machines and working directories: their absolute paths (so
`--resume` works from anywhere) and the sha256 of their bytes (so a resumed run refuses a corpus that changed,
where a size and mtime would differ after a mere copy to another node). Standard library only."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

CHUNK = 1 << 20  # 1 MiB reads: hashing runs at disk speed (≈ 1 s per GB) without holding the file in memory


def absolute(value: str | None) -> str | None:
    """A path that exists, made absolute (`~` expanded, `..` folded); anything else (a Hub id, `stsb`, `none`) as
    given."""
    if value is None:
        return None
    path = Path(value).expanduser()
    return os.path.abspath(path) if path.exists() else value


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprints(sources: Sequence[str]) -> list[str | None]:
    """Each local file's sha256 (None for a Hub dataset or a folder, which are not hashed)."""
    return [file_sha256(Path(source)) if Path(source).is_file() else None for source in sources]
