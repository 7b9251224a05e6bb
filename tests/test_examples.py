"""examples/: the demo's dev/test split is honest, and the example files of every task format parse."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def _tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    # the pairs reader reads TSV unquoted: a quote inside a sentence is text
    with path.open(encoding="utf-8", newline="") as handle:
        header, *rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
    assert all(len(row) == len(header) for row in rows), path
    return header, rows


def _jsonl(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert all(line.strip() for line in lines), f"{path}: blank line"
    return [json.loads(line) for line in lines]


def _scored(name: str) -> list[tuple[str, str, float]]:
    header, rows = _tsv(EXAMPLES / name)
    assert header == ["sentence1", "sentence2", "score"]
    return [(s1, s2, float(score)) for s1, s2, score in rows]


def test_demo_test_split_shares_no_sentence_with_dev_or_corpus() -> None:
    dev, test = _scored("it-support-dev.tsv"), _scored("it-support-test.tsv")
    assert (len(dev), len(test)) == (99, 100)
    dev_sentences = {s for s1, s2, _ in dev for s in (s1, s2)}
    test_sentences = {s for s1, s2, _ in test for s in (s1, s2)}
    corpus = set((EXAMPLES / "it-support-corpus.txt").read_text(encoding="utf-8").splitlines())
    assert not dev_sentences & test_sentences
    assert not test_sentences & corpus
    assert len(dev_sentences & corpus) == 13  # the documented transductive overlap, selection side only
    for pairs in (dev, test):
        assert all(0 <= score <= 5 for *_, score in pairs)
        assert all(sum(score == band for *_, score in pairs) >= 12 for band in range(6))  # every band on both sides


def test_make_demo_selects_on_dev_and_reports_on_test() -> None:
    recipe = (REPO / "Makefile").read_text(encoding="utf-8").split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "--dev examples/it-support-dev.tsv" in recipe
    assert re.search(r"sentadapt eval \S+ runs/demo --pairs examples/it-support-test\.tsv", recipe)
    assert "it-support-test.tsv" not in recipe.split("sentadapt eval", 1)[0]  # never used for selection


def test_pair_classification_example() -> None:
    header, rows = _tsv(EXAMPLES / "it-support-pairclass.tsv")
    assert header == ["sentence1", "sentence2", "label"]
    assert 10 <= len(rows) <= 40
    assert sorted({label for *_, label in rows}) == ["0", "1"]
    assert all(s1.strip() and s2.strip() and s1 != s2 for s1, s2, _ in rows)


def test_reranking_example() -> None:
    rows = _jsonl(EXAMPLES / "it-support-rerank.jsonl")
    assert 10 <= len(rows) <= 40
    for row in rows:
        assert set(row) == {"query", "positive", "negative"}
        assert isinstance(row["query"], str) and row["query"].strip()
        assert row["positive"] and row["negative"]
        assert all(isinstance(text, str) and text.strip() for text in row["positive"] + row["negative"])
        assert not set(row["positive"]) & set(row["negative"])
        assert row["query"] not in row["positive"] + row["negative"]


def test_retrieval_example_is_a_consistent_beir_folder() -> None:
    folder = EXAMPLES / "it-support-retrieval"
    corpus, queries = _jsonl(folder / "corpus.jsonl"), _jsonl(folder / "queries.jsonl")
    header, qrels = _tsv(folder / "qrels" / "test.tsv")
    assert header == ["query-id", "corpus-id", "score"]
    assert all(set(doc) == {"_id", "title", "text"} and doc["text"].strip() for doc in corpus)
    assert all(set(query) == {"_id", "text"} and query["text"].strip() for query in queries)
    doc_ids, query_ids = [d["_id"] for d in corpus], [q["_id"] for q in queries]
    assert len(set(doc_ids)) == len(doc_ids) and len(set(query_ids)) == len(query_ids)
    assert 10 <= len(queries) <= 40 and 10 <= len(corpus) <= 40
    assert {q for q, _, _ in qrels} == set(query_ids)  # every query judged
    assert all(d in doc_ids and int(score) > 0 for _, d, score in qrels)
    assert len({(q, d) for q, d, _ in qrels}) == len(qrels)
