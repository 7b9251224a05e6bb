"""Reader for reranking files: JSON Lines, one query with its relevant and irrelevant candidates per line.

    {"query": "...", "positive": ["...", ...], "negative": ["...", ...]}     (MTEB's layout)
    {"query": "...", "candidates": ["...", ...], "positive": ["...", ...]}   (negatives = the other candidates)

A single string is accepted where a list is expected. In the candidates layout a positive that is not
among the candidates is added to them, so every positive is ranked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sentadapt.data.textfile import JSONL, format_of, json_objects
from sentadapt.errors import DataError


@dataclass
class RerankRows:
    """Per query: its text, its candidates (positives first, in file order) and how many are positive."""

    queries: list[str] = field(default_factory=list)
    candidates: list[list[str]] = field(default_factory=list)
    positives: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    source: str = ""

    def __len__(self) -> int:
        return len(self.queries)


def _texts(value: object, path: Path, number: int, key: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item.strip() for item in items):
        raise DataError(f"{path}:{number}: '{key}' must be a non-empty text or a list of non-empty texts")
    return items


def read_rerank(path: str | Path) -> RerankRows:
    path = Path(path)
    if format_of(path) != JSONL:
        raise DataError(f"{path}: reranking files are JSON Lines (.jsonl) with query, positive, negative")
    rows = RerankRows(source=str(path))
    for number, record in json_objects(path, "query, positive and negative (or candidates)", required="query"):
        _add_row(rows, record, path, number)
    if not rows.queries:
        raise DataError(f"{path}: no reranking rows; the file is empty")
    return rows


def _add_row(rows: RerankRows, record: dict[str, object], path: Path, number: int) -> None:
    query = record["query"]
    if not isinstance(query, str) or not query.strip():
        raise DataError(f"{path}:{number}: 'query' must be non-empty text")
    positive = _texts(record.get("positive", []), path, number, "positive")
    if not positive:
        raise DataError(f"{path}:{number}: no positive; every reranking row needs at least one relevant candidate")
    if "candidates" in record:
        candidates = _texts(record["candidates"], path, number, "candidates")
        relevant = set(positive)
        negative = [text for text in candidates if text not in relevant]
        positive = list(dict.fromkeys(positive))
    elif "negative" in record:
        negative = _texts(record["negative"], path, number, "negative")
    else:
        raise DataError(f"{path}:{number}: missing 'negative' (or 'candidates'); a row needs candidates to rank")
    if not negative:
        raise DataError(f"{path}:{number}: no negative candidates; nothing to rank the positives against")
    rows.queries.append(query)
    rows.candidates.append([*positive, *negative])
    rows.positives.append(len(positive))
    rows.lines.append(number)
