"""Reader for a retrieval collection in BEIR's folder layout.

    DIR/corpus.jsonl      {"_id": "d1", "title": "...", "text": "..."}   (title optional)
    DIR/queries.jsonl     {"_id": "q1", "text": "..."}
    DIR/qrels/SPLIT.tsv   query-id <TAB> corpus-id <TAB> score           (header line; score > 0 = relevant)

Documents are embedded as "title text" (BEIR's convention for sentence embedders). Queries that have no
relevant document in the split's qrels are not evaluated (as in BEIR and sentence-transformers). When a
query's `_id` is also a corpus `_id` (the query is itself a document, as in Quora or CQADupStack), the
evaluator skips that hit (BEIR's and MTEB's `ignore_identical_ids`); qrels naming it are kept as given.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sentadapt.data.textfile import json_objects, text_lines
from sentadapt.errors import DataError
from sentadapt.options import TEST_SPLIT


@dataclass
class BeirCollection:
    corpus_ids: list[str]
    corpus_texts: list[str]
    query_ids: list[str]  # evaluated queries: those with at least one relevant document
    query_texts: list[str]
    relevant: list[list[int]]  # per evaluated query, rows of corpus_ids
    source: str = ""
    skipped_queries: int = 0
    split: str = TEST_SPLIT
    qrels_path: str = field(default="")
    query_self_rows: list[int] = field(default_factory=list)  # corpus row whose _id equals the query's, else -1


def is_beir_folder(path: Path) -> bool:
    return path.is_dir() and (path / "corpus.jsonl").is_file() and (path / "queries.jsonl").is_file()


def qrels_file(folder: Path, split: str) -> Path:
    """qrels/SPLIT.tsv; for split 'dev' a collection with a single qrels file uses that one."""
    qrels = folder / "qrels"
    path = qrels / f"{split}.tsv"
    if path.is_file():
        return path
    available = sorted(p.name for p in qrels.glob("*.tsv")) if qrels.is_dir() else []
    if split == "dev" and len(available) == 1:
        return qrels / available[0]
    raise DataError(f"{path}: missing; the retrieval folder needs qrels/{split}.tsv (query-id, corpus-id, score)"
                    + (f"; it has {', '.join(available)}" if available else ""))


def _records(path: Path, what: str) -> Iterator[tuple[int, dict[str, object]]]:
    if not path.is_file():
        raise DataError(f"{path}: missing; a BEIR folder needs corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv")
    yield from json_objects(path, f"_id and text ({what})", required="_id")


def _read_texts(path: Path, what: str, with_title: bool) -> dict[str, str]:
    texts: dict[str, str] = {}
    for number, record in _records(path, what):
        key, text, title = str(record["_id"]), record.get("text", ""), record.get("title", "") or ""
        if not isinstance(text, str) or not isinstance(title, str):
            raise DataError(f"{path}:{number}: 'text' and 'title' must be text")
        full = f"{title} {text}".strip() if with_title else text.strip()
        if not full:
            raise DataError(f"{path}:{number}: {what} '{key}' has no text")
        if key in texts:
            raise DataError(f"{path}:{number}: duplicate _id '{key}'")
        texts[key] = full
    if not texts:
        raise DataError(f"{path}: no {what}; the file is empty")
    return texts


def read_beir(folder: str | Path, split: str = TEST_SPLIT) -> BeirCollection:
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a directory; a retrieval collection is a BEIR folder (corpus.jsonl, "
                        "queries.jsonl, qrels/SPLIT.tsv)")
    qrels_path = qrels_file(folder, split)
    corpus = _read_texts(folder / "corpus.jsonl", "documents", with_title=True)
    queries = _read_texts(folder / "queries.jsonl", "queries", with_title=False)
    # corpus rows in id order: ties in score are broken by the smaller id, as the IR evaluator does
    corpus_ids = sorted(corpus)
    row_of = {doc: row for row, doc in enumerate(corpus_ids)}
    judged: dict[str, list[int]] = {}
    for number, (query, doc, score) in _qrels(qrels_path):
        if query not in queries:
            raise DataError(f"{qrels_path}:{number}: query-id '{query}' is not in {folder / 'queries.jsonl'}")
        if doc not in row_of:
            raise DataError(f"{qrels_path}:{number}: corpus-id '{doc}' is not in {folder / 'corpus.jsonl'}")
        rows = judged.setdefault(query, [])
        if score > 0 and row_of[doc] not in rows:
            rows.append(row_of[doc])
    if not judged:
        raise DataError(f"{qrels_path}: no judgements; the file is empty")
    evaluated = [query for query in queries if judged.get(query)]
    if not evaluated:
        raise DataError(f"{qrels_path}: no query has a relevant document (score > 0)")
    return BeirCollection(corpus_ids, [corpus[d] for d in corpus_ids], evaluated, [queries[q] for q in evaluated],
                          [judged[q] for q in evaluated], str(folder), len(judged) - len(evaluated), split,
                          str(qrels_path), [row_of.get(q, -1) for q in evaluated])


def _qrels(path: Path) -> Iterator[tuple[int, tuple[str, str, float]]]:
    for number, line in text_lines(path):
        cells = [cell.strip() for cell in line.split("\t")]
        if not any(cells):
            continue
        if number == 1 and cells[0].lower() in ("query-id", "query_id", "qid"):
            continue  # the header
        if len(cells) < 2:
            raise DataError(f"{path}:{number}: expected query-id <TAB> corpus-id <TAB> score")
        try:
            score = float(cells[2]) if len(cells) > 2 and cells[2] else 1.0
        except ValueError:
            raise DataError(f"{path}:{number}: score '{cells[2]}' is not a number") from None
        yield number, (cells[0], cells[1], score)
