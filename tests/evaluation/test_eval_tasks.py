"""Task types beyond STS: readers, metrics against plain-Python references (ties included), the bootstrap,
retrieval search, and the `eval` / `adapt --dev` command lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr, spearmanr
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.data.beir import read_beir
from sentadapt.data.pair_files import LabelledPairs, ScoredPairs, read_labelled_pairs
from sentadapt.data.rerank_files import RerankRows, read_rerank
from sentadapt.errors import ConfigError, DataError
from sentadapt.evaluation import bootstrap, weighted_stats
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.evaluation.pairclass import PairClassificationTask
from sentadapt.evaluation.reranking import RerankingTask
from sentadapt.evaluation.retrieval import RetrievalTask, drop_own_document, exact_search
from sentadapt.evaluation.sts import ScoredPairsTask
from sentadapt.evaluation.task_types import detect_task_type, read_task, resolve_dev_set
from tests.conftest import TINY_SENTENCES

runner = CliRunner()


# ---------------------------------------------------------------- plain-Python references (ties as the peers)
def ap_reference(labels: list[int], scores: list[float]) -> float:
    """sklearn's average_precision_score: one threshold per distinct score, Σ (R_i − R_i−1) · P_i."""
    positives = sum(labels)
    total, previous_recall = 0.0, 0.0
    for threshold in sorted(set(scores), reverse=True):
        tp = sum(1 for s, y in zip(scores, labels) if s >= threshold and y == 1)
        fp = sum(1 for s, y in zip(scores, labels) if s >= threshold and y == 0)
        recall = tp / positives
        total += (recall - previous_recall) * tp / (tp + fp)
        previous_recall = recall
    return total


def best_accuracy_f1_reference(labels: list[int], scores: list[float]) -> tuple[float, float]:
    """Predict 1 for score ≥ t, t over every distinct score (and 'none positive')."""
    best_accuracy = labels.count(0) / len(labels)
    best_f1 = 0.0
    for threshold in set(scores):
        predicted = [s >= threshold for s in scores]
        tp = sum(p and y == 1 for p, y in zip(predicted, labels))
        fp = sum(p and y == 0 for p, y in zip(predicted, labels))
        tn = sum(not p and y == 0 for p, y in zip(predicted, labels))
        best_accuracy = max(best_accuracy, (tp + tn) / len(labels))
        if tp:
            best_f1 = max(best_f1, 2 * tp / (2 * tp + fp + (sum(labels) - tp)))
    return best_accuracy, best_f1


def rerank_reference(scores: list[float], relevant: list[int], k: int = 10) -> tuple[float, float, float]:
    """MAP (sklearn AP), MRR@k (stable descending order), nDCG@k with tied gains averaged (sklearn)."""
    average_precision = ap_reference(relevant, scores)
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep input order
    mrr = next((1 / (rank + 1) for rank, i in enumerate(order[:k]) if relevant[i]), 0.0)
    dcg, position = 0.0, 0
    for value in sorted(set(scores), reverse=True):
        group = [i for i in range(len(scores)) if scores[i] == value]
        mean_gain = sum(relevant[i] for i in group) / len(group)
        for offset in range(len(group)):
            if position + offset < k:
                dcg += mean_gain / math.log2(position + offset + 2)
        position += len(group)
    ideal = sum(1 / math.log2(r + 2) for r in range(min(sum(relevant), k)))
    return average_precision, mrr, dcg / ideal


def retrieval_reference(ranked: list[int], relevant: set[int]) -> dict[str, float]:
    hits = [1 if doc in relevant else 0 for doc in ranked]
    dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits[:10]))
    ideal = sum(1 / math.log2(r + 2) for r in range(min(len(relevant), 10)))
    precisions = [sum(hits[: r + 1]) / (r + 1) for r in range(min(100, len(hits))) if hits[r]]
    return {"ndcg@10": dcg / ideal,
            "mrr@10": next((1 / (r + 1) for r, h in enumerate(hits[:10]) if h), 0.0),
            "recall@10": sum(hits[:10]) / len(relevant), "recall@100": sum(hits[:100]) / len(relevant),
            "map@100": sum(precisions) / min(100, len(relevant))}


# ---------------------------------------------------------------- metrics
@pytest.mark.parametrize("decimals", [1, 6])  # 1 decimal: many tied cosines
def test_pair_classification_metrics_match_the_loop_reference(decimals: int) -> None:
    rng = np.random.default_rng(decimals)
    labels = rng.integers(0, 2, 60).tolist()
    scores = np.round(np.asarray(labels) * 0.3 + rng.uniform(-0.5, 0.7, 60), decimals)
    pairs = LabelledPairs([f"a{i}" for i in range(60)], [f"b{i}" for i in range(60)], labels, "t")
    result = PairClassificationTask("t", pairs).result({"cosine": scores})
    accuracy, f1 = best_accuracy_f1_reference(labels, scores.tolist())
    assert result.metrics["ap"] == pytest.approx(100 * ap_reference(labels, scores.tolist()), abs=1e-9)
    assert result.metrics["accuracy"] == pytest.approx(100 * accuracy, abs=1e-9)
    assert result.metrics["f1"] == pytest.approx(100 * f1, abs=1e-9)
    # the F1 threshold reproduces the F1 it reports
    predicted = scores >= result.extras["f1_threshold"]
    tp = int((predicted & (np.asarray(labels) == 1)).sum())
    assert 100 * 2 * tp / (predicted.sum() + sum(labels)) == pytest.approx(result.metrics["f1"])


def test_reranking_metrics_match_the_loop_reference_with_ties() -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 25, 40)
    positives = [int(rng.integers(1, size)) for size in sizes]
    rows = RerankRows([f"q{i}" for i in range(40)],
                      [[f"c{i}-{j}" for j in range(size)] for i, size in enumerate(sizes)], positives,
                      list(range(1, 41)), "t")
    task = RerankingTask("t", rows)
    scores = np.full(task.valid.shape, -np.inf)
    scores[task.valid] = np.round(rng.uniform(-1, 1, int(task.valid.sum())), 1)  # ~21 values: ties everywhere
    outputs = task.per_query(scores)
    for query in range(40):
        row = scores[query, : sizes[query]].tolist()
        relevant = [1] * positives[query] + [0] * (int(sizes[query]) - positives[query])
        expected = rerank_reference(row, relevant)
        got = (outputs["map"][query], outputs["mrr@10"][query], outputs["ndcg@10"][query])
        assert got == pytest.approx(expected, abs=1e-12), query


def test_retrieval_metrics_match_the_loop_reference() -> None:
    rng = np.random.default_rng(1)
    documents, queries = 300, 30
    relevant = [sorted(rng.choice(documents, int(rng.integers(1, 12)), replace=False).tolist())
                for _ in range(queries)]
    ranked = np.stack([rng.permutation(documents)[:100] for _ in range(queries)])
    collection = _collection(documents, relevant)
    outputs = RetrievalTask("t", collection).per_query(ranked)
    for query in range(queries):
        expected = retrieval_reference(ranked[query].tolist(), set(relevant[query]))
        for name, value in expected.items():
            assert outputs[name][query] == pytest.approx(value, abs=1e-12), (query, name)


def _collection(documents: int, relevant: list[list[int]]):  # type: ignore[no-untyped-def]
    from sentadapt.data.beir import BeirCollection

    ids = [f"d{i:04d}" for i in range(documents)]
    queries = [f"q{i}" for i in range(len(relevant))]
    return BeirCollection(ids, [f"text {i}" for i in range(documents)], queries, queries, relevant, "t",
                          query_self_rows=[-1] * len(queries))


def test_chunked_search_equals_the_full_matrix() -> None:
    generator = torch.Generator().manual_seed(0)
    corpus, queries = torch.randn(500, 16, generator=generator), torch.randn(37, 16, generator=generator)
    scores, rows = exact_search(queries, corpus, k=20, query_block=5, corpus_block=64)
    full = torch.nn.functional.normalize(queries, dim=-1) @ torch.nn.functional.normalize(corpus, dim=-1).T
    expected = torch.topk(full, 20, dim=1)
    assert np.array_equal(rows, expected.indices.numpy())
    np.testing.assert_allclose(scores, expected.values.numpy(), rtol=1e-5)


def test_search_orders_equal_scores_by_corpus_row_and_skips_the_query_itself() -> None:
    corpus = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    _, rows = exact_search(torch.tensor([[1.0, 0.0]]), corpus, k=4, corpus_block=2)
    assert rows[0].tolist() == [0, 2, 3, 1]  # three exact ties, smallest row (= corpus id order) first
    assert drop_own_document(rows, np.array([2]))[0].tolist() == [0, 3, 1, 2]


# ---------------------------------------------------------------- bootstrap
def test_resampled_statistics_equal_the_statistic_of_the_resampled_rows() -> None:
    rng = np.random.default_rng(2)
    x, y = np.round(rng.normal(size=80), 1), np.round(rng.normal(size=80), 0)  # ties in both
    labels = (y > 0).astype(float)
    counts = bootstrap.resample_counts(80, 6, seed=3)
    spearman = weighted_stats.weighted_spearman(counts, weighted_stats.TieGroups(x), weighted_stats.TieGroups(y))
    pearson = weighted_stats.weighted_pearson(counts, x, y)
    positives, negatives = weighted_stats.threshold_sweep(counts, labels, weighted_stats.TieGroups(x, descending=True))
    ap = weighted_stats.average_precision_rows(positives, negatives)
    for row in range(6):
        drawn = np.repeat(np.arange(80), counts[row].astype(int))
        assert spearman[row] == pytest.approx(spearmanr(x[drawn], y[drawn]).statistic, abs=1e-12)
        assert pearson[row] == pytest.approx(pearsonr(x[drawn], y[drawn]).statistic, abs=1e-12)
        assert ap[row] == pytest.approx(ap_reference(labels[drawn].astype(int).tolist(), x[drawn].tolist()),
                                        abs=1e-12)


def test_counts_are_seeded_and_sum_to_the_units() -> None:
    first, again = bootstrap.resample_counts(50, 300, 7), bootstrap.resample_counts(50, 300, 7)
    assert np.array_equal(first, again) and (first.sum(axis=1) == 50).all()
    assert not np.array_equal(first, bootstrap.resample_counts(50, 300, 8))


def _scored_task(n: int = 400, seed: int = 0) -> tuple[ScoredPairsTask, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(0, 5, n), 1)
    pairs = ScoredPairs([f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], gold.tolist(), [""] * n, "t")
    return ScoredPairsTask("t", pairs), gold


def test_paired_delta_of_a_model_against_itself_is_exactly_zero() -> None:
    task, gold = _scored_task()
    evaluator = Evaluator([task])
    cosines = gold / 5 + np.random.default_rng(1).normal(0, 0.4, len(gold))
    first = evaluator.report([task.result({"cosine": cosines})], "a", "mean")
    again = evaluator.report([task.result({"cosine": cosines.copy()})], "a", "mean")
    comparison = evaluator.compare(first, again)
    for delta in (*comparison.tasks["t"].values(), comparison.average):
        assert delta.value == 0.0 and delta.interval == (0.0, 0.0) and not delta.significant
    low, high = first.tasks[0].intervals["spearman"]
    assert low < first.tasks[0].metrics["spearman"] < high


def test_paired_interval_is_narrower_than_unpaired_on_correlated_models() -> None:
    task, gold = _scored_task()
    rng = np.random.default_rng(4)
    shared = gold / 5 + rng.normal(0, 0.5, len(gold))  # both models share most of their errors
    a, b = shared + rng.normal(0, 0.05, len(gold)), shared + 0.02 * gold + rng.normal(0, 0.05, len(gold))
    evaluator = Evaluator([task])
    ra, rb = task.result({"cosine": a}), task.result({"cosine": b})
    paired = bootstrap.interval(evaluator.replicates(task, rb)["spearman"] - evaluator.replicates(task, ra)["spearman"])
    unpaired = bootstrap.interval(evaluator.replicates(task, rb, seed=1)["spearman"]
                                  - evaluator.replicates(task, ra, seed=2)["spearman"])
    assert paired[1] - paired[0] < 0.5 * (unpaired[1] - unpaired[0])


def test_interval_is_the_percentile_interval() -> None:
    values = np.arange(1001, dtype=float)
    assert bootstrap.interval(values) == pytest.approx((25.0, 975.0))  # numpy linear interpolation
    assert bootstrap.interval(np.array([np.nan, 1.0, 1.0])) == (1.0, 1.0)


def test_reports_without_bootstrap_have_no_intervals() -> None:
    task, gold = _scored_task(50)
    evaluator = Evaluator([task], resamples=0)
    report = evaluator.report([task.result({"cosine": gold})], "m", "mean")
    assert report.tasks[0].intervals == {} and report.average_interval is None
    assert evaluator.compare(report, report).average.interval is None  # type: ignore[union-attr]


# ---------------------------------------------------------------- readers and detection
def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_readers_and_detection(tmp_path: Path) -> None:
    labelled = _write(tmp_path / "l.tsv", "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\t0\n")
    scored = _write(tmp_path / "s.csv", "sentence1,sentence2,score\na,b,4.5\nc,d,1\n")
    rerank = _write(tmp_path / "r.jsonl", json.dumps({"query": "q", "candidates": ["x", "y", "z"],
                                                       "positive": ["y", "w"]}) + "\n")
    assert detect_task_type(labelled) == "pair-classification"
    assert detect_task_type(scored) == "sts"
    assert detect_task_type(rerank) == "reranking"
    assert read_labelled_pairs(labelled).labels == [1, 0]
    rows = read_rerank(rerank)
    assert rows.candidates == [["y", "w", "x", "z"]] and rows.positives == [2]  # positives first, w added
    folder = _beir(tmp_path / "beir")
    assert detect_task_type(folder) == "retrieval"
    collection = read_beir(folder)
    assert collection.corpus_ids == ["d1", "d2", "d3"] and collection.corpus_texts[0] == "Title one first doc"
    assert collection.query_ids == ["q1"] and collection.relevant == [[1]] and collection.skipped_queries == 1
    jsonl_labels = _write(tmp_path / "l.jsonl", json.dumps({"sentence1": "a", "sentence2": "b", "label": 1}) + "\n"
                          + json.dumps({"sentence1": "c", "sentence2": "d", "label": 0.0}) + "\n")
    assert read_task(jsonl_labels).kind == "pair-classification"
    # --task pair-classification on a 0/1 'score' column reads it as the label
    binary_scores = _write(tmp_path / "b.tsv", "sentence1\tsentence2\tscore\na\tb\t1\nc\td\t0\n")
    assert read_task(binary_scores, "pair-classification").kind == "pair-classification"


def _beir(folder: Path, qrels: str = "query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td3\t0\n") -> Path:
    (folder / "qrels").mkdir(parents=True)
    _write(folder / "corpus.jsonl", "".join(json.dumps(d) + "\n" for d in [
        {"_id": "d2", "title": "", "text": "second doc"}, {"_id": "d1", "title": "Title one", "text": "first doc"},
        {"_id": "d3", "text": "third doc"}]))
    _write(folder / "queries.jsonl", json.dumps({"_id": "q1", "text": "a query"}) + "\n"
           + json.dumps({"_id": "q2", "text": "another"}) + "\n")
    _write(folder / "qrels" / "test.tsv", qrels)
    return folder


@pytest.mark.parametrize(("name", "content", "message"), [
    ("l.tsv", "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\t2\n",
     "{path}:3: label '2' is not 0 or 1; pair classification needs 0/1 labels (a file of graded labels and no "
     "'score' column is scored as STS when --task pair-classification is not given)"),
    ("l.tsv", "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\t1\n",
     "{path}: all 2 labels are 1; average precision needs pairs labelled 1 and pairs labelled 0"),
    ("l.tsv", "sentence1\tsentence2\tlabel\n", "{path}: a header but no sentence pairs below it; add one row per pair"),
    ("r.jsonl", '{"query": "q", "positive": ["a"], "negative": ["b"]}\n{"query": "q2", "positive": [], '
                '"negative": ["b"]}\n',
     "{path}:2: no positive; every reranking row needs at least one relevant candidate"),
    ("r.jsonl", '{"query": "q", "positive": "a", "negative": []}\n',
     "{path}:1: no negative candidates; nothing to rank the positives against"),
    ("r.jsonl", "\n\n", "{path}: no reranking rows; the file is empty"),
])
def test_bad_task_files_name_the_file_and_line(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = _write(tmp_path / name, content)
    with pytest.raises(DataError) as error:
        read_task(path, "reranking" if name.endswith(".jsonl") else "pair-classification")
    assert str(error.value) == message.format(path=path)


@pytest.mark.parametrize(("qrels", "message"), [
    ("query-id\tcorpus-id\tscore\nq1\td9\t1\n", "{q}:2: corpus-id 'd9' is not in {folder}/corpus.jsonl"),
    ("query-id\tcorpus-id\tscore\nq7\td1\t1\n", "{q}:2: query-id 'q7' is not in {folder}/queries.jsonl"),
    ("query-id\tcorpus-id\tscore\n", "{q}: no judgements; the file is empty"),
])
def test_bad_qrels_name_the_file_line_and_id(tmp_path: Path, qrels: str, message: str) -> None:
    folder = _beir(tmp_path / "beir", qrels)
    with pytest.raises(DataError) as error:
        read_beir(folder)
    assert str(error.value) == message.format(q=folder / "qrels" / "test.tsv", folder=folder)


def test_detection_of_an_empty_or_unknown_file(tmp_path: Path) -> None:
    empty = _write(tmp_path / "e.tsv", "")
    with pytest.raises(DataError, match=r"e\.tsv: the file is empty$"):
        detect_task_type(empty)
    odd = _write(tmp_path / "o.tsv", "text\tlabel2\nx\t1\n")
    with pytest.raises(DataError, match=r"o\.tsv: cannot tell the task type \(found label2, text\)"):
        detect_task_type(odd)


def test_dev_set_resolution_checks_the_metric_without_loading(tmp_path: Path) -> None:
    rerank = _write(tmp_path / "dev.jsonl", '{"query": "q", "positive": ["a"], "negative": ["b"]}\n')
    name, factory = resolve_dev_set(str(rerank), None, "mrr@10")
    assert name == "dev.jsonl" and factory is not None
    evaluator = factory()
    assert evaluator.metric == "mrr@10" and evaluator.tasks[0].kind == "reranking"
    with pytest.raises(ConfigError) as error:
        resolve_dev_set(str(rerank), None, "spearman")
    assert str(error.value) == ("--dev-metric: 'spearman' is not a reranking metric; choose one of map, mrr@10, "
                                "ndcg@10")


# ---------------------------------------------------------------- command line
SENTENCES = [*TINY_SENTENCES, "the server is not running", "a man is playing music", "a big red car",
             "the backup job failed", "a cat is running", "a person is cooking"]


def _task_files(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [(a, b, int(i % 3 == 0)) for i, (a, b) in enumerate(zip(SENTENCES, SENTENCES[3:] + SENTENCES[:3]))]
    files = {"pairs": _write(folder / "dup.tsv", "sentence1\tsentence2\tlabel\n"
                             + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in pairs))}
    files["rerank"] = _write(folder / "rr.jsonl", "".join(
        json.dumps({"query": s, "positive": [SENTENCES[(i + 1) % 14]],
                    "negative": [SENTENCES[(i + 2) % 14], SENTENCES[(i + 5) % 14], SENTENCES[(i + 7) % 14]]}) + "\n"
        for i, s in enumerate(SENTENCES)))
    beir = folder / "beir"
    (beir / "qrels").mkdir(parents=True, exist_ok=True)
    _write(beir / "corpus.jsonl", "".join(json.dumps({"_id": f"d{i}", "text": s}) + "\n"
                                          for i, s in enumerate(SENTENCES)))
    _write(beir / "queries.jsonl", "".join(json.dumps({"_id": f"q{i}", "text": s}) + "\n"
                                           for i, s in enumerate(SENTENCES[:8])))
    _write(beir / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n"
           + "".join(f"q{i}\td{(i + 8) % 14}\t1\n" for i in range(6)))
    files["retrieval"] = beir
    return files


def test_eval_all_task_types_side_by_side_with_intervals(tiny_model_dir: Path, tiny_model_dir_3layers: Path,
                                                         tmp_path: Path) -> None:
    files = _task_files(tmp_path / "tasks")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", str(tiny_model_dir), str(tiny_model_dir_3layers), "--pairs",
                                 str(files["pairs"]), "--rerank", str(files["rerank"]), "--retrieval",
                                 str(files["retrieval"]), "--bootstrap", "200", "--json", str(out)])
    assert result.exit_code == 0, result.output
    for title in ("dup.tsv — pair classification", "rr.jsonl — reranking", "beir — retrieval"):
        assert title in result.stdout
    payload = json.loads(out.read_text())
    first, second = payload
    reports = {r["title"]: r for r in first["reports"]}
    rerank = reports["rr.jsonl — reranking"]["tasks"]["rr.jsonl"]
    assert rerank["main_metric"] == "map" and rerank["units"] == 14 and set(rerank["ci"]) == {"map", "mrr@10",
                                                                                              "ndcg@10"}
    low, high = rerank["ci"]["map"]
    assert low <= rerank["metrics"]["map"] <= high
    retrieval = reports["beir — retrieval"]["tasks"]["beir"]
    assert retrieval["units"] == 6 and retrieval["main_metric"] == "ndcg@10"
    assert first["delta_vs_first"] is None
    delta = second["delta_vs_first"][0]["tasks"]["dup.tsv"]["ap"]
    ap_first = reports["dup.tsv — pair classification"]["tasks"]["dup.tsv"]["ap"]
    ap_second = second["reports"][0]["tasks"]["dup.tsv"]["ap"]
    assert delta["delta"] == pytest.approx(ap_second - ap_first) and len(delta["ci"]) == 2


def test_eval_same_model_twice_gives_a_zero_delta_and_bootstrap_0_turns_cis_off(tiny_model_dir: Path,
                                                                                tmp_path: Path) -> None:
    files = _task_files(tmp_path / "tasks")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", str(tiny_model_dir), str(tiny_model_dir), "--rerank", str(files["rerank"]),
                                 "--json", str(out)])
    assert result.exit_code == 0, result.output
    deltas = json.loads(out.read_text())[1]["delta_vs_first"][0]["tasks"]["rr.jsonl"]
    assert [d["ci"] for d in deltas.values()] == [[0.0, 0.0]] * 3  # map, mrr@10, ndcg@10
    off = runner.invoke(app, ["eval", str(tiny_model_dir), "--rerank", str(files["rerank"]), "--bootstrap", "0",
                              "--json", str(out)])
    assert off.exit_code == 0, off.output
    report = json.loads(out.read_text())[0]["reports"][0]
    assert report["tasks"]["rr.jsonl"]["ci"] == {} and report["average_ci"] is None


@pytest.mark.parametrize(("flag", "content", "message"), [
    ("--pairs", "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\tyes\n",  # a number other than 0/1 would be STS
     "Error: {path}:3: label 'yes' is not a number; label each pair 1 = same meaning, 0 = different, or a "
     "similarity score such as 0-5"),
    ("--rerank", '{"query": "q", "positive": [], "negative": ["b"]}\n',
     "Error: {path}:1: no positive; every reranking row needs at least one relevant candidate"),
    ("--pairs", "", "Error: {path}: the file is empty"),
])
def test_eval_bad_input_is_one_line(tiny_model_dir: Path, tmp_path: Path, flag: str, content: str,
                                    message: str) -> None:
    path = _write(tmp_path / ("bad.jsonl" if flag == "--rerank" else "bad.tsv"), content)
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", str(tiny_model_dir), flag, str(path), "--json", str(out)])
    assert result.exit_code == 1
    assert result.stderr.startswith(message.format(path=path)) and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_eval_bad_task_option(tiny_model_dir: Path, tmp_path: Path) -> None:
    files = _task_files(tmp_path / "tasks")
    result = runner.invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(files["pairs"]), "--task", "rerank"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("Error: --task: 'rerank' is not one of sts, pair-classification (--rerank and "
                                     "--retrieval name their type themselves)")


def test_adapt_dev_on_a_reranking_file_states_the_delta_with_its_ci(tiny_model_dir: Path, tmp_path: Path) -> None:
    files = _task_files(tmp_path / "tasks")
    corpus = _write(tmp_path / "corpus.txt", "".join(f"{s} {i}\n" for i in range(3) for s in SENTENCES))
    output = tmp_path / "run"
    result = runner.invoke(app, ["adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(output),
                                 "--dev", str(files["rerank"]), "--dev-metric", "ndcg@10", "--batch-size", "8",
                                 "--max-steps", "2", "--eval-every", "1", "--max-length", "16"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["dev_metric"] == "ndcg@10 x100 (reranking, cosine)"
    low, high = metrics["dev_change_ci"]
    assert low <= metrics["dev_change"] <= high
    assert metrics["bootstrap"] == {"resamples": 1000, "seed": 0, "confidence": 0.95, "paired": True}
    flat = " ".join(result.stdout.replace("│", " ").split())  # the summary's cells wrap inside the box
    assert f"{metrics['dev_change']:+.2f} [{low:+.2f}, {high:+.2f}]" in flat
    # the dev score is the eval number: same evaluator, same metric
    evaluated = runner.invoke(app, ["eval", str(tiny_model_dir), "--rerank", str(files["rerank"]), "--bootstrap",
                                    "0"])
    ndcg_row = next(line for line in evaluated.stdout.splitlines() if "ndcg@10" in line)
    assert f"{metrics['base_score']:.2f}" in ndcg_row


@pytest.mark.parametrize(("args", "message"), [
    (["--dev-metric", "spearman"], "Error: --dev-metric: 'spearman' is not a reranking metric; choose one of map, "
                                   "mrr@10, ndcg@10"),
    (["--dev-metric", "map", "--dev", "none"], "Error: --dev-metric: needs a dev set; --dev is none"),
])
def test_adapt_dev_metric_errors_write_nothing(tiny_model_dir: Path, tmp_path: Path, args: list[str],
                                               message: str) -> None:
    files = _task_files(tmp_path / "tasks")
    corpus = _write(tmp_path / "corpus.txt", "".join(f"{s}\n" for s in SENTENCES))
    output = tmp_path / "run"
    dev = [] if "--dev" in args else ["--dev", str(files["rerank"])]
    result = runner.invoke(app, ["adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(output),
                                 *dev, *args])
    assert result.exit_code == 2
    assert result.stderr.strip() == message
    assert not output.exists()


def test_adapt_bad_dev_file_fails_before_training(tiny_model_dir: Path, tmp_path: Path) -> None:
    bad = _write(tmp_path / "dev.tsv", "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\tyes\n")
    corpus = _write(tmp_path / "corpus.txt", "".join(f"{s}\n" for s in SENTENCES))
    output = tmp_path / "run"
    result = runner.invoke(app, ["adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(output),
                                 "--dev", str(bad), "--max-steps", "1", "--batch-size", "4"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(f"Error: {bad}:3: label 'yes' is not a number")
    assert not (output / "metrics.json").exists() and not (output / "model.safetensors").exists()


# ---------------------------------------------------------------- layering
def test_evaluation_imports_point_one_way_and_load_no_torch() -> None:
    import ast
    import subprocess
    import sys

    package = Path(__file__).resolve().parents[2] / "sentadapt" / "evaluation"

    def imported(name: str) -> set[str]:
        tree = ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        modules |= {f"sentadapt.evaluation.{alias.name}" for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module == "sentadapt.evaluation"
                    for alias in node.names}
        return {m.rsplit(".", 1)[-1] for m in modules if m.startswith("sentadapt.evaluation.")}

    assert imported("tasks") == set()  # the STS table imports no other evaluation module (no sts ↔ tasks cycle)
    task_modules = {"sts", "pairclass", "reranking", "retrieval"}
    for lower in ("contract", "bootstrap", "ranking", "evaluator"):
        assert not imported(lower) & (task_modules | {"task_types"}), lower
    for module in task_modules:
        assert "task_types" not in imported(module), module
    code = "import sys, sentadapt.evaluation.task_types; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout == "False\n"


@pytest.mark.parametrize(("content", "message"), [
    (b'{"query": "q", "positive": ["p"], "negative": ["n"]}\n{not json\n',
     "{path}:2: invalid JSON (Expecting property name enclosed in double quotes); each line must be one JSON object"),
    (b'\n["a list"]\n', "{path}:2: expected a JSON object with query, positive and negative (or candidates)"),
    (b'{"query": "caf\xe9", "positive": ["p"]}\n',
     "{path}:1: not valid UTF-8 (invalid continuation byte 0xe9 at byte 15 of the line); save the file as UTF-8"),
])
def test_reranking_json_lines_errors_name_file_and_line(tmp_path: Path, content: bytes, message: str) -> None:
    from sentadapt.data.rerank_files import read_rerank

    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    with pytest.raises(DataError) as error:
        read_rerank(path)
    assert str(error.value) == message.format(path=path)


def test_beir_record_without_id_names_file_line_and_file_role(tmp_path: Path) -> None:
    from sentadapt.data.beir import read_beir

    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"text": "no id"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "b"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(DataError) as error:
        read_beir(tmp_path)
    assert str(error.value) == f"{tmp_path / 'corpus.jsonl'}:2: expected a JSON object with _id and text (documents)"
