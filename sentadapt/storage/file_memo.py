"""Parse a file once per process while it is unchanged: a run asks for the same small files from several places
(a model folder's modules.json and Pooling config, the --config YAML), and each should cost one read and one parse.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

_PARSED: dict[tuple[str, int, int], Any] = {}
LIMIT = 256  # entries kept: a long-lived process (a notebook) reading many folders starts afresh above it


def same_file_once(path: Path, parse: Callable[[Path], Any]) -> Any:
    """`parse(path)`, remembered under the file's absolute path, modification time (ns) and size: a file read
    again while unchanged is not parsed again; a changed one is. Callers that may change the result copy it."""
    stat = path.stat()  # FileNotFoundError for a missing file, as reading it would raise
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        if len(_PARSED) > LIMIT:
            _PARSED.clear()
        _PARSED[key] = parse(path)
    return _PARSED[key]
