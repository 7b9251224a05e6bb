"""Where sentadapt keeps what it can rebuild (prepared corpora, frozen encoders' vectors, this CPU's timings): one
folder, the user's to move or clear. Imports nothing heavy: `adapt --dry-run` reads it without torch."""

from __future__ import annotations

import os
from pathlib import Path

from sentadapt.errors import StorageError


def cache_dir() -> Path:
    """$SENTADAPT_CACHE, else $XDG_CACHE_HOME/sentadapt, else ~/.cache/sentadapt."""
    if os.environ.get("SENTADAPT_CACHE"):
        return Path(os.environ["SENTADAPT_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sentadapt"


def writable_cache_folder(folder: Path) -> Path:
    """`folder` inside the cache, created; a cache the user cannot write (read-only, a file in its place, no
    permission) is one line naming it and the two ways out, before any work is done."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(13, "not writable", str(folder))
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise StorageError(f"the cache folder {cache_dir()} cannot be written ({reason}: {error.filename or folder});"
                           " point $SENTADAPT_CACHE at a writable folder, or make this one writable") from error
    return folder
