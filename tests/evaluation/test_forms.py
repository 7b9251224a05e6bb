"""eval --dims/--quantize: sizes and precisions equal sentence-transformers' truncate_dim and quantize_embeddings on
the same vectors, scores follow from them, and bad requests are one-line errors (issue 45)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from typer.testing import CliRunner

from sentadapt.evaluation.forms import BINARY, INT8, VectorForm, int8_ranges, scoring_vectors, to_binary, to_int8
from sentadapt.model.encoder import Encoder
from tests.conftest import needs_shared

st = pytest.importorskip("sentence_transformers")
quantize_embeddings = st.quantize_embeddings

SHARED = Path(__file__).resolve().parents[3] / "shared"
MINILM = SHARED / "models" / "all-minilm-l6-v2"


def _vectors(rows: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def test_int8_is_sentence_transformers_int8_with_and_without_calibration() -> None:
    vectors, calibration = _vectors(50, 24, 0), _vectors(300, 24, 1)
    assert np.array_equal(to_int8(vectors, int8_ranges(calibration)),
                          quantize_embeddings(vectors, "int8", calibration_embeddings=calibration))
    assert np.array_equal(to_int8(vectors, int8_ranges(vectors)), quantize_embeddings(vectors, "int8"))
    # a value outside the calibration's range lands in the end bucket (clipped), never wraps around
    outside = to_int8(calibration[:2] * 10, int8_ranges(calibration))
    assert outside.min() == -128 and outside.max() == 127


def test_binary_is_sentence_transformers_binary_and_scores_by_hamming_distance() -> None:
    vectors = _vectors(40, 32, 2)
    packed = quantize_embeddings(vectors, "binary")
    assert np.array_equal(to_binary(vectors), packed)
    bits = np.unpackbits((packed.astype(np.int16) + 128).astype(np.uint8), axis=-1)
    hamming = (bits[:20] != bits[20:]).sum(axis=1)
    signs = torch.from_numpy(scoring_vectors(VectorForm(None, BINARY), vectors, None))
    cosines = torch.nn.functional.cosine_similarity(signs[:20].double(), signs[20:].double()).numpy()
    np.testing.assert_allclose(cosines, 1 - 2 * hamming / 32, atol=1e-6)


def test_a_size_keeps_the_prefix_and_int8_uses_the_prefix_ranges() -> None:
    vectors = _vectors(30, 16, 3)
    ranges = int8_ranges(vectors)
    assert np.array_equal(scoring_vectors(VectorForm(8), vectors, None), vectors[:, :8])
    assert np.array_equal(scoring_vectors(VectorForm(8, INT8), vectors, ranges),
                          quantize_embeddings(vectors[:, :8], "int8", calibration_embeddings=vectors[:, :8]))


@needs_shared()
def test_eval_sizes_and_precisions_score_as_sentence_transformers_vectors(tmp_path: Path) -> None:
    from sentadapt.api import evaluate

    pairs = SHARED / "data" / "sts" / "stsb.test.jsonl"
    rows = [json.loads(line) for line in pairs.read_text().splitlines()[:121]]
    # STS-B test lists some pairs twice (its lines 10 and 11): a user's pairs file may not (data/pair_files.py)
    rows = list({(row["sentence1"], row["sentence2"]): row for row in rows}.values())
    small = tmp_path / "pairs.jsonl"
    small.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = evaluate(str(MINILM), pairs=[small], dims="384,192,96", quantize="none,int8,binary", bootstrap=0,
                      json_out=tmp_path / "eval.json")
    gold = [row["score"] for row in rows]
    first, second = [row["sentence1"] for row in rows], [row["sentence2"] for row in rows]
    texts = list(dict.fromkeys(first + second))
    ours = Encoder.load(MINILM, device="cpu").encode(texts).numpy()
    row = {text: i for i, text in enumerate(texts)}
    a, b = [np.array([row[t] for t in side]) for side in (first, second)]
    expected = {}
    for dim in (384, 192, 96):
        # truncate_dim: sentence-transformers' own encoding gives the prefix of ours
        peer = st.SentenceTransformer(str(MINILM), device="cpu", truncate_dim=dim).encode(texts)
        np.testing.assert_allclose(peer, ours[:, :dim], atol=2e-5)
        # the scores: quantize_embeddings on the same vectors eval scored
        vectors = ours[:, :dim]
        bits = np.unpackbits((quantize_embeddings(vectors, "binary").astype(np.int16) + 128).astype(np.uint8),
                             axis=-1)
        for precision, formed in (("fp32", vectors), ("int8", quantize_embeddings(vectors, "int8")),
                                  ("binary", None)):
            if formed is None:
                scores = 1 - 2 * (bits[a] != bits[b]).sum(axis=1) / dim
            else:
                left, right = formed[a].astype(np.float64), formed[b].astype(np.float64)
                scores = (left * right).sum(1) / np.linalg.norm(left, axis=1) / np.linalg.norm(right, axis=1)
            expected[f"{dim} {precision}"] = 100 * spearmanr(gold, scores).statistic
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert [entry["form"]["dim"] for entry in saved] == [384, 384, 384, 192, 192, 192, 96, 96, 96]
    assert saved[1]["form"] == {"model": str(MINILM), "dim": 384, "precision": "int8", "bytes_per_vector": 384.0,
                                "int8_ranges": "ranges from the evaluated sentences"}
    for name, reports in zip(result.models, result.reports):
        assert reports[0].average == pytest.approx(expected[name.rsplit(" @ ", 1)[1]], abs=1e-6), name


@pytest.mark.parametrize(("args", "message"), [
    (["--dims", "64"], "--dims: 64 is above {model}'s embedding width 32; list sizes up to 32"),
    (["--dims", "16,x"], "--dims: 'x' is not a positive whole number of dimensions (e.g. 384,192,96)"),
    (["--dims", "16,16"], "--dims: 16,16 lists a size twice; list each once"),
    (["--dims", "12", "--quantize", "binary"],
     "--quantize binary: 12 dimensions do not pack into whole bytes (8 bits each); use sizes divisible by 8 (e.g. 8)"),
    (["--quantize", "int4"], "--quantize: 'int4' is not one of none, int8, binary"),
    (["--calibration", "x.txt"], "--calibration: sets int8's ranges; use it with --quantize int8"),
    (["--quantize", "int8", "--calibration", "missing.txt"],
     "--calibration missing.txt: no such file; give a text file of sentences, one per line"),
])
def test_bad_sizes_and_precisions_are_one_line_errors(tiny_model_dir: Path, pairs_tsv: Path, args: list[str],
                                                      message: str) -> None:
    from sentadapt.cli import app

    result = CliRunner().invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--bootstrap", "0",
                                      *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"Error: {message.format(model=tiny_model_dir)}"]


def test_the_whole_row_equals_plain_eval_and_calibration_is_named(tiny_model_dir: Path, pairs_tsv: Path,
                                                                  tmp_path: Path) -> None:
    from sentadapt.api import evaluate

    calibration = tmp_path / "sample.txt"
    calibration.write_text("the server is down\nthe dog runs\n\na red car\n")
    plain = evaluate(str(tiny_model_dir), pairs=[pairs_tsv], bootstrap=50)
    formed = evaluate(str(tiny_model_dir), pairs=[pairs_tsv], bootstrap=50, dims="16", quantize="int8",
                      calibration=calibration)
    assert [form["dim"] for form in formed.forms] == [32, 16]  # the whole vector first, as the reference
    assert formed.reports[0][0].average == plain.reports[0][0].average
    assert formed.calibration == f"ranges from 3 sentences of {calibration}"
    assert formed.comparisons[1][0].average.interval is not None


def test_a_model_named_with_an_at_sign_keeps_its_name_in_the_sizes_table(tiny_model_dir: Path, pairs_tsv: Path,
                                                                         tmp_path: Path) -> None:
    """Each row of the sizes table carries its model's name (eval --json writes it in "form"); a name may hold " @ "."""
    import shutil

    from sentadapt.api import evaluate

    model = tmp_path / "tuned @ v2"
    shutil.copytree(tiny_model_dir, model)
    formed = evaluate([str(tiny_model_dir), str(model)], pairs=[pairs_tsv], bootstrap=0, dims="16")
    assert [form["model"] for form in formed.forms] == [str(tiny_model_dir)] * 2 + [str(model)] * 2
    text = "\n".join(str(table) for table in formed.tables())
    assert "\ntuned @ v2 " in text  # the row names the folder, " @ " and all (its path is in the lines above)


# ---------------------------------------------------------------------- the sizes decision (decision/sizes.py)


def test_the_smallest_size_is_the_fewest_bytes_that_keeps_the_base_score_at_the_risk(tmp_path: Path) -> None:
    from sentadapt.decision.sizes import decision_forms, size_table
    from tests.conftest import noisy_outputs, sts_dev_evaluator

    gold = np.random.default_rng(0).uniform(0, 5, 300)
    evaluator = sts_dev_evaluator(tmp_path, gold)
    forms = decision_forms((32, 16, 8), 32)
    assert [form.label(32) for form in forms] == ["32 fp32", "32 int8", "16 fp32", "16 int8", "8 fp32", "8 int8",
                                                  "32 binary", "16 binary", "8 binary"]
    base = noisy_outputs(evaluator, gold, 0.5, seed=1)
    # less noise than the base: better; more: worse. Walked from the most bytes down: 32 fp32 (128 bytes), 16 fp32
    # (64), 32 int8 (32) keep; 8 fp32 (32 bytes, after 32 int8) does not, so the walk stops: 32 int8 is named,
    # though 16 int8 (16 bytes) keeps the gain on its own
    noise = {"32 fp32": 0.2, "32 int8": 0.2, "16 fp32": 0.25, "16 int8": 0.25, "8 fp32": 0.9, "8 int8": 0.9,
             "32 binary": 0.7, "16 binary": 0.9, "8 binary": 2.0}
    outputs = [noisy_outputs(evaluator, gold, noise[form.label(32)], seed=2) for form in forms]
    table = size_table(evaluator, base, outputs, forms, 32, risk_limit=0.2)
    record = table.to_dict()
    assert record["smallest"] == {"dim": 32, "precision": "int8", "bytes_per_vector": 32.0}
    by_label = {f"{row['dim']} {row['precision']}": row for row in record["rows"]}
    assert by_label["8 fp32"]["keeps_gain"] is False and by_label["8 fp32"]["risk"] > 0.5
    assert by_label["16 int8"]["risk"] <= 0.2 and by_label["16 int8"]["delta_vs_base_full"] > 0
    assert by_label["32 binary"]["keeps_gain"] is False  # 4 bytes, but noisier than the base
    # with every row worse than the base nothing is named
    worse = [noisy_outputs(evaluator, gold, 3.0, seed=3) for _ in forms]
    assert size_table(evaluator, base, worse, forms, 32, 0.2).to_dict()["smallest"] is None


def test_a_matryoshka_run_records_its_sizes_and_the_outputs_that_recompute_them(tiny_model_dir: Path,
                                                                                 pairs_tsv: Path,
                                                                                 tmp_path: Path) -> None:
    from sentadapt.decision.sizes import decision_forms, size_table
    from sentadapt.evaluation.task_types import resolve_dev_set
    from tests.conftest import run_adapt

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(40)))
    output = tmp_path / "run"
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
                       "--max-steps", "2", "--batch-size", "8", "--matryoshka", "32,16,8")
    assert result.exit_code == 0, result.output
    assert "smallest size" in result.output
    metrics = json.loads((output / "metrics.json").read_text())
    saved = json.loads((output / "dev_outputs.json").read_text())
    forms = decision_forms((32, 16, 8), 32)
    assert list(saved["sizes"]) == [form.label(32) for form in forms]
    _, make = resolve_dev_set(str(pairs_tsv), None)
    # weighed at the limit of the run's first look: 8 dev pairs, 0.2 · √(8/400)
    limit = metrics["decision_look"]["nominal_limit"]
    assert limit == pytest.approx(0.2 * (8 / 400) ** 0.5)
    recomputed = size_table(make(), saved["base"], list(saved["sizes"].values()), forms, 32, limit).to_dict()
    assert recomputed == metrics["sizes"]


def test_export_dim_loads_in_sentence_transformers_with_eval_s_truncated_vectors(tiny_model_dir: Path,
                                                                                  tmp_path: Path) -> None:
    from sentadapt.api import export
    from tests.conftest import TINY_SENTENCES

    result = export(str(tiny_model_dir), tmp_path / "out", dim=16)
    assert result.dimension == 16
    loaded = st.SentenceTransformer(str(tmp_path / "out"), device="cpu")
    theirs = loaded.encode(TINY_SENTENCES, convert_to_numpy=True)
    prefix = Encoder.load(tiny_model_dir, device="cpu").encode(TINY_SENTENCES).numpy()[:, :16]
    np.testing.assert_allclose(theirs, prefix, rtol=0, atol=1e-6)  # no Normalize: the prefix itself
    assert Encoder.load(tmp_path / "out", device="cpu").embedding_dim == 16
    card = (tmp_path / "out" / "README.md").read_text()
    assert "| Dimension | 16 (`export --dim 16`: the first 16 dimensions" in card


@pytest.mark.parametrize(("options", "message"), [
    ({"dim": 0}, "--dim: 0 is not a size; give a positive number of dimensions"),
    ({"dim": 16, "format": "hf"}, "--dim: the hf format and --adapters-only hold no pooling to truncate after; use "
                                  "--format sentence-transformers or onnx"),
    ({"dim": 64}, "--dim: 64 is not a size of this model's 32-dimensional vectors; give 1 to 32"),
])
def test_bad_export_dims_are_one_line_errors(tiny_model_dir: Path, tmp_path: Path, options: dict,
                                             message: str) -> None:
    from sentadapt.api import export
    from sentadapt.errors import ConfigError

    with pytest.raises(ConfigError) as error:
        export(str(tiny_model_dir), tmp_path / "out", **options)
    assert str(error.value) == message
    assert not (tmp_path / "out").exists()


def test_dims_on_a_model_whose_pooling_concatenates_modes_is_one_line(tiny_model_dir: Path, pairs_tsv: Path,
                                                                      tmp_path: Path) -> None:
    # cls + mean concatenated: a prefix would be the cls half, not a smaller embedding; sentadapt refuses the model
    import shutil

    from sentadapt.cli import app

    model = tmp_path / "concat"
    shutil.copytree(tiny_model_dir, model)
    (model / "1_Pooling").mkdir()
    (model / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 32, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}))
    (model / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    result = CliRunner().invoke(app, ["eval", str(model), "--pairs", str(pairs_tsv), "--dims", "16"])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "pooling cls, mean is not supported" in lines[0], result.output


def test_the_summary_line_names_the_smallest_size_or_that_none_keeps_the_gain() -> None:
    from sentadapt.run.summary import sizes_text

    rows = [{"dim": 384, "precision": "fp32", "bytes_per_vector": 1536.0, "score": 80.0, "delta_vs_base_full": 0.5,
             "ci": [-0.1, 1.1], "risk": 0.1, "keeps_gain": True},
            {"dim": 192, "precision": "int8", "bytes_per_vector": 192.0, "score": 79.8, "delta_vs_base_full": 0.3,
             "ci": [-0.4, 1.0], "risk": 0.18, "keeps_gain": True}]
    record = {"rows": rows, "base_full_score": 79.5, "smallest": {"dim": 192, "precision": "int8",
                                                                  "bytes_per_vector": 192.0}}
    assert sizes_text(record) == (
        "192 int8: 192 bytes a vector (8× smaller), dev 79.80, Δ +0.30 [-0.40, +1.00], below it in 18 % of "
        "resamples vs the base's 384 fp32 (79.50); `sentadapt export RUN OUT --dim 192` ships it, stored as int8 "
        "codes (quantize_embeddings)")
    assert sizes_text(record, kept_base=True).startswith("the adapted model's 192 int8")
    whole_fails = [{**rows[0], "delta_vs_base_full": -0.2, "risk": 0.6, "keeps_gain": False}, rows[1]]
    assert sizes_text({**record, "rows": whole_fails, "smallest": None}) == (
        "none: the adapted model's whole 384 fp32 vectors do not keep the dev score of the base's 384 fp32 (79.50) "
        "(Δ -0.20 [-0.10, +1.10], below it in 60 % of resamples), so no smaller size is weighed; 192 int8, smaller, "
        "passes alone but is not named (a size is weighed only when every larger one kept the score: docs/sizes.md); "
        "metrics.json has every size")


def test_the_summary_line_says_when_only_the_whole_vectors_keep_the_gain_and_where_the_walk_stopped() -> None:
    from sentadapt.run.summary import sizes_text

    def row(dim: int, precision: str, size: float, delta: float, keeps: bool) -> dict:
        return {"dim": dim, "precision": precision, "bytes_per_vector": size, "score": 80.0 + delta,
                "delta_vs_base_full": delta, "ci": [-1.0, 1.0], "risk": 0.1 if keeps else 0.4, "keeps_gain": keeps}

    rows = [row(384, "fp32", 1536.0, 0.5, True), row(192, "fp32", 768.0, -0.3, False),
            row(384, "int8", 384.0, 0.4, True)]
    text = sizes_text({"rows": rows, "base_full_score": 79.5, "smallest": {"dim": 384, "precision": "fp32"}})
    assert text == (
        "only whole 384 fp32 vectors keep the dev score of the base's 384 fp32 (79.50) (Δ +0.50 [-1.00, +1.00], below "
        "it in 10 % of resamples); no smaller size to export; the walk stopped at 192 fp32 (Δ -0.30 [-1.00, +1.00], "
        "below it in 40 % of resamples); 384 int8, smaller, passes alone but is not named (a size is weighed only "
        "when every larger one kept the score: docs/sizes.md)")
    assert "--dim 384" not in text  # an identity layer is nothing to ship


def test_the_walk_stops_at_the_first_size_that_does_not_keep_the_gain() -> None:
    from sentadapt.decision.sizes import SizeRow, named_in_sequence

    def row(dim: int, precision: str, bytes_per_vector: float, keeps: bool) -> SizeRow:
        return SizeRow({"dim": dim, "precision": precision, "bytes_per_vector": bytes_per_vector}, 80.0, 0.1, None,
                       0.1, keeps)

    # given out of order: the walk sorts by bytes, then size (384 int8 before 96 fp32, both 384 bytes)
    rows = [row(96, "fp32", 384, True), row(384, "fp32", 1536, True), row(384, "int8", 384, True),
            row(192, "fp32", 768, True), row(192, "int8", 192, False), row(96, "int8", 96, True)]
    assert named_in_sequence(rows) == 0  # 96 fp32: 96 int8 keeps too, but 192 int8 stopped the walk before it
    rows[4] = row(192, "int8", 192, True)
    assert named_in_sequence(rows) == 5
    rows[1] = row(384, "fp32", 1536, False)  # the whole vector does not keep the gain: nothing is named
    assert named_in_sequence(rows) is None
