"""research/experiments/make_eval_tasks.py: the pair-classification, reranking and retrieval tasks built from ../shared."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from tests.conftest import SHARED, needs_shared

from research.experiments import make_eval_tasks

REPO = Path(__file__).resolve().parents[2]
STS = SHARED / "data" / "sts"
NLI = SHARED / "data" / "nli"

pytestmark = [pytest.mark.shared, needs_shared()]


def _jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        header, *rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
    return header, rows


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("eval-tasks")
    return out, make_eval_tasks.build(SHARED, out)


@pytest.mark.parametrize(("name", "positive", "negative"), [("sickr.test", 1833, 337), ("stsb.test", 338, 381)])
def test_pairclass_keeps_only_the_clear_ends_with_labels_0_and_1(built, name: str, positive: int,
                                                                 negative: int) -> None:
    out, manifest = built
    header, rows = _tsv(out / "pairclass" / f"{name}.tsv")
    assert header == ["sentence1", "sentence2", "label"]
    assert all(len(row) == 3 for row in rows)
    labels = [row[2] for row in rows]
    assert set(labels) == {"0", "1"}
    assert (labels.count("1"), labels.count("0")) == (positive, negative)
    # every written pair is a source pair whose score is at an end, and its label matches that end
    scores = defaultdict(list)
    for record in _jsonl(STS / f"{name}.jsonl"):
        scores[(record["sentence1"], record["sentence2"])].append(record["score"])
    for s1, s2, label in rows:
        (score, *_) = scores[(s1, s2)]
        assert (score >= 4) if label == "1" else (score <= 1.5), (s1, s2, score, label)
    # and none is missing: the count of clear-end source pairs equals the rows written
    ends = sum(s >= 4 or s <= 1.5 for values in scores.values() for s in values)
    assert ends == len(rows) == manifest["pairclass"][name]["pairs"]


def test_rerank_rows_are_snli_premises_with_their_own_hypotheses_and_random_negatives(built) -> None:
    out, manifest = built
    rows = _jsonl(out / "rerank" / "snli.test.jsonl")
    gold: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for record in _jsonl(NLI / "snli.test.jsonl.gz"):
        gold[record["premise"]][record["label"]].add(record["hypothesis"])
    with_entailment = [premise for premise, labels in gold.items() if labels["entailment"]]
    assert len(rows) == len(with_entailment) == 3089 == manifest["rerank"]["snli.test"]["queries"]
    assert [row["query"] for row in rows] == with_entailment  # file order kept, no premise twice
    for row in rows:
        assert set(row) == {"query", "positive", "negative"}
        labels = gold[row["query"]]
        assert row["positive"] and set(row["positive"]) == labels["entailment"]
        hard = labels["contradiction"] | labels["neutral"]
        negatives = row["negative"]
        assert set(negatives[:len(hard)]) == hard
        randoms = negatives[len(hard):]
        assert len(randoms) == len(set(randoms)) == 7
        assert not set(randoms) & (hard | labels["entailment"] | {row["query"]})


def test_retrieval_is_a_consistent_beir_folder(built) -> None:
    out, manifest = built
    folder = out / "retrieval" / "sts-nli"
    corpus = _jsonl(folder / "corpus.jsonl")
    queries = _jsonl(folder / "queries.jsonl")
    header, qrels = _tsv(folder / "qrels" / "test.tsv")
    assert header == ["query-id", "corpus-id", "score"]
    assert all(set(doc) == {"_id", "title", "text"} and doc["title"] == "" for doc in corpus)
    text_of = {doc["_id"]: doc["text"] for doc in corpus}
    assert len(text_of) == len(corpus) == len(set(text_of.values())) == 55233  # unique ids, unique texts
    sts_records = [r for name in STS.glob("*.jsonl") for r in _jsonl(name)]
    nli_records = [r for name in NLI.glob("*.jsonl.gz") for r in _jsonl(name)]
    every_sentence = {r[key] for r in sts_records for key in ("sentence1", "sentence2")}
    every_sentence |= {r[key] for r in nli_records for key in ("premise", "hypothesis")}
    assert set(text_of.values()) == every_sentence

    query_text = {query["_id"]: query["text"] for query in queries}
    assert len(query_text) == len(queries) == 6198 == manifest["retrieval"]["sts-nli"]["queries"]
    assert all(text_of[qid] == text for qid, text in query_text.items())  # a query shares its sentence's id
    assert len(qrels) == len({(q, c) for q, c, _ in qrels}) == 7698
    assert {q for q, _, _ in qrels} == set(query_text)  # every query has a relevant document, and only queries do
    assert all(c in text_of and score == "1" and q != c for q, c, score in qrels)

    scores = defaultdict(list)
    for r in sts_records:
        scores[(r["sentence1"], r["sentence2"])].append(r["score"])
    for q, c, _ in qrels:
        values = scores[(query_text[q], text_of[c])]
        assert sum(values) / len(values) >= 4
    relevant_pairs = {(a, b) for (a, b), values in scores.items() if sum(values) / len(values) >= 4 and a != b}
    assert len(relevant_pairs) == len(qrels)


def test_same_seed_same_bytes_other_seed_other_negatives(built, tmp_path: Path) -> None:
    out, _ = built
    builder = make_eval_tasks
    builder.build(SHARED, tmp_path / "again")
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert len(files) == 7
    assert all((out / f).read_bytes() == (tmp_path / "again" / f).read_bytes() for f in files)
    builder.build(SHARED, tmp_path / "seed1", seed=1)
    assert (tmp_path / "seed1" / "rerank" / "snli.test.jsonl").read_bytes() != \
        (out / "rerank" / "snli.test.jsonl").read_bytes()
    assert (tmp_path / "seed1" / "retrieval" / "sts-nli" / "corpus.jsonl").read_bytes() == \
        (out / "retrieval" / "sts-nli" / "corpus.jsonl").read_bytes()


def test_missing_shared_folder_is_one_line_naming_the_file(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "research.experiments.make_eval_tasks", "--shared", str(tmp_path / "nowhere"),
                           "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr == (f"{tmp_path / 'nowhere' / 'data' / 'sts' / 'sts12.test.jsonl'}: not found; pass --shared "
                           "pointing at the shared folder (see ../shared/README.md)\n")
    assert not (tmp_path / "out").exists()  # checked before anything is written
