"""What the cache folder holds ($SENTADAPT_CACHE: prepared corpora, frozen encoders' embeddings, incomplete
temporaries), how big, and removing it: `sentadapt cache info|clear`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from sentadapt.data.prepare import COMPLETE, TMP_PREFIX, cache_dir, corpora_dir
from sentadapt.storage.space import bytes_on_disk, size_text
from sentadapt.text_tables import TextTable


@dataclass
class CacheEntry:
    path: Path
    kind: str  # text | tokens | embeddings | incomplete
    bytes: int


def cache_entries() -> list[CacheEntry]:
    """Everything under the cache folder: corpus entries, embedding files, and incomplete temporaries."""
    entries: list[CacheEntry] = []
    corpora = corpora_dir()
    if corpora.is_dir():
        for path in sorted(corpora.iterdir()):
            kind = "incomplete" if path.name.startswith(TMP_PREFIX) or not (path / COMPLETE).is_file() else (
                path.name.split("-", 1)[0])
            entries.append(CacheEntry(path, kind, bytes_on_disk(path)))
    embeddings = cache_dir() / "embeddings"
    if embeddings.is_dir():
        entries += [CacheEntry(path, "embeddings", bytes_on_disk(path)) for path in sorted(embeddings.iterdir())]
    return entries


def clear_cache() -> tuple[int, int]:
    """Remove every corpus and embedding cache entry; returns (entries, bytes) removed."""
    entries = cache_entries()
    for entry in entries:
        if entry.path.is_dir():
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            entry.path.unlink(missing_ok=True)
    return len(entries), sum(entry.bytes for entry in entries)


def cache_table(entries: list[CacheEntry]) -> TextTable:
    """`sentadapt cache info`'s table: each entry's kind, name and size."""
    table = TextTable(f"sentadapt cache: {cache_dir()}")
    table.column("kind")
    table.column("entry")
    table.column("size", right=True)
    for entry in entries:
        table.row(entry.kind, entry.path.name, size_text(entry.bytes))
    return table


def cache_summary(entries: list[CacheEntry]) -> str:
    total = sum(entry.bytes for entry in entries)
    return (f"{len(entries)} entries, {size_text(total)} in {cache_dir()} (set $SENTADAPT_CACHE to move it; "
            "`sentadapt cache clear` removes it)")


def cleared_line(count: int, size: int) -> str:
    return f"removed {count} entries ({size_text(size)}) from {cache_dir()}"
