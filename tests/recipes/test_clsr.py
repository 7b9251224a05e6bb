"""CLSR: contrastive MLP on a frozen encoder, with the embedding cache."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.model.encoder import Encoder
from sentadapt.recipes.clsr import nt_xent_without_duplicates
from sentadapt.recipes.losses import nt_xent
from sentadapt.train.optim import LARS, lr_multiplier
from tests.conftest import FLOAT32_RTOL

runner = CliRunner()
WORDS = [
    "the", "a", "man", "woman", "dog", "cat", "car", "server", "database", "disk", "network", "error",
    "failed", "job", "backup", "restart", "deploy",
]


@pytest.fixture
def pairs_file(tmp_path: Path) -> Path:
    rows = []
    for i in range(48):
        a = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(4))
        b = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(1, 5))
        rows.append(f"{a} {i}\t{b} {i}\t{4 + (i % 2)}")
    rows.append("unrelated low pair\tnot kept at all\t1.0")
    path = tmp_path / "pairs.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")
    return path


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SENTADAPT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _direct(first: torch.Tensor, second: torch.Tensor, ids: list[int], tau: float) -> float:
    """Paper eq. (1) with duplicate sentences left out of each anchor's denominator, as a loop."""
    views = torch.nn.functional.normalize(torch.cat([first, second]).double(), dim=-1)
    n = first.shape[0]
    total = 0.0
    for i in range(2 * n):
        positive = i + n if i < n else i - n
        terms = [j for j in range(2 * n) if j != i and (j == positive or ids[j] != ids[i])]
        denominator = sum(math.exp(float(views[i] @ views[j]) / tau) for j in terms)
        total += -math.log(math.exp(float(views[i] @ views[positive]) / tau) / denominator)
    return total / (2 * n)


def test_loss_equals_nt_xent_when_sentences_are_distinct() -> None:
    torch.manual_seed(0)
    first, second = torch.randn(6, 8), torch.randn(6, 8)
    ids = torch.arange(12)
    assert nt_xent_without_duplicates(first, second, ids[:6], ids[6:], 0.1).item() == pytest.approx(
        nt_xent(first, second, 0.1).item(), rel=FLOAT32_RTOL)


def test_duplicates_leave_the_denominator() -> None:
    torch.manual_seed(1)
    first, second = torch.randn(5, 8), torch.randn(5, 8)
    ids = [0, 1, 2, 0, 3, 4, 5, 6, 7, 1]  # sentence 0 twice among anchors, sentence 1 as anchor and positive
    loss = nt_xent_without_duplicates(first, second, torch.tensor(ids[:5]), torch.tensor(ids[5:]), 0.1)
    assert loss.item() == pytest.approx(_direct(first, second, ids, 0.1), abs=1e-5)
    assert loss.item() != pytest.approx(nt_xent(first, second, 0.1).item(), abs=1e-3)


def test_plain_sentence_corpus_is_refused_before_loading(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one sentence\nanother sentence\n")
    result = runner.invoke(app, ["adapt", str(corpus), "--recipe", "clsr", "--base", str(tiny_model_dir),
                                 "--output", str(tmp_path / "run")], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: {corpus}: CLSR trains on sentence pairs (an NLI file with labels, scored pairs with sentence1, "
        "sentence2, score, or two columns sentence1, sentence2 or anchor, positive); for one sentence per line use "
        "--recipe consert or --recipe sg-opt"
    )


def _adapt(pairs_file: Path, model: Path, output: Path, *extra: str):
    return runner.invoke(app, ["adapt", str(pairs_file), "--recipe", "clsr", "--base", str(model), "--output",
                               str(output), "--dev", "none", "--batch-size", "8", "--max-steps", "6", "--lr", "1e-2",
                               "--set", "log_every=1", "--set", "optimizer=adamw", *extra],
                         catch_exceptions=False)


def test_training_exports_frozen_encoder_plus_mlp(pairs_file: Path, tiny_model_dir: Path, tmp_path: Path,
                                                 isolated_cache: Path) -> None:
    output = tmp_path / "run"
    result = _adapt(pairs_file, tiny_model_dir, output)
    assert result.exit_code == 0, result.output
    assert f"{pairs_file}: 48 of 49 scored pairs with score ≥ 4" in result.stderr
    assert "encoding 96 unique sentences once with the frozen encoder" in result.stderr
    modules = json.loads((output / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Dense", "Dense"]
    dense = [json.loads((output / m["path"] / "config.json").read_text()) for m in modules[2:]]
    assert [d["activation_function"].rsplit(".", 1)[-1] for d in dense] == ["ReLU", "Identity"]
    # the encoder stayed frozen: backbone weights identical to the base model's
    trained, base = Encoder.load(output, device="cpu"), Encoder.load(tiny_model_dir, device="cpu")
    for (name, left), (_, right) in zip(trained.backbone.state_dict().items(), base.backbone.state_dict().items()):
        assert torch.equal(left, right), name
    sentences = ["the server is down", "a man is playing a guitar", "dns timeout on the cluster"]
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(sentences, convert_to_tensor=True).cpu()
    assert torch.nn.functional.cosine_similarity(trained.encode(sentences), theirs).min() >= 0.9999
    # the MLP changed the vectors (it is really part of the saved model)
    assert torch.nn.functional.cosine_similarity(trained.encode(sentences), base.encode(sentences)).max() < 0.999


def test_cache_is_reused_and_keyed_by_pooling(pairs_file: Path, tiny_model_dir: Path, tmp_path: Path,
                                              isolated_cache: Path) -> None:
    assert _adapt(pairs_file, tiny_model_dir, tmp_path / "a").exit_code == 0
    second = _adapt(pairs_file, tiny_model_dir, tmp_path / "b")
    assert "embedding cache: 96 vectors reused from" in second.stderr
    assert len(list((isolated_cache / "embeddings").glob("*.safetensors"))) == 1
    third = _adapt(pairs_file, tiny_model_dir, tmp_path / "c", "--set", "pooling=cls")
    assert "encoding 96 unique sentences once" in third.stderr
    assert len(list((isolated_cache / "embeddings").glob("*.safetensors"))) == 2
    losses = [json.loads(line)["loss"] for line in (tmp_path / "a" / "train.log").read_text().splitlines()]
    assert losses[-1] < losses[0]


def test_lars_trust_ratio_and_cosine_schedule() -> None:
    weight = torch.nn.Parameter(torch.full((4,), 2.0))
    bias = torch.nn.Parameter(torch.zeros(4))
    optimizer = LARS([{"params": [weight], "weight_decay": 0.0}, {"params": [bias], "weight_decay": 0.0,
                                                                 "adapt": False}], lr=1.0, momentum=0.0,
                     trust_coefficient=0.5)
    weight.grad, bias.grad = torch.full((4,), 10.0), torch.full((4,), 10.0)
    optimizer.step()
    # ‖w‖ = 4, ‖g‖ = 20 → trust 0.5 × 4 / 20 = 0.1 → step 1.0; the bias takes the plain step 10
    assert torch.allclose(weight, torch.full((4,), 1.0)) and torch.allclose(bias, torch.full((4,), -10.0))
    cosine = lr_multiplier("cosine", total_steps=110, warmup_ratio=10 / 110)
    assert [cosine(0), cosine(9), cosine(10), cosine(60), cosine(110)] == pytest.approx([0.1, 1.0, 1.0, 0.5, 0.0])


# ---------------------------------------------------------------------- init: identity

def test_identity_init_reproduces_the_base_bit_for_bit(tiny_model_dir: Path) -> None:
    from sentadapt.recipes.clsr import ClsrConfig, ClsrRecipe

    sentences = ["the server is down", "a man is playing a guitar", "dns timeout on the cluster", "red car"]
    base = Encoder.load(tiny_model_dir, device="cpu").encode(sentences)
    encoder = Encoder.load(tiny_model_dir, device="cpu")
    recipe = ClsrRecipe(ClsrConfig(init="identity"), encoder)
    heads = recipe.trainable_heads()
    attached = recipe.prepare_export(encoder, heads)
    assert [layer.linear.weight.shape for layer in attached.head] == [(64, 32), (32, 64)]  # hidden 0 → 2d
    assert torch.equal(attached.encode(sentences), base)
    assert torch.equal(heads["projection"].weight, torch.eye(32))
    # wider than 2d: the extra hidden units add exactly 0 but are not dead (random input weights)
    wide = Encoder.load(tiny_model_dir, device="cpu")
    recipe = ClsrRecipe(ClsrConfig(init="identity", hidden_dim=80, projection_dim=40), wide)
    assert torch.equal(recipe.prepare_export(wide, recipe.trainable_heads()).encode(sentences), base)
    assert recipe.mlp[0].linear.weight[64:].abs().sum() > 0


def test_dev_evaluations_run_the_backbone_once_per_sentence_and_the_mlp_as_trained(tiny_model_dir: Path) -> None:
    from sentadapt.recipes.clsr import ClsrConfig, ClsrRecipe

    sentences = ["the server is down", "a man is playing a guitar", "dns timeout on the cluster", "red car"]
    encoder = Encoder.load(tiny_model_dir, device="cpu")
    recipe = ClsrRecipe(ClsrConfig(), encoder)
    evaluated = recipe.prepare_export(encoder, recipe.trainable_heads())  # what the loop's dev selection scores
    passes: list[int] = []
    encoder.backbone.register_forward_hook(lambda *_: passes.append(1))
    before = evaluated.encode(sentences)
    assert len(passes) == 1
    with torch.no_grad():  # a step moves the MLP
        recipe.mlp[0].linear.weight.neg_()
    after = evaluated.encode([*sentences, sentences[0]])
    assert len(passes) == 1  # the frozen part's vectors were remembered
    assert not torch.allclose(after[:4], before) and torch.equal(after[4], after[0])
    whole = encoder.encode(sentences)  # the saved model's own pass: backbone, pooling, the MLP
    assert len(passes) == 2 and torch.allclose(after[:4], whole, rtol=FLOAT32_RTOL, atol=1e-6)


@pytest.mark.parametrize(("option", "message"), [
    ("hidden_dim=63", "hidden_dim: init=identity needs at least 2 × the base dimension (64), got 63; pass "
                      "--set hidden_dim=0 or --set init=random"),
    ("output_dim=16", "output_dim: init=identity keeps the base dimension 32, got 16; pass --set output_dim=0 or "
                      "--set init=random"),
    ("projection_dim=16", "projection_dim: init=identity needs at least the base dimension 32, got 16; pass "
                          "--set projection_dim=0 or --set init=random"),
    ("init=zeros", "init: 'zeros' is not one of random, identity"),
])
def test_identity_init_refuses_shapes_it_cannot_keep(pairs_file: Path, tiny_model_dir: Path, tmp_path: Path,
                                                    option: str, message: str) -> None:
    extra = ["--set", option] if option.startswith("init=") else ["--set", "init=identity", "--set", option]
    result = _adapt(pairs_file, tiny_model_dir, tmp_path / "run", *extra)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"Error: {message}"


def test_identity_init_trains_and_exports_plain_dense_layers(pairs_file: Path, tiny_model_dir: Path,
                                                             tmp_path: Path) -> None:
    output = tmp_path / "run"
    result = _adapt(pairs_file, tiny_model_dir, output, "--set", "init=identity", "--max-steps", "2")
    assert result.exit_code == 0, result.output
    modules = json.loads((output / "modules.json").read_text())
    assert [m["type"] for m in modules[2:]] == ["sentence_transformers.models.Dense"] * 2
    sentences = ["the server is down", "a man is playing a guitar", "dns timeout on the cluster"]
    trained, base = Encoder.load(output, device="cpu"), Encoder.load(tiny_model_dir, device="cpu")
    moved = trained.encode(sentences)
    assert not torch.equal(moved, base.encode(sentences))
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(sentences, convert_to_tensor=True).cpu()
    assert torch.nn.functional.cosine_similarity(moved, theirs).min() >= 0.9999


def test_the_dry_run_plans_the_steps_from_the_positive_pairs(tiny_model_dir: Path, pairs_tsv: Path,
                                                             tmp_path: Path) -> None:
    """CLSR's examples are the positive pairs (3 of the 8 score ≥ 4): the dry run counts them as the run reads them,
    without a model, and the run trains the steps it planned."""
    from tests.conftest import run_adapt

    args = [str(pairs_tsv), "--recipe", "clsr", "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
            "--batch-size", "2", "--epochs", "3", "--dev", "none"]
    planned = run_adapt(*args, "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "planned: 3 steps, 3 passes over 3 pairs (batch 2)\n" in planned.stderr  # 3 // 2 = 1 step a pass
    assert "arithmetic:" not in planned.stderr  # the encoder stays frozen: no training pass of it is timed
    trained = run_adapt(*args)
    assert trained.exit_code == 0, trained.output
    assert " 3 / 3 (completed)" in trained.stdout
    assert "timing the training pass" not in trained.output and "length chunks" not in trained.output


def test_the_view_dev_evaluations_score_is_the_encoder_in_all_but_encode(tiny_model_dir: Path) -> None:
    import copy

    from sentadapt.recipes.clsr import ClsrConfig, ClsrRecipe

    encoder = Encoder.load(tiny_model_dir, device="cpu")
    recipe = ClsrRecipe(ClsrConfig(), encoder)
    evaluated = recipe.prepare_export(encoder, recipe.trainable_heads())
    assert (evaluated.name, evaluated.pooling_name, evaluated.embedding_dim) == (encoder.name, "mean", 32)
    assert copy.copy(evaluated).encode(["red car"]).shape == (1, 32)  # a copy is built without recursing
    assert evaluated.encode([]).shape == (0, 32)
