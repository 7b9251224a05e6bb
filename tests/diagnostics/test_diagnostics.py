"""sentadapt.diagnostics: every metric against a hand-computed value, and the passes against the Encoder."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sentadapt.data.pair_files import read_scored_pairs
from sentadapt.diagnostics import metrics, parse_reports
from sentadapt.diagnostics.anisotropy import sample_pass
from sentadapt.diagnostics.layers import layer_sweep
from sentadapt.diagnostics.report import gather_inputs
from sentadapt.diagnostics.scoring import PairScorer
from sentadapt.diagnostics.topk import frequency_ranks, token_counts, topk_curve
from sentadapt.errors import ConfigError, DataError
from sentadapt.evaluation.sts import StsEvaluator
from sentadapt.model.pooling import Pooling
from tests.conftest import FLOAT32_RTOL, TINY_SENTENCES

# ------------------------------------------------------------------ random-pair cosine


def test_identical_rows_have_cosine_one_and_orthonormal_rows_zero() -> None:
    assert metrics.mean_pair_cosine(np.tile([[3.0, 4.0]], (5, 1))) == pytest.approx(1.0)
    assert metrics.mean_pair_cosine(torch.eye(6)) == pytest.approx(0.0, abs=1e-12)


def test_mean_pair_cosine_by_hand() -> None:
    # cos(e1, e2) = 0, cos(e1, e1+e2) = cos(e2, e1+e2) = 1/√2 → mean √2/3
    assert metrics.mean_pair_cosine([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]) == pytest.approx(math.sqrt(2) / 3)


def test_cross_group_cosine_counts_only_pairs_from_different_groups_and_ignores_padding() -> None:
    e1, e2, junk = [1.0, 0.0], [0.0, 1.0], [5.0, 5.0]
    cosine = metrics.CrossGroupCosine()
    # group A = {e1}, group B = {e1, e2}; the junk vector is padding (mask 0)
    cosine.add(torch.tensor([[e1, junk], [e1, e2]]), torch.tensor([[1, 0], [1, 1]]))
    # cross pairs: (e1, e1) → 1 and (e1, e2) → 0; the within-B pair (e1, e2) does not count
    assert float(cosine.mean()) == pytest.approx(0.5)


def test_cross_group_cosine_accumulates_batches_and_layers() -> None:
    vectors = torch.randn(2, 6, 3, 4, generator=torch.Generator().manual_seed(0))  # 2 layers, 6 groups of 3
    mask = torch.ones(6, 3)
    whole, split = metrics.CrossGroupCosine(), metrics.CrossGroupCosine()
    whole.add(vectors, mask)
    split.add(vectors[:, :2], mask[:2])
    split.add(vectors[:, 2:], mask[2:])
    unit = torch.nn.functional.normalize(vectors[0].reshape(18, 4).double(), dim=-1)
    group = torch.arange(18) // 3
    different = group[:, None] != group[None, :]
    brute = (unit @ unit.T)[different].mean()
    assert torch.allclose(whole.mean(), split.mean())
    assert float(whole.mean()[0]) == pytest.approx(float(brute))


# ------------------------------------------------------------------ isotropy


def test_isotropy_of_identical_rows_is_the_floor_e_minus_2() -> None:
    # every w equals the top eigenvector c: Z(c) = N·e, Z(−c) = N/e → I = e⁻²
    assert metrics.isotropy(np.tile([[1.0, 2.0, 2.0]], (10, 1))) == pytest.approx(math.exp(-2))


def test_isotropy_of_the_standard_basis_by_hand() -> None:
    d = 4  # W = I: Z(e_i) = e + (d − 1), Z(−e_i) = 1/e + (d − 1)
    assert metrics.isotropy(torch.eye(d)) == pytest.approx((d - 1 + math.exp(-1)) / (d - 1 + math.e))


def test_isotropic_gaussian_is_near_one_and_a_shifted_one_is_not() -> None:
    gaussian = torch.randn(20_000, 8, generator=torch.Generator().manual_seed(0))
    assert metrics.isotropy(gaussian) > 0.95
    assert metrics.isotropy(gaussian + 3.0) < 0.3  # a common offset: the cone of a collapsed space


# ------------------------------------------------------------------ spectrum


def test_rank_one_matrix_has_top1_share_one_and_effective_rank_one() -> None:
    matrix = torch.outer(torch.tensor([1.0, -2.0, 3.0, -1.0]), torch.tensor([0.5, 1.0, -2.0]))
    for normalize in (True, False):
        result = metrics.spectrum(matrix, normalize=normalize)
        assert result.top1_share == pytest.approx(1.0)
        assert result.top10_share == pytest.approx(1.0)
        assert result.effective_rank == pytest.approx(1.0)


def test_spectrum_of_an_isotropic_set_spreads_evenly() -> None:
    d = 12
    matrix = torch.cat([torch.eye(d), -torch.eye(d)])  # ±e_i: mean 0, equal variance on every axis
    result = metrics.spectrum(matrix)
    assert result.top1_share == pytest.approx(1 / d)
    assert result.top10_share == pytest.approx(10 / d)
    assert result.effective_rank == pytest.approx(d)


def test_effective_rank_by_hand() -> None:
    # centred rows ±(2, 0) and ±(0, 1): variances 8 and 2 → shares 0.8, 0.2 → exp(H) = exp(−0.8 ln 0.8 − 0.2 ln 0.2)
    matrix = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    result = metrics.spectrum(matrix, normalize=False)
    assert result.top1_share == pytest.approx(0.8)
    assert result.effective_rank == pytest.approx(math.exp(-(0.8 * math.log(0.8) + 0.2 * math.log(0.2))))


# ------------------------------------------------------------------ alignment & uniformity


def test_alignment_by_hand() -> None:
    assert metrics.alignment([[1.0, 1.0]], [[2.0, 2.0]]) == pytest.approx(0.0)  # same direction
    assert metrics.alignment([[2.0, 0.0], [1.0, 0.0]], [[0.0, 3.0], [1.0, 0.0]]) == pytest.approx(1.0)  # (2 + 0)/2


def test_uniformity_by_hand() -> None:
    # ‖e1 − e2‖² = 2 → log exp(−2·2) = −4
    assert metrics.uniformity([[1.0, 0.0], [0.0, 3.0]]) == pytest.approx(-4.0)
    # e1, e2, −e1: squared distances 2, 4, 2
    expected = math.log((2 * math.exp(-4) + math.exp(-8)) / 3)
    assert metrics.uniformity([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]) == pytest.approx(expected)


# ------------------------------------------------------------------ frequency bias


def test_frequency_buckets_rank_by_count_skip_special_tokens_and_correlate_rank_with_norm() -> None:
    # ids 1..5 occur; id 0 is "special" (most frequent, excluded); norms grow as tokens get rarer
    counts = torch.tensor([100, 50, 40, 30, 20, 10, 0])
    embeddings = torch.tensor([[9.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0], [5.0, 0.0], [6.0, 0.0]])
    buckets, rho = metrics.frequency_buckets(counts, embeddings, exclude_ids=(0,), edges=(2,))
    assert [(b.ranks, b.tokens) for b in buckets] == [("1–2", 2), ("3–5", 3)]
    assert buckets[0].mean_norm == pytest.approx(1.5) and buckets[1].mean_norm == pytest.approx(4.0)
    # nearest 3 neighbours on a line of points 1..6 and 9: for 1 → 1, 2, 3 away; for 2 → 1, 1, 2
    assert buckets[0].mean_knn_distance == pytest.approx((6 + 4) / 6)
    assert rho == pytest.approx(1.0)  # rarer ⇒ larger norm, perfectly


# ------------------------------------------------------------------ top-k


def test_frequency_ranks_break_ties_by_id_and_skip_unseen_tokens() -> None:
    ranks = frequency_ranks(torch.tensor([0, 5, 9, 5, 1, 0]), max_k=4)
    assert ranks.tolist() == [4, 1, 0, 2, 3, 4]
    assert frequency_ranks(torch.tensor([0, 5, 0]), max_k=3).tolist() == [3, 0, 3]


def test_token_counts_count_cls_and_sep_once_per_sentence_and_never_padding(tiny_encoder) -> None:
    tokenizer = tiny_encoder.tokenizer
    counts = token_counts(tiny_encoder, [*TINY_SENTENCES, "[PAD] the server"])
    assert counts[tokenizer.cls_token_id] == len(TINY_SENTENCES) + 1
    assert counts[tokenizer.sep_token_id] == len(TINY_SENTENCES) + 1
    assert counts[tokenizer.pad_token_id] == 0


def _mean_without(encoder, sentences: list[str], removed: set[int]) -> torch.Tensor:
    """Reference: mean of the last layer over the tokens whose id is not in `removed`, one sentence at a time."""
    rows = []
    for sentence in sentences:
        ids = torch.tensor([encoder.tokenize_ids([sentence])[0]])
        with torch.no_grad():
            hidden = encoder.run_backbone(ids, torch.ones_like(ids)).last_hidden_state[0]
        keep = torch.tensor([token not in removed for token in ids[0].tolist()])
        rows.append(hidden[keep].mean(dim=0))
    return torch.stack(rows)


@pytest.mark.parity
def test_topk_counts_cls_and_sep_as_the_two_most_frequent_and_removes_the_right_tokens(
    tiny_encoder, pairs_tsv: Path
) -> None:
    pairs = read_scored_pairs(pairs_tsv)
    scorer = PairScorer("pairs", pairs)
    curve = topk_curve(tiny_encoder, {"pairs": scorer}, TINY_SENTENCES, "tiny", max_k=3)
    tokenizer = tiny_encoder.tokenizer
    assert curve.frequent_tokens[:2] == ["[CLS]", "[SEP]"] and curve.frequent_tokens[2] == "the"
    assert curve.special_tokens_counted
    scores = curve.curves["pairs"]
    assert len(scores) == 4
    # k = 0 is plain mean pooling: the same number `sentadapt eval` prints
    reference = StsEvaluator.from_pairs({"p": pairs})(tiny_encoder).tasks[0].metrics["spearman"]
    assert scores[0] == pytest.approx(reference, rel=FLOAT32_RTOL)
    # k = 2 drops exactly [CLS] and [SEP]; k = 3 also drops "the"
    specials = {tokenizer.cls_token_id, tokenizer.sep_token_id}
    for k, removed in ((2, specials), (3, specials | {tokenizer.convert_tokens_to_ids("the")})):
        reference = scorer(_mean_without(tiny_encoder, scorer.sentences, removed))
        assert scores[k] == pytest.approx(reference, rel=FLOAT32_RTOL)
    assert curve.to_dict()["best"] == max(scores)


def test_topk_sentence_with_every_token_removed_scores_as_cosine_zero(tiny_encoder) -> None:
    from sentadapt.data.pair_files import ScoredPairs

    pairs = ScoredPairs()
    for s1, s2, score in (("the", "the server", 1.0), ("the dog", "the dog", 5.0), ("server", "dog", 0.0)):
        pairs.append(s1, s2, score)
    curve = topk_curve(tiny_encoder, {"p": PairScorer("p", pairs)}, ["the", "the"], "x", max_k=3)
    assert all(not math.isnan(score) for score in curve.curves["p"])  # "the" alone → [CLS] "the" [SEP] all removed


# ------------------------------------------------------------------ layer sweep and the sample pass


@pytest.mark.parity
def test_layer_sweep_cells_equal_the_encoder_with_that_pooling(tiny_encoder, pairs_tsv: Path) -> None:
    pairs = read_scored_pairs(pairs_tsv)
    sweep = layer_sweep(tiny_encoder, pairs, "pairs", batch_size=3)
    evaluator = StsEvaluator.from_pairs({"p": read_scored_pairs(pairs_tsv)})
    for name, pooling in (("max@1", Pooling("max", (1,), (1.0,))), ("cls@2", Pooling("cls", (2,), (1.0,))),
                          ("last2avg", Pooling.from_name("last2avg", 2))):
        reference = evaluator(tiny_encoder, pooling=pooling).tasks[0].metrics["spearman"]
        assert sweep.scores[name] == pytest.approx(reference, rel=FLOAT32_RTOL)
    assert sweep.model_score == pytest.approx(evaluator(tiny_encoder).tasks[0].metrics["spearman"], rel=FLOAT32_RTOL)
    assert sweep.scores["mean@2"] == pytest.approx(sweep.model_score, rel=FLOAT32_RTOL)  # the model's pooling is mean@L
    assert math.isnan(sweep.scores["cls@0"])  # [CLS] of the embedding layer is the same vector for every sentence
    assert len(sweep.grid()) == 3 and len(sweep.grid()[0]) == 3
    assert sweep.best[1] == max(v for v in sweep.scores.values() if not math.isnan(v))


@pytest.mark.parity
def test_sample_pass_embeddings_equal_encode_and_last_layer_cosine_matches(tiny_encoder) -> None:
    result = sample_pass(tiny_encoder, TINY_SENTENCES, batch_size=3)
    encoded = tiny_encoder.encode(TINY_SENTENCES)
    assert torch.allclose(result.embeddings, encoded, atol=1e-5)
    assert len(result.sentence_cosine_per_layer) == 3 and len(result.token_cosine_per_layer) == 3
    assert result.sentence_cosine_per_layer[-1] == pytest.approx(metrics.mean_pair_cosine(encoded), abs=1e-5)


# ------------------------------------------------------------------ inputs and report names


def test_parse_reports_orders_names_and_suggests_on_typos() -> None:
    assert parse_reports("layers,anisotropy") == ["anisotropy", "layers"]
    assert parse_reports(None) is None and parse_reports("all") is None
    with pytest.raises(ConfigError, match=r"Unknown report 'topkk'. Did you mean: topk\?"):
        parse_reports("topkk")


def test_gather_inputs_samples_with_a_seed_and_keeps_file_order(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"sentence {i}\n" for i in range(50)))
    first = gather_inputs(None, corpus=corpus, sample=10, seed=3)
    assert first.sentences == gather_inputs(None, corpus=corpus, sample=10, seed=3).sentences
    assert first.sentences != gather_inputs(None, corpus=corpus, sample=10, seed=4).sentences
    assert first.sentences == sorted(first.sentences, key=lambda s: int(s.split()[1]))
    assert first.reports == ["anisotropy", "spectrum", "alignment", "frequency"]
    assert set(first.skipped) == {"topk", "layers"}


def test_gather_inputs_positives_are_the_top_fifth_of_the_scale(pairs_tsv: Path) -> None:
    inputs = gather_inputs(None, pairs=pairs_tsv)
    assert inputs.positives is not None and inputs.positives.scores == [4.5, 5.0]  # > 0 + 0.8 × 5 = 4
    assert inputs.reports == ["anisotropy", "spectrum", "alignment", "frequency", "topk", "layers"]


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        (["topk"], "--report topk: needs labelled pairs; pass --pairs FILE"),
        (["layers"], "--report layers: needs labelled pairs; pass --pairs FILE"),
        (None, "nothing to diagnose: pass --corpus FILE"),
    ],
)
def test_gather_inputs_refuses_reports_without_their_data(tmp_path: Path, requested, message: str) -> None:
    with pytest.raises(DataError, match="^" + message.replace("(", r"\(")):
        gather_inputs(requested, data_dir=tmp_path)


def test_topk_frequencies_come_from_stsb_test_even_when_all_seven_tasks_are_scored(tmp_path: Path) -> None:
    import json

    for index, task in enumerate(("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")):
        rows = [{"sentence1": f"{task} one", "sentence2": f"{task} two", "score": 1.0 + index % 3},
                {"sentence1": f"{task} three", "sentence2": f"{task} four", "score": 4.0}]
        (tmp_path / f"{task}.test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    inputs = gather_inputs(["topk"], data_dir=tmp_path, sts="all")
    assert list(inputs.topk_tasks) == ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
    assert inputs.frequency_texts == ["stsb one", "stsb three", "stsb two", "stsb four"]


def test_gather_inputs_checks_sample_and_sts(pairs_tsv: Path) -> None:
    with pytest.raises(ConfigError, match="--sample 1: need at least 2"):
        gather_inputs(None, pairs=pairs_tsv, sample=1)
    with pytest.raises(ConfigError, match="--sts: 'sts12' is not one of stsb, all"):
        gather_inputs(None, pairs=pairs_tsv, sts="sts12")
