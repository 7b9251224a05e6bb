"""On-disk cache of a frozen encoder's sentence vectors (safetensors), so a frozen model encodes each text once
(CLSR's frozen part, eval's --cache-embeddings, adapt's --teacher).

The key covers everything that changes the vectors: the frozen weights themselves (a hash of every
tensor, so a fine-tuned or swapped model never reuses a stale file), the pooling, the max length, the
prompt (when there is one) and the exact list of texts. Location: $SENTADAPT_CACHE, else $XDG_CACHE_HOME/sentadapt, else
~/.cache/sentadapt (under `embeddings/`). Files are written to a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from sentadapt.data.cache_contents import HOLDS, described_by
from sentadapt.events import Advance, Note, no_progress, quiet
from sentadapt.options import ENCODE_BATCH_SIZE, VECTOR_DTYPE
from sentadapt.storage.cache_folder import cache_dir, writable_cache_folder
from sentadapt.storage.durable import replace_durably, write_text_atomically
from sentadapt.storage.memory import release_freed_memory
from sentadapt.storage.rowfile import RowFile, write_rows
from sentadapt.text_tables import model_label

if TYPE_CHECKING:
    from sentadapt.data.vectors import TextVectors
    from sentadapt.model.encoder import Encoder
    from sentadapt.model.frozen_part import FrozenPart


def cache_root() -> Path:
    return cache_dir() / "embeddings"


def frozen_fingerprint(encoder: Encoder, max_length: int, head_layers: int) -> str:
    """Hash of the weights and settings of the backbone, the pooling and the first `head_layers` head layers (all of
    them for a whole-model key)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(encoder.backbone.config.to_dict(), sort_keys=True, default=str).encode())
    digest.update(repr(encoder.pooling.canonical(encoder.num_layers)).encode())
    digest.update(f"max_length={max_length}".encode())
    frozen = list(encoder.backbone.state_dict().items())
    for index, layer in enumerate(list(encoder.head)[:head_layers]):
        frozen += [(f"head.{index}.{k}", v) for k, v in layer.state_dict().items()]
    for name, tensor in frozen:
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def cached_frozen_vectors(
    frozen: FrozenPart,
    texts: Sequence[str],
    max_length: int,
    batch_size: int = ENCODE_BATCH_SIZE,
    progress: Advance | None = None,
    note: Note = quiet,
    prompt: str = "",
) -> torch.Tensor:
    """Vectors of a model's frozen part for `texts` (unique), each after `prompt`, from the cache or computed and
    stored; the frozen part remembers them."""
    encoder = frozen.encoder
    digest = hashlib.sha256(frozen_fingerprint(encoder, max_length, frozen.layers).encode())
    _add_prompt(digest, encoder, prompt)
    for text in texts:
        digest.update(text.encode("utf-8") + b"\0")
    path = cache_root() / f"{digest.hexdigest()[:40]}.safetensors"
    vectors = _load_cached(path, len(texts), note)
    if vectors is not None:
        frozen.remember(texts, vectors, prompt)
        return vectors
    note(f"encoding {len(texts)} unique sentences once with the frozen encoder (cached in {path.parent})")
    started = time.perf_counter()
    vectors = frozen.vectors(list(texts), batch_size=batch_size, max_length=max_length, progress=progress,
                             prompt=prompt)
    note(f"encoded {len(texts)} sentences in {time.perf_counter() - started:.1f} s")
    _store(path, vectors, f"frozen vectors of {model_label(encoder.name)}")
    return vectors


def cached_vectors(
    encoder: Encoder,
    texts: Sequence[str],
    batch_size: int = ENCODE_BATCH_SIZE,
    max_length: int | None = None,
    dtype: str = VECTOR_DTYPE,
    progress: Advance | None = None,
    note: Note = quiet,
    prompt: str = "",
) -> torch.Tensor:
    """The whole encoder's vectors of unique `texts` (eval's --cache-embeddings), each after `prompt` ("" for
    none), keyed like the frozen cache: every weight, the pooling, the max length, the dtype, the prompt and the
    texts."""
    length = max_length or encoder.max_length
    digest = _whole_model_digest(encoder, length, dtype, prompt)
    for text in texts:
        digest.update(text.encode("utf-8") + b"\0")
    path = cache_root() / f"eval-{digest.hexdigest()[:40]}.safetensors"
    vectors = _load_cached(path, len(texts), note)
    if vectors is not None:
        return vectors
    vectors = encoder.encode(list(texts), batch_size=batch_size, max_length=length, dtype=dtype, progress=progress,
                             prompt=prompt)
    _store(path, vectors, f"vectors of {model_label(encoder.name)}")
    note(f"embedding cache: {len(texts)} vectors stored in {path}")
    return vectors


@dataclass(frozen=True)
class CachedTable:
    """A whole model's vectors of a list of texts, on disk in the cache, and whether they were cached already."""

    vectors: RowFile  # float32 (rows, dim), read a batch's rows at a time (never held whole, never mapped)
    hit: bool
    seconds: float  # spent encoding (0 on a hit)
    path: Path


TEXT_CHUNK = 65_536  # texts read and hashed at a time: ~6.5 MB of strings at ~100 B each
# texts encoded at a time: the encoder holds their token ids and one matrix of their vectors (8192 × 768 × 4 B =
# 25 MB), so a table's writer stays small whatever the corpus size; sorting by length within a block keeps padding
# low as well as a larger block would
ENCODE_CHUNK = 8_192


@dataclass(frozen=True)
class Processes:
    """The processes that build one table together (torchrun, accelerate launch): this one's rank, how many they
    are, and a barrier every one of them must reach. One process: nothing to share."""

    rank: int = 0
    world: int = 1
    barrier: Callable[[], None] = field(default=lambda: None)


def cached_table(encoder: Encoder, texts: Callable[[int, int], list[str]], rows: int, max_length: int,
                 batch_size: int = ENCODE_BATCH_SIZE, progress: Callable[[int], Any] | None = None,
                 processes: Processes | None = None) -> CachedTable:
    """The whole encoder's vectors of `rows` texts (repeats allowed), read TEXT_CHUNK at a time through
    `texts(start, stop)` to key the cache, then encoded and appended ENCODE_CHUNK rows at a time to a .npy file
    (sentadapt/storage/rowfile.py): the process
    holds neither the texts nor the matrix (1M sentences × 768 × 4 B = 3 GB stays on disk). Keyed like
    `cached_vectors`: every weight, the pooling, the max length and the texts. `progress(total)`, a context
    manager yielding advance(n), is opened only when the vectors are computed."""
    prompt = encoder.prompts.resolve(None, None, encoder.name)  # the model's default prompt ("" when none)
    digest = _whole_model_digest(encoder, max_length, "fp32", prompt)
    return _table(digest, texts, rows, encoder.embedding_dim, ENCODE_CHUNK, lambda block, advance: encoder.encode(
        block, batch_size=batch_size, max_length=max_length, progress=advance, prompt=prompt).numpy(), progress,
        processes or Processes(), holds=f"vectors of {model_label(encoder.name)}")


def file_table(vectors: TextVectors, texts: Callable[[int, int], list[str]], rows: int) -> CachedTable:
    """A vectors file's rows for `rows` texts (every one present: data/vectors.check_covers), in their order, as a
    cache table keyed by the file (path, size, modification time) and the texts."""
    stat = vectors.path.stat()
    digest = hashlib.sha256(f"vectors-file {vectors.path.resolve()} {stat.st_size} {stat.st_mtime_ns}".encode())
    return _table(digest, texts, rows, vectors.dim, TEXT_CHUNK, lambda block, _advance: vectors.lookup(block),
                  holds=f"vectors from {vectors.path.name}")


def _table(digest: Any, texts: Callable[[int, int], list[str]], rows: int, dim: int, chunk: int,
           vectors_of: Callable[[list[str], Advance], Any], progress: Callable[[int], Any] | None = None,
           processes: Processes | None = None, holds: str = "") -> CachedTable:
    """The table of `digest` (its source) and the texts: read back from the cache, or `vectors_of(block,
    advance)` of each block of `chunk` texts appended to a new file, each block's freed memory handed back before
    the next; the `progress(rows)` bar is opened only then. Several processes share the work (`_table_together`)."""
    processes = processes or Processes()
    path = _table_path(digest, texts, rows)
    release_freed_memory()  # keying read every text once (64 MB of Arrow and heap at 1M): not kept for training
    found = RowFile.open(path, rows)
    processes.barrier()  # every process saw the same answer before rank 0 may write the file
    if found is not None:
        return CachedTable(found, True, 0.0, path)
    started = time.perf_counter()
    writable_cache_folder(path.parent)
    if processes.world > 1:
        _table_together(path, texts, rows, dim, chunk, vectors_of, processes, progress)
    else:
        bar = progress(rows) if progress else no_progress("", rows)
        with write_rows(path, rows, dim) as table, bar as advance:
            for start in range(0, rows, chunk):
                table.append(vectors_of(texts(start, min(start + chunk, rows)), advance))
                release_freed_memory()
    if processes.rank == 0:  # once the table is whole: what `sentadapt cache info` says it holds (no sidecar orphan)
        write_text_atomically(described_by(path), json.dumps({HOLDS: holds, "rows": rows}))
    return CachedTable(_written(path, rows), False, time.perf_counter() - started, path)


def _table_together(path: Path, texts: Callable[[int, int], list[str]], rows: int, dim: int, chunk: int,
                    vectors_of: Callable[[list[str], Advance], Any], processes: Processes,
                    progress: Callable[[int], Any] | None = None) -> None:
    """Each process encodes every `world`-th block of `chunk` texts (block b: process b mod world) into a part file
    of its own; rank 0 then joins the parts in block order into the table, atomically, and removes them; the others
    wait and read it. The blocks are the one-process run's, encoded alike, so the table is byte for byte the same
    (each block's texts sorted and batched as they would be alone)."""
    starts = list(range(0, rows, chunk))
    mine = starts[processes.rank::processes.world]
    part = _part_path(path, processes.rank, processes.world)
    share = sum(min(chunk, rows - start) for start in mine)
    bar = progress(share) if progress and processes.rank == 0 else no_progress("", share)  # rank 0's share shown
    with write_rows(part, share, dim) as table, bar as advance:
        for start in mine:
            table.append(vectors_of(texts(start, min(start + chunk, rows)), advance))
            release_freed_memory()
    processes.barrier()  # every part written
    if processes.rank == 0:
        parts = [_written(_part_path(path, rank, processes.world), sum(
            min(chunk, rows - start) for start in starts[rank::processes.world])) for rank in range(processes.world)]
        read = [0] * processes.world
        with write_rows(path, rows, dim) as table:
            for number, start in enumerate(starts):
                rank, size = number % processes.world, min(chunk, rows - start)
                table.append(parts[rank].take(np.arange(read[rank], read[rank] + size)))
                read[rank] += size
        for rank in range(processes.world):
            _part_path(path, rank, processes.world).unlink(missing_ok=True)
    processes.barrier()  # the table is in place


def _part_path(path: Path, rank: int, world: int) -> Path:
    return path.with_name(f"{path.stem}.part-{rank}-of-{world}.npy")


def _table_path(digest: Any, texts: Callable[[int, int], list[str]], rows: int) -> Path:
    """The cache file of a table: `digest` (the source of the vectors) updated with every text, in order."""
    for start in range(0, rows, TEXT_CHUNK):
        for text in texts(start, min(start + TEXT_CHUNK, rows)):
            digest.update(text.encode("utf-8") + b"\0")
    return cache_root() / f"table-{digest.hexdigest()[:40]}.npy"


def _written(path: Path, rows: int) -> RowFile:
    table = RowFile.open(path, rows)
    if table is None:
        raise OSError(f"{path}: the table just written cannot be read back")
    return table


def _whole_model_digest(encoder: Encoder, max_length: int, dtype: str, prompt: str) -> Any:
    """A sha256 of every weight, the pooling, the max length, the dtype and the prompt; the caller adds the texts."""
    digest = hashlib.sha256(frozen_fingerprint(encoder, max_length, head_layers=len(list(encoder.head))).encode())
    # half precision: weights cast once, not autocast (since 0.1.0 unreleased): vectors cached before differ slightly
    digest.update((f"whole-model dtype={dtype}" + ("" if dtype == "fp32" else " cast-weights")).encode())
    _add_prompt(digest, encoder, prompt)
    return digest


def _add_prompt(digest: Any, encoder: Encoder, prompt: str) -> None:
    """Without a prompt the key is what it was before prompts existed (old cache files stay valid)."""
    if prompt:
        digest.update(f"prompt={prompt!r} include_prompt={encoder.prompts.include_prompt}".encode())


def _load_cached(path: Path, rows: int, note: Note) -> torch.Tensor | None:
    """The cached matrix at `path` if it is whole and has `rows` rows; None means: compute it."""
    if not path.is_file():
        return None
    try:
        vectors = load_file(str(path))["vectors"]
    except Exception:  # a truncated or foreign file: recompute rather than fail
        return None
    if vectors.shape[0] != rows:
        return None
    note(f"embedding cache: {rows} vectors reused from {path}")
    return vectors


def _store(path: Path, vectors: torch.Tensor, holds: str) -> None:
    """Write under a temporary name, then rename: a reader never sees half a file."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    writable_cache_folder(path.parent)
    save_file({"vectors": vectors.contiguous()}, str(tmp), metadata={HOLDS: holds})
    replace_durably(tmp, path)

