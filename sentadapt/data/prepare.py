"""Training data of any size: read once into memory-mapped Arrow files, tokenized once, cached on disk.

    $SENTADAPT_CACHE (else $XDG_CACHE_HOME/sentadapt, else ~/.cache/sentadapt)
      corpora/
        text-<key>/    records.arrow   every record read, in order: text (+ status, hash) or premise,
                                       hypothesis, label; memory-mapped, never loaded whole
                       keep.npy        the record numbers kept (not blank, short, invalid or a duplicate)
                       report.json     what reading found (lines read, skipped and why)
                       COMPLETE        written last: the entry's key; an entry without it is never used
        tokens-<key>/  ids-*.arrow     token ids (list<int32>) of the kept records, per text column, in order,
                                       written by `datasets.Dataset.map` with num_proc workers
                       meta.json       files in order, rows, truncated counts
                       COMPLETE
        .tmp-*         an entry being written (or left by a killed run): never read; removed when its
                       process is gone, and by `sentadapt cache clear`

The text key is the sources' identity (absolute path, size and mtime in ns for local files; the id, split and
streaming flag for Hub datasets) and the reading options; the token key adds the tokenizer (its serialised
vocabulary, normaliser and post-processor), the effective max length and the prompt prepended to every text
(`adapt --prompt`; absent from the key when there is none). So a changed file, tokenizer, max length or prompt
is a miss, and another base model with the same tokenizer reuses the token ids.

Reading is one streaming pass (the parse is serial; its batches of 65,536 records are classified and hashed
with numpy/pyarrow); dedup is `numpy.unique` over 64-bit hashes (first occurrences kept), so no set of strings
is held; tokenization is `datasets.Dataset.map(num_proc=...)` in chunks, so a progress bar can follow it. An
entry is built in a `.tmp-*` folder and renamed into place after its COMPLETE marker is fsynced: a killed
preparation leaves nothing that a later run would trust.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentadapt.data.batching import TextRows, TokenizedExamples
from sentadapt.data.corpus import (
    KEEP,
    MIN_CHARS,
    CorpusReport,
    check_options,
    classify,
    is_hub_source,
    scan_corpus,
    settle_statuses,
    text_hashes,
)
from sentadapt.errors import ConfigError, DataError
from sentadapt.events import Progress, no_progress
from sentadapt.options import DEFAULT_ENCODING_ERRORS
from sentadapt.storage.cache_folder import cache_dir, writable_cache_folder
from sentadapt.storage.durable import fsync

FORMAT_VERSION = 1  # bump when the layout or the reading rules change: old entries are then misses
COMPLETE = "COMPLETE"
TMP_PREFIX = ".tmp-"
MIN_ROWS_PER_PROCESS = 20_000  # below this a worker process costs more than it saves
CHUNK_ROWS_MIN = 100_000  # tokenization runs in chunks of at least this many rows (one progress step each)
CHUNK_COUNT = 20  # and at most about this many chunks


def corpora_dir() -> Path:
    return cache_dir() / "corpora"


def default_num_proc() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@dataclass
class Prepared:
    """Tokenized, memory-mapped training examples and what preparing them found."""

    examples: TokenizedExamples
    notes: list[str]  # report lines for the user: reading summary, truncation, cache hit or miss


# ------------------------------------------------------------------------------------------- entry points


def prepare_sentences(
    sources: Sequence[str | Path], tokenizer: Any, max_length: int, *, text_column: str | None = None,
    dedup: bool = True, encoding_errors: str = DEFAULT_ENCODING_ERRORS, min_chars: int = MIN_CHARS,
    streaming: bool = False,
    num_proc: int | None = None, progress: Progress | None = None, prompt: str = "",
) -> Prepared:
    """One-sentence-per-line corpora (plain text, .gz, .jsonl/.csv/.tsv/.parquet, Hub datasets) → token ids of each
    sentence after `prompt` (dedup and the corpus report see the sentences without it)."""
    check_options(encoding_errors, min_chars)
    if isinstance(sources, (str, Path)):
        sources = [sources]
    if not sources:
        raise ConfigError("no corpus given; pass one or more text files (one sentence per line)")
    options = {"text_column": text_column, "dedup": dedup, "encoding_errors": encoding_errors,
               "min_chars": min_chars}
    text_key = _key({"kind": "sentences", "sources": _identities(sources, streaming), **options})

    def build(folder: Path, advance_progress: Progress) -> dict[str, Any]:
        return _read_sentences(folder, sources, options, streaming, advance_progress)

    text_dir, report, text_hit = _text_entry(text_key, build, progress)
    corpus_report = CorpusReport(**report)
    tokens_dir, meta, tokens_hit = _token_entry(text_dir, text_key, ["text"], tokenizer, max_length, num_proc,
                                                progress, prompt)
    notes = [corpus_report.summary()]
    if meta["truncated"][0]:
        notes.append(f"{meta['truncated'][0]} of {meta['rows']} sentences are longer than --max-length "
                     f"{max_length} tokens and were truncated")
    notes.append(_cache_line(tokens_dir, text_hit, tokens_hit))
    return Prepared(_load_examples(tokens_dir, meta, ["text"], labels=False, text_dir=text_dir), notes)


def prepare_nli(paths: Sequence[str | Path], tokenizer: Any, max_length: int, *, num_proc: int | None = None,
                progress: Progress | None = None, prompt: str = "") -> Prepared:
    """Labelled NLI files → token ids of premises and hypotheses (each after `prompt`), and labels (no dedup, as
    pairs differ)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise ConfigError("no NLI files given; pass .jsonl/.tsv/.csv/.parquet files with premise, hypothesis and label")
    text_key = _key({"kind": "nli", "sources": _identities(paths, False)})
    text_dir, report, text_hit = _text_entry(text_key, lambda folder, _p: _read_nli(folder, paths), progress)
    columns = ["premise", "hypothesis"]
    tokens_dir, meta, tokens_hit = _token_entry(text_dir, text_key, columns, tokenizer, max_length, num_proc,
                                                progress, prompt)
    notes = [f"NLI: {meta['rows']} labelled pairs from {report['source']}"]
    for column, truncated in zip(("premises", "hypotheses"), meta["truncated"]):
        if truncated:
            notes.append(f"{truncated} of {meta['rows']} {column} are longer than --max-length {max_length} tokens "
                         "and were truncated")
    notes.append(_cache_line(tokens_dir, text_hit, tokens_hit))
    return Prepared(_load_examples(tokens_dir, meta, columns, labels=True, text_dir=text_dir), notes)


def _cache_line(tokens_dir: Path, text_hit: bool, tokens_hit: bool) -> str:
    if tokens_hit:
        return f"corpus cache: hit, token ids memory-mapped from {tokens_dir}"
    if text_hit:
        return f"corpus cache: text reused, tokenized once into {tokens_dir}"
    return f"corpus cache: miss, read and tokenized once into {tokens_dir}"


# ------------------------------------------------------------------------------------------- reading


def _read_sentences(folder: Path, sources: Sequence[str | Path], options: dict[str, Any], streaming: bool,
                    progress: Progress) -> dict[str, Any]:
    import pyarrow as pa

    schema = pa.schema([("text", pa.string()), ("status", pa.uint8()), ("hash", pa.uint64())])
    min_chars = options["min_chars"]
    total = sum(Path(s).expanduser().stat().st_size for s in sources if not is_hub_source(s))
    with pa.OSFile(str(folder / "records.arrow"), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:

        def consume(texts: list[str | None]) -> None:
            columns = [pa.array(texts, type=pa.string()), pa.array(classify(texts, min_chars)),
                       pa.array(text_hashes(texts))]
            writer.write_batch(pa.record_batch(columns, schema=schema))

        with progress("reading corpus (bytes)", total) as advance:
            report = scan_corpus(sources, consume, options["text_column"], options["encoding_errors"], min_chars,
                                 on_bytes=advance, streaming=streaming)
    records = _read_table(folder / "records.arrow")
    status = records.column("status").to_numpy().copy()  # 1 byte per record (writable); the texts stay on disk
    settle_statuses(report, status, records.column("hash").to_numpy() if options["dedup"] else None, min_chars)
    np.save(folder / "keep.npy", np.flatnonzero(status == KEEP))
    return {"files": report.files, "lines_read": report.lines_read, "sentences": report.sentences,
            "skipped": report.skipped, "replaced": report.replaced}


def _read_nli(folder: Path, paths: Sequence[str | Path]) -> dict[str, Any]:
    import pyarrow as pa

    from sentadapt.data.nli import scan_nli

    schema = pa.schema([("premise", pa.string()), ("hypothesis", pa.string()), ("label", pa.int64())])
    with pa.OSFile(str(folder / "records.arrow"), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:

        def consume(premises: list[str], hypotheses: list[str], labels: list[int]) -> None:
            writer.write_batch(pa.record_batch([pa.array(premises), pa.array(hypotheses), pa.array(labels)],
                                               schema=schema))

        source, skipped = scan_nli(paths, consume)
    rows = _read_table(folder / "records.arrow").num_rows
    np.save(folder / "keep.npy", np.arange(rows, dtype=np.int64))
    return {"source": source, "skipped": skipped, "pairs": rows}


def _read_table(path: Path) -> Any:
    """A datasets/Arrow IPC stream file, memory-mapped (zero copy: pages are read as they are touched)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_stream(source).read_all()


# ------------------------------------------------------------------------------------------- tokenizing


class TokenizeColumns:
    """`Dataset.map` function (picklable for num_proc workers): token ids truncated to `limit` per column,
    their lengths, and whether truncation cut the text (only rows that fill `limit` are tokenized again, one
    token longer); each text after `prompt`, as `Encoder.encode` prepends it."""

    def __init__(self, tokenizer: Any, limit: int, columns: Sequence[str], prompt: str = "") -> None:
        self.tokenizer = tokenizer
        self.limit = limit
        self.columns = list(columns)
        self.prompt = prompt
        # Fast tokenizers: the Rust tokenizer directly, as transformers' __call__ would use it (same ids), without
        # its per-row conversion to BatchEncoding; one copy truncating at `limit`, one at `limit + 1`.
        self.backends = {}
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:
            for length in (limit, limit + 1):
                clone = copy.deepcopy(backend)
                clone.no_padding()
                clone.enable_truncation(length, stride=0, strategy="longest_first",
                                        direction=getattr(tokenizer, "truncation_side", "right"))
                self.backends[length] = clone

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        output: dict[str, list[Any]] = {}
        for column in self.columns:
            texts = [self.prompt + text for text in batch[column]] if self.prompt else batch[column]
            ids = self._ids(texts, self.limit)
            full = [row for row, tokens in enumerate(ids) if len(tokens) >= self.limit]
            truncated = np.zeros(len(ids), dtype=bool)
            if full:
                longer = self._ids([texts[row] for row in full], self.limit + 1)
                truncated[full] = [len(tokens) > self.limit for tokens in longer]
            output[f"{column}_input_ids"] = ids
            output[f"{column}_truncated"] = truncated.tolist()
        return output

    def _ids(self, texts: list[str], limit: int) -> list[list[int]]:
        backend = self.backends.get(limit)
        if backend is not None:
            return [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=True)]
        encoded = self.tokenizer(texts, truncation=True, max_length=limit, padding=False,
                                 return_attention_mask=False, return_token_type_ids=False)
        return encoded["input_ids"]


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """What decides the token ids: the fast tokenizer's serialised model, normaliser, pre-tokenizer and
    post-processor (its truncation/padding state changes with every call and is left out)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a slow (Python) tokenizer: datasets' own hasher
        from datasets.fingerprint import Hasher

        return Hasher.hash(tokenizer)
    clone = copy.deepcopy(backend)  # a copy: the caller's tokenizer keeps its settings
    clone.no_truncation()
    clone.no_padding()
    state = f"{type(tokenizer).__name__}\n{clone.to_str()}"  # tokenizers serialises deterministically
    return hashlib.sha256(state.encode()).hexdigest()[:32]


def _token_entry(text_dir: Path, text_key: str, columns: list[str], tokenizer: Any, limit: int,
                 num_proc: int | None, progress: Progress | None, prompt: str = "",
                 ) -> tuple[Path, dict[str, Any], bool]:
    parts = {"text": text_key, "columns": columns, "tokenizer": tokenizer_fingerprint(tokenizer), "max_length": limit}
    if prompt:  # only then: entries made before prompts existed keep their keys
        parts["prompt"] = prompt
    key = _key(parts)
    folder = corpora_dir() / f"tokens-{key}"
    meta = _complete_entry(folder, key)
    if meta is not None:
        return folder, meta, True
    procs = max(1, num_proc if num_proc is not None else default_num_proc())
    with _building(folder, key) as tmp:
        meta = _tokenize(text_dir, tmp, columns, TokenizeColumns(tokenizer, limit, columns, prompt), procs,
                         progress or no_progress, key)
        meta["holds"] = {"text": text_dir.name, "tokenizer": getattr(tokenizer, "name_or_path", "") or "?",
                         "max_length": limit}  # what `sentadapt cache info` says the entry is
        (tmp / "meta.json").write_text(json.dumps(meta))
    return folder, meta, False


def _tokenize(text_dir: Path, folder: Path, columns: list[str], function: TokenizeColumns, procs: int,
              progress: Progress, key: str) -> dict[str, Any]:
    import datasets

    records = datasets.Dataset.from_file(str(text_dir / "records.arrow"))  # memory-mapped
    records = records.select_columns([*columns, *(["label"] if "label" in records.column_names else [])])
    keep = np.load(text_dir / "keep.npy", mmap_mode="r")
    features = datasets.Features({
        **({"label": records.features["label"]} if "label" in records.column_names else {}),
        **{f"{c}_input_ids": datasets.Sequence(datasets.Value("int32")) for c in columns},
        **{f"{c}_truncated": datasets.Value("bool") for c in columns},
    })
    chunk = max(CHUNK_ROWS_MIN, -(-len(keep) // CHUNK_COUNT))
    files: list[str] = []
    truncated = [0] * len(columns)
    with _quiet_datasets(), progress("tokenizing", len(keep)) as advance:
        for number, start in enumerate(range(0, len(keep), chunk)):
            rows = np.asarray(keep[start:start + chunk])
            part = records.select(rows) if len(rows) != records.num_rows else records
            workers = max(1, min(procs, len(rows) // MIN_ROWS_PER_PROCESS))
            done = part.map(function, batched=True, batch_size=1000, num_proc=workers if workers > 1 else None,
                            remove_columns=columns, features=features, new_fingerprint=f"{key}-{number}",
                            cache_file_name=str(folder / f"ids-{number:05d}.arrow"))
            files += [Path(entry["filename"]).name for entry in done.cache_files]
            for index, column in enumerate(columns):
                flags = done.data.column(f"{column}_truncated").to_numpy(zero_copy_only=False)
                truncated[index] += int(np.count_nonzero(flags))
            advance(len(rows))
    return {"files": files, "rows": len(keep), "columns": columns, "truncated": truncated}


def _load_examples(folder: Path, meta: dict[str, Any], columns: list[str], labels: bool,
                   text_dir: Path) -> TokenizedExamples:
    import pyarrow as pa

    tables = [_read_table(folder / name) for name in meta["files"]]
    table = pa.concat_tables(tables) if tables else None
    if table is None or table.num_rows != meta["rows"]:
        raise DataError(f"{folder}: the corpus cache entry is incomplete ({0 if table is None else table.num_rows} "
                        f"of {meta['rows']} rows); remove it (sentadapt cache clear) and run again")
    label_array = table.column("label").to_numpy() if labels else None
    # the first text column, memory-mapped, for a teacher to encode (the token ids are the student's tokenizer's)
    texts = TextRows(_read_table(text_dir / "records.arrow").column(columns[0]),
                     np.load(text_dir / "keep.npy", mmap_mode="r"))
    return TokenizedExamples([table.column(f"{c}_input_ids") for c in columns], label_array, texts)


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """The library never prints: datasets' own tqdm bars and info logs are off while it works for us."""
    import datasets

    bars_were_on = not datasets.are_progress_bars_disabled()
    verbosity = datasets.logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(verbosity)
        if bars_were_on:
            datasets.enable_progress_bars()


# ------------------------------------------------------------------------------------------- cache entries


def _key(parts: dict[str, Any]) -> str:
    text = json.dumps({"format": FORMAT_VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _identities(sources: Sequence[str | Path], streaming: bool) -> list[dict[str, Any]]:
    identities = []
    for source in sources:
        if is_hub_source(source):
            identities.append({"hub": str(source), "streaming": streaming})
            continue
        path = Path(source).expanduser()
        try:
            stat = path.stat()
        except OSError:  # missing: the reader names it with today's message
            identities.append({"path": str(path), "missing": True})
            continue
        identities.append({"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    return identities


def _text_entry(key: str, build: Callable[[Path, Progress], dict[str, Any]], progress: Progress | None,
                ) -> tuple[Path, dict[str, Any], bool]:
    folder = corpora_dir() / f"text-{key}"
    report = _complete_entry(folder, key)
    if report is not None:
        return folder, report, True
    with _building(folder, key) as tmp:
        report = build(tmp, progress or no_progress)
        (tmp / "report.json").write_text(json.dumps(report))
    return folder, report, False


def _complete_entry(folder: Path, key: str) -> dict[str, Any] | None:
    """The entry's report/meta when it is complete and holds this key; None otherwise."""
    marker = folder / COMPLETE
    try:
        if marker.read_text() != key:
            return None
        name = "meta.json" if (folder / "meta.json").is_file() else "report.json"
        return json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _building(folder: Path, key: str) -> Iterator[Path]:
    """A `.tmp-*` folder to build an entry in; on success the COMPLETE marker is fsynced and the folder renamed
    into place; on any failure (or a kill) nothing named like an entry is left."""
    root = folder.parent
    tmp = root / f"{TMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}-{folder.name}"
    writable_cache_folder(root)
    remove_stale_temporaries(root)
    tmp.mkdir()
    try:
        yield tmp
        for path in tmp.iterdir():  # data first, then the marker: a marker always follows complete data
            fsync(path)
        (tmp / COMPLETE).write_text(key)
        fsync(tmp / COMPLETE)
        fsync(tmp)
        try:
            os.rename(tmp, folder)
        except OSError:
            if _complete_entry(folder, key) is None:  # not another process that finished the same entry first
                raise
        fsync(root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remove_stale_temporaries(root: Path) -> list[Path]:
    """Remove `.tmp-PID-*` folders whose process is gone (a killed preparation); returns them."""
    removed = []
    for path in root.glob(f"{TMP_PREFIX}*"):
        pid = path.name[len(TMP_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
