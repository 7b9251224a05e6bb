from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from sentadapt.data.pair_files import read_scored_pairs
from sentadapt.errors import ConfigError, DataError
from sentadapt.evaluation.sts import StsEvaluator, score_task
from sentadapt.evaluation.tasks import parse_task_list
from sentadapt.model.encoder import Encoder
from tests.conftest import FLOAT32_RTOL


def test_spearman_on_a_hand_made_file(tmp_path: Path) -> None:
    # cosines 1, 0.5, 0, -0.5 for the four pairs; gold ranks agree except the last two swap
    path = tmp_path / "p.tsv"
    path.write_text("sentence1\tsentence2\tscore\na\tb\t5\nc\td\t3\ne\tf\t1\ng\th\t2\n")
    pairs = read_scored_pairs(path)
    result = score_task("p", pairs, np.array([1.0, 0.5, 0.0, -0.5]), "all")
    assert result.metrics["spearman"] == pytest.approx(80.0)  # 1 - 6*(1+1)/(4*15) = 0.8
    assert result.units == 4


def test_aggregations_over_subsets(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    rows = [("a", "b", 5, "x"), ("c", "d", 1, "x"), ("e", "f", 3, "x"), ("g", "h", 1, "y"), ("i", "j", 4, "y")]
    path.write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "score": s, "subset": sub}) + "\n"
                            for a, b, s, sub in rows))
    pairs = read_scored_pairs(path)
    cosines = np.array([0.9, 0.1, 0.2, 0.3, 0.8])
    by_all = score_task("t", pairs, cosines, "all")
    by_mean = score_task("t", pairs, cosines, "mean")
    by_wmean = score_task("t", pairs, cosines, "wmean")
    x = spearmanr([0.9, 0.1, 0.2], [5, 1, 3]).statistic * 100  # 50.0
    y = spearmanr([0.3, 0.8], [1, 4]).statistic * 100  # 100.0
    assert by_all.metrics["spearman"] == pytest.approx(spearmanr(cosines, [5, 1, 3, 1, 4]).statistic * 100)
    assert by_mean.metrics["spearman"] == pytest.approx((x + y) / 2)
    assert by_wmean.metrics["spearman"] == pytest.approx((3 * x + 2 * y) / 5)
    assert by_all.extras["subsets"] == pytest.approx({"x": x, "y": y})


@pytest.mark.parity
def test_evaluator_matches_direct_computation(tiny_encoder: Encoder, pairs_tsv: Path) -> None:
    evaluator = StsEvaluator.from_pairs_file(pairs_tsv)
    report = evaluator(tiny_encoder, batch_size=3)
    pairs = read_scored_pairs(pairs_tsv)
    left = torch.stack([tiny_encoder.encode([s])[0] for s in pairs.sentence1])
    right = torch.stack([tiny_encoder.encode([s])[0] for s in pairs.sentence2])
    cosines = torch.nn.functional.cosine_similarity(left, right).numpy()
    expected = spearmanr(cosines, pairs.scores).statistic * 100
    assert report.tasks[0].metrics["spearman"] == pytest.approx(expected, rel=FLOAT32_RTOL)
    assert report.pooling == "mean"


def test_unique_sentences_shared_across_tasks(pairs_tsv: Path) -> None:
    pairs = read_scored_pairs(pairs_tsv)
    evaluator = StsEvaluator.from_pairs({"a": pairs, "b": read_scored_pairs(pairs_tsv)})
    assert len(evaluator.sentences) == len(set(pairs.sentence1 + pairs.sentence2)) == 15


def test_parse_task_list() -> None:
    assert parse_task_list("all") == ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
    assert parse_task_list("all", split="dev") == ["stsb", "sickr"]
    assert parse_task_list("STSB, sickr,stsb") == ["stsb", "sickr"]


def test_unknown_task_suggests() -> None:
    with pytest.raises(ConfigError) as error:
        parse_task_list("stsb,sts17")
    assert str(error.value) == (
        "--sts: Unknown task 'sts17'. Did you mean: sts16, sts15, sts14? "
        "Available: all, sickr, sts12, sts13, sts14, sts15, sts16, stsb"
    )


def test_task_without_split() -> None:
    with pytest.raises(ConfigError, match=r"^--sts: task sts12 has no 'dev' split \(it has test\)$"):
        parse_task_list("sts12", split="dev")


def test_constant_gold_scores_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("sentence1\tsentence2\tscore\na\tb\t3\nc\td\t3\n")
    with pytest.raises(DataError) as error:
        StsEvaluator.from_pairs_file(path)
    assert str(error.value) == (
        f"{path}: all 2 gold scores are equal (3); a rank correlation needs pairs with different scores"
    )


def test_empty_pairs_file(tmp_path: Path) -> None:
    path = tmp_path / "e.tsv"
    path.write_text("sentence1\tsentence2\tscore\n")
    with pytest.raises(DataError, match=r"e\.tsv: a header but no sentence pairs below it; add one row per pair$"):
        StsEvaluator.from_pairs_file(path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("m.tsv", "sentence1\tscore\na\t1\n", "m.tsv:1: header is missing column(s) sentence2; expected a header "
         "line with sentence1, sentence2, score"),
        ("n.tsv", "sentence1\tsentence2\tscore\na\tb\tfive\n", "n.tsv:2: score 'five' is not a number"),
        ("c.tsv", "sentence1\tsentence2\tscore\na\tb\n", "c.tsv:2: expected 3 columns, found 2"),
        ("j.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 1}\n{oops\n', "j.jsonl:2: invalid JSON"),
        ("k.jsonl", '{"sentence1": "a", "score": 1}\n', "k.jsonl:1: missing field(s) sentence2"),
        ("x.txt", "a\n", "x.txt: unknown pairs format '.txt'; use .tsv, .csv, .jsonl or .parquet"),
    ],
)
def test_malformed_pairs_name_file_and_line(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError) as error:
        read_scored_pairs(path)
    assert str(error.value).startswith(f"{tmp_path}/{message}")


def test_a_bad_parquet_row_is_named_by_its_row_not_a_line(tmp_path: Path) -> None:
    """Issue 82: a Parquet row was cited as `file.parquet:2`, a line of a binary file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "dev.parquet"
    pq.write_table(pa.table({"sentence1": ["a", "c"], "sentence2": ["b", "d"], "score": ["1", "five"]}), path)
    with pytest.raises(DataError) as error:
        read_scored_pairs(path)
    assert str(error.value) == f"{path} row 2: score 'five' is not a number"


def test_score_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "sickr.test.jsonl"
    path.write_text(json.dumps({"sentence1": "a", "sentence2": "b", "score": 7}) + "\n")
    with pytest.raises(DataError, match=r"sickr.test.jsonl:1: score 7 is outside \[1, 5\]$"):
        read_scored_pairs(path, score_range=(1, 5))


def test_csv_with_quotes_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_bytes('\ufeffsentence1,sentence2,score\r\n"a, b",c,1\r\nd,"e ""f""",2\r\n'.encode())
    pairs = read_scored_pairs(path)
    assert pairs.sentence1 == ["a, b", "d"] and pairs.sentence2 == ["c", 'e "f"'] and pairs.scores == [1.0, 2.0]
