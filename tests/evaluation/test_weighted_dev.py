"""A chosen dev set's 'weight' column (issue 58): read in every row or none, and every metric and bootstrap resample
counting pair i weight[i] times."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentadapt.data.pair_files import read_labelled_pairs, read_user_scored_pairs
from sentadapt.errors import DataError
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.evaluation.pairclass import PairClassificationTask
from sentadapt.evaluation.sts import ScoredPairsTask

ROWS = [("a cat sits", "a cat is sitting", 4.5), ("a dog runs", "a dog is running", 4.0),
        ("the sun is hot", "it is warm", 2.5), ("a man sings", "a bird flies", 0.5),
        ("the car is red", "a red car", 4.8), ("it rains", "the market fell", 0.0)]


def write(path: Path, weights: list[str], score: str = "score") -> Path:
    lines = [f"sentence1\tsentence2\tweight\t{score}"]
    lines += [f"{a}\t{b}\t{w}\t{s}" for (a, b, s), w in zip(ROWS, weights)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("weights", "message"), [
    (["1", "2", "0", "1", "1", "1"], "dev.tsv:4: weight '0' is not a positive number; it is 1 / the chance the pair "
                                     "was chosen: restore the value `sentadapt pairs` wrote, or delete the row"),
    (["1", "-2", "1", "1", "1", "1"], "dev.tsv:3: weight '-2' is not a positive number"),
    (["1", "2", "nan", "1", "1", "1"], "dev.tsv:4: weight 'nan' is not a positive number"),
    (["1", "2", "", "1", "1", "1"], "dev.tsv:4: no weight, but the rows above have one; restore the weight "
                                    "`sentadapt pairs` wrote, or delete the row"),
    (["", "", "3", "1", "1", "1"], "dev.tsv:2: no weight, but line 4 has one; a chosen dev set needs the weight "
                                   "`sentadapt pairs` wrote in every row"),
])
def test_bad_weights_are_one_line_naming_the_row(tmp_path: Path, weights: list[str], message: str) -> None:
    path = write(tmp_path / "dev.tsv", weights)
    with pytest.raises(DataError) as error:
        read_user_scored_pairs(path)
    assert str(error.value).startswith(f"{tmp_path}/{message}")
    binary = write(tmp_path / "dev.tsv", weights, score="label")
    binary.write_text(binary.read_text().replace("\t4.5\n", "\t1\n").replace("\t4.0\n", "\t1\n")
                      .replace("\t2.5\n", "\t0\n").replace("\t0.5\n", "\t0\n").replace("\t4.8\n", "\t1\n")
                      .replace("\t0.0\n", "\t0\n"))
    with pytest.raises(DataError) as error:
        read_labelled_pairs(binary)
    assert str(error.value).startswith(f"{tmp_path}/{message}")


def test_a_file_without_a_weight_column_reads_unweighted(pairs_tsv: Path) -> None:
    assert read_user_scored_pairs(pairs_tsv).weights == []
    assert ScoredPairsTask("p", read_user_scored_pairs(pairs_tsv)).weights is None


def expanded_task(tmp_path: Path, weights: list[int]) -> tuple[ScoredPairsTask, ScoredPairsTask, np.ndarray]:
    """The weighted file, and the same pairs with pair i written weights[i] times (what an integer weight means)."""
    path = write(tmp_path / "dev.tsv", [str(w) for w in weights])
    weighted = ScoredPairsTask("dev.tsv", read_user_scored_pairs(path))
    plain = weighted.pairs.__class__(source="copies")
    for (a, b, s), w in zip(ROWS, weights):
        for copy in range(w):  # distinct texts per copy: the repeat check refuses a pair listed twice
            plain.append(f"{a} {copy}", f"{b} {copy}", s)
    return weighted, ScoredPairsTask("copies", plain), np.repeat(np.arange(len(ROWS)), weights)


def test_integer_weights_score_as_that_many_copies_of_the_pair(tmp_path: Path) -> None:
    from scipy.stats import pearsonr, spearmanr

    weights = [1, 3, 2, 1, 4, 2]
    weighted, _, copies = expanded_task(tmp_path, weights)
    cosines = np.array([0.9, 0.7, 0.75, 0.1, 0.95, 0.2])
    metrics = weighted.result({"cosine": cosines}).metrics
    gold = weighted.gold[copies]
    assert metrics["spearman"] == pytest.approx(100 * spearmanr(cosines[copies], gold).statistic, abs=1e-9)
    assert metrics["pearson"] == pytest.approx(100 * pearsonr(cosines[copies], gold).statistic, abs=1e-9)
    # scale does not matter: weight 1/π and weight M/n·1/π stand for the same population
    scaled = ScoredPairsTask("s", read_user_scored_pairs(write(tmp_path / "s.tsv", [str(7.5 * w) for w in weights])))
    assert scaled.result({"cosine": cosines}).metrics["spearman"] == pytest.approx(metrics["spearman"], abs=1e-9)


def test_weighted_average_precision_is_sklearns_with_sample_weights(tmp_path: Path) -> None:
    from sklearn.metrics import average_precision_score

    weights = [0.5, 3.0, 2.0, 1.0, 4.0, 2.5]
    path = write(tmp_path / "dev.tsv", [str(w) for w in weights], score="label")
    labels = [1, 1, 0, 0, 1, 0]
    text = path.read_text().splitlines()
    path.write_text("\n".join([text[0]] + [line.rsplit("\t", 1)[0] + f"\t{label}"
                                           for line, label in zip(text[1:], labels)]) + "\n")
    task = PairClassificationTask("dev.tsv", read_labelled_pairs(path))
    cosines = np.array([0.9, 0.4, 0.75, 0.1, 0.95, 0.2])
    ap = task.result({"cosine": cosines}).metrics["ap"]
    assert ap == pytest.approx(100 * average_precision_score(labels, cosines, sample_weight=weights), abs=1e-9)


def test_the_bootstrap_resamples_the_weighted_draws(tmp_path: Path) -> None:
    """Each replicate is the weighted statistic of the resampled rows: counts × weights, for base and model alike
    (paired); an unweighted file draws exactly the replicates it drew before weights existed."""
    from sentadapt.evaluation import bootstrap
    from sentadapt.evaluation.weighted_stats import TieGroups, weighted_spearman

    weights = [1, 3, 2, 1, 4, 2]
    weighted, _, _ = expanded_task(tmp_path, weights)
    evaluator = Evaluator([weighted], resamples=50)
    cosines = np.array([0.9, 0.7, 0.75, 0.1, 0.95, 0.2])
    result = weighted.result({"cosine": cosines})
    replicates = evaluator.replicates(weighted, result)["spearman"]
    counts = bootstrap.resample_counts(6, 50, bootstrap.task_seed("dev.tsv"))
    expected = 100 * weighted_spearman(counts * np.array(weights, dtype=float),
                                                 TieGroups(cosines), TieGroups(weighted.gold))
    np.testing.assert_allclose(replicates, expected, rtol=0, atol=1e-9)
    plain = ScoredPairsTask("dev.tsv", weighted.pairs.__class__(
        weighted.pairs.sentence1, weighted.pairs.sentence2, weighted.pairs.scores, weighted.pairs.subsets))
    unweighted = Evaluator([plain], resamples=50).replicates(plain, plain.result({"cosine": cosines}))["spearman"]
    expected = 100 * weighted_spearman(counts, TieGroups(cosines), TieGroups(plain.gold))
    assert np.array_equal(unweighted, expected)


def test_the_table_footnote_says_which_files_are_weighted(tmp_path: Path, pairs_tsv: Path) -> None:
    from sentadapt.evaluation.result_tables import protocol

    weighted, _, _ = expanded_task(tmp_path, [1, 3, 2, 1, 4, 2])
    plain = ScoredPairsTask("pairs.tsv", read_user_scored_pairs(pairs_tsv))
    few = f"; {pairs_tsv}: 8 labelled pairs, too few for its intervals or a decision to mean much"  # issue 82
    assert protocol(Evaluator([plain]), "all").split(few)[0].endswith("aggregate 'all'")
    assert protocol(Evaluator([plain, weighted]), "all").split(few)[0].endswith(
        "aggregate 'all'; dev.tsv: pairs weighted by their 'weight' column, so each figure and its CI estimate the "
        "candidates they were chosen from (docs/decision.md)")


@pytest.mark.parametrize(("domain", "finite"), [("candidates", True), ("corpus", False), (None, True)])
def test_the_finite_population_factor_applies_only_where_the_candidates_are_the_domain(
        tmp_path: Path, domain: str | None, finite: bool) -> None:
    """Issue 83: candidates proposed from a corpus are a draw from it (two-phase: no 1 − π factor, the interval is
    about the domain); a --candidates file is the population itself; a design written before issue 83 says neither
    and keeps the factor it had."""
    import json

    from sentadapt.data.pair_files import read_scored_pairs

    path = tmp_path / "dev.tsv"
    path.write_text("sentence1\tsentence2\tweight\tscore\n" + "".join(f"a {i}\tb {i}\t{2 + i % 3}\t{i % 6}\n"
                                                                       for i in range(12)))
    design = {"design": "importance", "guide": "run", "guide_model": "run", "base": "m", "candidates": 60,
              "pairs": 12, "uniform_share": 0.5, "seed": 0, **({"domain": domain} if domain else {})}
    (tmp_path / "dev.tsv.design.json").write_text(json.dumps(design))
    assert read_scored_pairs(path).design is finite
