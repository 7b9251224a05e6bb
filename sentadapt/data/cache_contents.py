"""What the cache folder holds ($SENTADAPT_CACHE: prepared corpora, frozen encoders' embeddings, this CPU's timings
of a training pass, incomplete temporaries), how big, and removing it: `sentadapt cache info|clear`."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import safe_open

from sentadapt.data.prepare import COMPLETE, TMP_PREFIX, corpora_dir
from sentadapt.storage.cache_folder import cache_dir
from sentadapt.storage.space import bytes_on_disk, size_text
from sentadapt.text_tables import TextTable, model_label, some_of

HOLDS = "holds"  # the key saying what an embeddings entry holds: a .safetensors file's metadata, a table's sidecar


def described_by(table: Path) -> Path:
    """The sidecar of a .npy table naming its source (a .npy header has no room for it)."""
    return table.with_suffix(".json")


@dataclass
class CacheEntry:
    path: Path
    kind: str  # text | tokens | embeddings | timings | incomplete
    bytes: int
    holds: str = ""  # what the entry is made of, for a person: "sentences of c.txt (200)"


def cache_entries() -> list[CacheEntry]:
    """Everything under the cache folder: corpus entries, embedding files (a table with its sidecar), and
    incomplete temporaries, each with what it holds."""
    entries: list[CacheEntry] = []
    corpora = corpora_dir()
    if corpora.is_dir():
        for path in sorted(corpora.iterdir()):
            kind = "incomplete" if path.name.startswith(TMP_PREFIX) or not (path / COMPLETE).is_file() else (
                path.name.split("-", 1)[0])
            entries.append(CacheEntry(path, kind, bytes_on_disk(path), _corpus_holds(path, kind, corpora)))
    embeddings = cache_dir() / "embeddings"
    if embeddings.is_dir():
        for path in sorted(embeddings.iterdir()):
            sidecar = described_by(path)
            if path.suffix == ".json" and path.with_suffix(".npy").exists():
                continue  # counted with its table
            size = bytes_on_disk(path) + (bytes_on_disk(sidecar) if path.suffix == ".npy" and sidecar.exists() else 0)
            entries.append(CacheEntry(path, "embeddings", size, _embeddings_holds(path)))
    timings = cache_dir() / "pass-costs"  # train/pass_costs.py: a training pass timed on this CPU, per model
    if timings.is_dir():
        for path in sorted(timings.glob("*.json")):
            entries.append(CacheEntry(path, "timings", bytes_on_disk(path), _timings_holds(path)))
    return entries


def _timings_holds(path: Path) -> str:
    holds = _read_json(path).get(HOLDS)  # written with the timings (train/pass_costs.py)
    return str(holds) if holds else "a file sentadapt did not write"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _corpus_holds(path: Path, kind: str, corpora: Path) -> str:
    if kind == "text":
        report = _read_json(path / "report.json")
        if "files" in report:
            return f"sentences of {_sources(report['files'])} ({report.get('sentences', '?')})"
        return f"NLI pairs of {report.get('source', '?')} ({report.get('pairs', '?')})"
    if kind == "tokens":
        holds = _read_json(path / "meta.json").get("holds")
        if not isinstance(holds, dict):
            return "token ids (written before entries named their source)"
        text = _corpus_holds(corpora / str(holds.get("text")), "text", corpora)
        return (f"token ids of the {text.split(' (')[0]} by {model_label(str(holds.get('tokenizer')))}, "
                f"max {holds.get('max_length')}")
    return "an interrupted preparation (removed by the next one)"


def _embeddings_holds(path: Path) -> str:
    if path.suffix == ".npy":
        sidecar = _read_json(described_by(path))
        return f"{sidecar[HOLDS]} ({sidecar.get('rows', '?')} texts)" if HOLDS in sidecar else "a table of vectors"
    if path.suffix == ".safetensors":
        try:
            with safe_open(str(path), framework="np") as handle:
                holds = (handle.metadata() or {}).get(HOLDS)
                rows = handle.get_slice("vectors").get_shape()[0]
        except Exception:  # a damaged or foreign file: listed, described by nothing more
            return "an unreadable file"
        return f"{holds or 'vectors'} ({rows} texts)"
    return "an interrupted write" if path.name.startswith(TMP_PREFIX) else "a file sentadapt did not write"


def _short_entry(name: str) -> str:
    """An entry's name by its kind and the first 8 hex digits of its key ("text-5166cb61"): enough to tell entries
    apart, and the table keeps 80 columns for what each holds."""
    head, _, key = name.partition("-")
    return f"{head}-{key[:8]}" if len(key) > 8 and not name.startswith(TMP_PREFIX) else name


def _sources(files: list[str]) -> str:
    return some_of([Path(name).name for name in files], "files", shown=2)


def clear_cache() -> tuple[int, int]:
    """Remove every corpus, embedding and timing cache entry; returns (entries, bytes) removed."""
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
    table.column("holds")
    table.column("size", right=True)
    for entry in entries:
        table.row(entry.kind, _short_entry(entry.path.name), entry.holds, size_text(entry.bytes))
    return table


def cache_summary(entries: list[CacheEntry]) -> str:
    total = sum(entry.bytes for entry in entries)
    return (f"{len(entries)} entries, {size_text(total)} in {cache_dir()} (set $SENTADAPT_CACHE to move it; "
            "`sentadapt cache clear` removes it)")


def cleared_line(count: int, size: int) -> str:
    return f"removed {count} entries ({size_text(size)}) from {cache_dir()}"
