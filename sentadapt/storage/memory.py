"""What the process keeps in memory, and what it hands back.

- `same_file_once`: a file parsed once per process while it is unchanged: a run asks for the same small files from
  several places (a model folder's modules.json and Pooling config, the --config YAML), and each should cost one
  read and one parse; `once_while_unchanged`, the same for anything computed from files (the dry run's count of a
  corpus, which each `--recipe auto` candidate plans with).
- `release_freed_memory`: freed memory handed back to the operating system, so a long step's peak does not stay
  resident: used after the teacher's table is keyed and written and after the neighbour search, before training
  starts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any


def release_freed_memory() -> None:
    """Hand what the last block freed back to the OS (Arrow's pool, then glibc's heap): a table's writer reads and
    encodes every text once, and the allocators would otherwise keep each block's high-water mark, so the peak
    would creep up with the corpus. A no-op where the C library has no malloc_trim."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


_COMPUTED: dict[tuple[Any, ...], Any] = {}
LIMIT = 256  # entries kept: a long-lived process (a notebook) reading many folders starts afresh above it


def once_while_unchanged(paths: Sequence[Path], key: Hashable, compute: Callable[[], Any]) -> Any:
    """`compute()`, remembered under `key` and each file's absolute path, modification time (ns) and size: asked
    again while every file is unchanged, it is not computed again; after a change it is. Callers that may change
    the result copy it."""
    files = tuple(_identity(path) for path in paths)  # FileNotFoundError for a missing file, as reading it would
    if (files, key) not in _COMPUTED:
        if len(_COMPUTED) > LIMIT:
            _COMPUTED.clear()
        _COMPUTED[files, key] = compute()
    return _COMPUTED[files, key]


def same_file_once(path: Path, parse: Callable[[Path], Any]) -> Any:
    """`parse(path)`, once while the file is unchanged (`once_while_unchanged`)."""
    return once_while_unchanged([path], None, lambda: parse(path))


def _identity(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size
