"""Every task metric equals sentence-transformers' own evaluator on the same embeddings (needs the export extra).

The peer gets a stand-in model whose encode() returns exactly the vectors our evaluator scored, so any
difference is in the metric code, not in the encoders.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sentadapt.data.beir import read_beir
from sentadapt.data.pair_files import read_labelled_pairs
from sentadapt.evaluation.contract import EmbeddingTable, EvalTask, TaskResult
from sentadapt.evaluation.retrieval import RetrievalTask
from sentadapt.evaluation.task_types import read_task
from sentadapt.model.encoder import Encoder
from tests.evaluation.test_eval_tasks import SENTENCES

st = pytest.importorskip("sentence_transformers")
evaluation = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation")


class FixedVectors:
    """The parts of a SentenceTransformer the evaluators use, answering from a table of known vectors."""

    similarity_fn_name = "cosine"

    def __init__(self, table: EmbeddingTable) -> None:
        self.table = table

    def encode(self, sentences: list[str] | str, convert_to_numpy: bool = True, convert_to_tensor: bool = False,
               **_options: object) -> torch.Tensor | np.ndarray | list[torch.Tensor]:
        """Returns what SentenceTransformer.encode returns for these options: a tensor (convert_to_tensor), else a
        numpy array (convert_to_numpy, its default), else a list of tensors. An evaluator that asks for numpy and
        is given a tensor takes another code path: BinaryClassificationEvaluator of sentence-transformers 6.0.1
        then fails in torch.tensor(list of tensors), which a real model never makes it do."""
        vectors = self.table.of([sentences] if isinstance(sentences, str) else list(sentences))
        if convert_to_tensor:
            return vectors
        if convert_to_numpy:
            return vectors.cpu().numpy()
        return list(vectors)

    encode_query = encode_document = encode

    @staticmethod
    def similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return st.util.cos_sim(a, b)


def _score(task: EvalTask, encoder: Encoder) -> tuple[TaskResult, FixedVectors]:
    texts = list(dict.fromkeys(task.texts()))
    table = EmbeddingTable(texts, encoder.encode(texts))
    return task.score(table), FixedVectors(table)


@pytest.fixture
def encoder(tiny_model_dir: Path) -> Encoder:
    return Encoder.load(tiny_model_dir, device="cpu")


def _words(count: int, seed: int) -> list[str]:
    """Distinct short sentences from the tiny vocabulary (more items than SENTENCES alone)."""
    rng = np.random.default_rng(seed)
    words = " ".join(SENTENCES).split()
    texts: dict[str, None] = {}
    while len(texts) < count:
        texts[" ".join(rng.choice(words, int(rng.integers(3, 8))))] = None
    return list(texts)


def test_pair_classification_equals_binary_classification_evaluator(encoder: Encoder, tmp_path: Path) -> None:
    texts = _words(160, 0)
    rng = np.random.default_rng(0)
    rows = [(texts[i], texts[i + 80], int(rng.integers(0, 2))) for i in range(80)]
    path = tmp_path / "p.tsv"
    path.write_text("sentence1\tsentence2\tlabel\n" + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows))
    result, model = _score(read_task(path), encoder)
    pairs = read_labelled_pairs(path)
    peer = evaluation.BinaryClassificationEvaluator(pairs.sentence1, pairs.sentence2, pairs.labels,
                                                    similarity_fn_names=["cosine"])
    theirs = peer.compute_metrics(model)["cosine"]
    assert result.metrics["ap"] == pytest.approx(100 * theirs["ap"], abs=1e-6)
    assert result.metrics["f1"] == pytest.approx(100 * theirs["f1"], abs=1e-6)
    assert result.metrics["accuracy"] == pytest.approx(100 * theirs["accuracy"], abs=1e-6)
    # thresholds: ours from float64 cosines, theirs from float32 ones
    assert result.extras["f1_threshold"] == pytest.approx(theirs["f1_threshold"], abs=1e-5)
    assert result.extras["accuracy_threshold"] == pytest.approx(theirs["accuracy_threshold"], abs=1e-5)


def test_reranking_equals_reranking_evaluator(encoder: Encoder, tmp_path: Path) -> None:
    texts = _words(200, 1)
    rng = np.random.default_rng(1)
    samples = []
    for query in range(40):
        candidates = rng.choice(len(texts) - 40, int(rng.integers(4, 20)), replace=False) + 40
        positives = int(rng.integers(1, len(candidates)))
        samples.append({"query": texts[query], "positive": [texts[i] for i in candidates[:positives]],
                        "negative": [texts[i] for i in candidates[positives:]]})
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    result, model = _score(read_task(path), encoder)
    theirs = evaluation.RerankingEvaluator(samples, at_k=10).compute_metrics(model)
    assert result.metrics["map"] == pytest.approx(100 * theirs["map"], abs=1e-6)
    assert result.metrics["mrr@10"] == pytest.approx(100 * theirs["mrr"], abs=1e-6)
    assert result.metrics["ndcg@10"] == pytest.approx(100 * theirs["ndcg"], abs=1e-6)


def test_retrieval_equals_information_retrieval_evaluator(encoder: Encoder, tmp_path: Path) -> None:
    texts = _words(400, 2)
    rng = np.random.default_rng(2)
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n"
                                                 for i, t in enumerate(texts[:340])))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n"
                                                  for i, t in enumerate(texts[340:])))
    qrels = [(q, d) for q in range(60) for d in rng.choice(340, int(rng.integers(1, 6)), replace=False)]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                               + "".join(f"q{q}\td{d}\t1\n" for q, d in qrels))
    collection = read_beir(folder)
    result, model = _score(RetrievalTask("beir", collection), encoder)
    queries = dict(zip(collection.query_ids, collection.query_texts))
    corpus = dict(zip(collection.corpus_ids, collection.corpus_texts))
    relevant = {q: {collection.corpus_ids[r] for r in rows} for q, rows in zip(collection.query_ids,
                                                                               collection.relevant)}
    peer = evaluation.InformationRetrievalEvaluator(queries, corpus, relevant, corpus_chunk_size=97,
                                                    mrr_at_k=[10], ndcg_at_k=[10], map_at_k=[100],
                                                    precision_recall_at_k=[10, 100], accuracy_at_k=[10],
                                                    score_functions={"cosine": st.util.cos_sim})
    theirs = peer.compute_metrices(model)["cosine"]
    assert result.metrics["ndcg@10"] == pytest.approx(100 * theirs["ndcg@k"][10], abs=1e-6)
    assert result.metrics["mrr@10"] == pytest.approx(100 * theirs["mrr@k"][10], abs=1e-6)
    assert result.metrics["recall@10"] == pytest.approx(100 * theirs["recall@k"][10], abs=1e-6)
    assert result.metrics["recall@100"] == pytest.approx(100 * theirs["recall@k"][100], abs=1e-6)
    assert result.metrics["map@100"] == pytest.approx(100 * theirs["map@k"][100], abs=1e-6)
