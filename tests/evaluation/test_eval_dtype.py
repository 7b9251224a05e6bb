"""`eval --dtype bf16|fp16`: the backbone runs as a copy cast once to that type (no autocast), pooling in fp32.

CPU: bf16 casts like CUDA does (the same code path), fp16 is refused with one line. The encoder's own
weights are never changed. The `gpu` tests check fp16/bf16 on CUDA against fp32 on a real model.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.errors import ConfigError
from sentadapt.evaluation.sts import StsEvaluator
from sentadapt.evaluation.tasks import TASKS
from sentadapt.model import encoder as encoder_module
from sentadapt.model.encoder import DenseLayer, Encoder
from sentadapt.model.frozen_part import FrozenPart
from sentadapt.model.half_precision import FP16_ON_CPU
from sentadapt.model.pooling import Pooling
from tests.conftest import ASSETS, SHARED_MODELS, SHARED_STS, TINY_SENTENCES, needs_shared

runner = CliRunner()
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# bf16 keeps 8 significant bits. Tiny model, 400 word-overlap pairs (four seeds): fp32 Spearman x100 50-60,
# bf16 moved it by 0.17, 0.003, 0.015, -0.14 (150 pairs: up to 0.38); a broken path moves it by tens.
CPU_BF16_SPEARMAN_TOLERANCE = 1.0
GPU_SPEARMAN_TOLERANCE = 0.05  # issue 21: half-precision eval within 0.05 of fp32 (Spearman x100)


def _sts_pairs(path: Path, count: int = 400) -> Path:
    """Pairs of sentences from the tiny vocabulary, scored by word overlap (so the tiny model correlates)."""
    words = [w for w in (ASSETS / "vocab.txt").read_text().split() if w.isalpha() and len(w) > 2][:60]
    rng = random.Random(0)
    rows = []
    for _ in range(count):
        left = rng.sample(words, 6)
        right = rng.sample(left, rng.randint(0, 6)) + rng.sample(words, rng.randint(1, 4))
        overlap = len(set(left) & set(right)) / len(set(left) | set(right))
        rows.append({"sentence1": " ".join(left), "sentence2": " ".join(right), "score": round(5 * overlap, 3)})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _eval_spearman(model: Path, pairs: Path, dtype: str, out: Path) -> float:
    result = runner.invoke(app, ["eval", str(model), "--pairs", str(pairs), "--dtype", dtype, "--device", "cpu",
                                 "--bootstrap", "0", "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())[0]["reports"][0]["tasks"][pairs.name]["spearman"]


def _weights(encoder: Encoder) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in encoder.state_dict().items()}


def _assert_unchanged(encoder: Encoder, before: dict[str, torch.Tensor]) -> None:
    after = encoder.state_dict()
    assert list(after) == list(before)  # no cast copy registered as a submodule
    for name, tensor in before.items():
        assert after[name].dtype == tensor.dtype, name
        assert torch.equal(after[name], tensor), name


# ---------------------------------------------------------------------------------------------------- CPU


def test_bf16_eval_scores_close_to_fp32(tiny_model_dir: Path, tmp_path: Path) -> None:
    pairs = _sts_pairs(tmp_path / "pairs.jsonl")
    fp32 = _eval_spearman(tiny_model_dir, pairs, "fp32", tmp_path / "fp32.json")
    bf16 = _eval_spearman(tiny_model_dir, pairs, "bf16", tmp_path / "bf16.json")
    assert fp32 > 20  # the overlap scores are learnable even by a random model: a real signal to keep
    assert bf16 == pytest.approx(fp32, abs=CPU_BF16_SPEARMAN_TOLERANCE)
    assert bf16 != fp32  # the bf16 path really ran in bf16


def test_bf16_encode_leaves_the_encoders_weights_bit_identical(tiny_encoder: Encoder) -> None:
    before = _weights(tiny_encoder)
    tiny_encoder.train()  # as during training's dev evaluation
    with tiny_encoder.keep_cast_copy():
        vectors = tiny_encoder.encode(TINY_SENTENCES, dtype="bf16")
        _assert_unchanged(tiny_encoder, before)
    _assert_unchanged(tiny_encoder, before)
    assert tiny_encoder._cast_copy is None  # released with the block
    assert tiny_encoder.training and all(p.requires_grad for p in tiny_encoder.parameters())
    assert vectors.dtype == torch.float32
    fp32 = tiny_encoder.encode(TINY_SENTENCES)
    assert torch.nn.functional.cosine_similarity(fp32, vectors).min() > 0.99


def test_the_backbone_runs_in_bf16_without_autocast(tiny_encoder: Encoder, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[torch.dtype, torch.dtype, bool]] = []

    def record(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        seen.append((module.weight.dtype, output.dtype, torch.is_autocast_enabled("cpu")))

    def no_autocast(*args: object, **kwargs: object) -> None:
        raise AssertionError("encode(dtype='bf16') called torch.autocast")

    monkeypatch.setattr(torch, "autocast", no_autocast)
    handle = tiny_encoder.backbone.encoder.layer[0].attention.self.query.register_forward_hook(record)
    try:
        tiny_encoder.encode(TINY_SENTENCES, dtype="bf16", batch_size=4)
    finally:
        handle.remove()
    assert seen == [(torch.bfloat16, torch.bfloat16, False)] * 2  # the cast copy (it keeps the hooks), 2 batches


def test_cast_copy_is_made_once_per_block_and_again_when_the_weights_change(
    tiny_encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[torch.dtype] = []
    real = encoder_module.cast_copy
    monkeypatch.setattr(encoder_module, "cast_copy", lambda module, dtype: made.append(dtype) or real(module, dtype))
    tiny_encoder.encode(TINY_SENTENCES, dtype="bf16", batch_size=2)  # 4 batches, one cast
    tiny_encoder.encode(TINY_SENTENCES, dtype="bf16")
    assert made == [torch.bfloat16] * 2 and tiny_encoder._cast_copy is None  # outside a block: one per call
    with tiny_encoder.keep_cast_copy():
        first = tiny_encoder.encode(TINY_SENTENCES, dtype="bf16")
        assert torch.equal(tiny_encoder.encode(TINY_SENTENCES[::-1], dtype="bf16"), first.flip(0))
        assert len(made) == 3
        with torch.no_grad():  # a training step inside the block: the kept copy is stale
            tiny_encoder.backbone.embeddings.word_embeddings.weight.mul_(2)
        assert not torch.equal(tiny_encoder.encode(TINY_SENTENCES, dtype="bf16"), first)
        assert len(made) == 4
    assert tiny_encoder._cast_copy is None


@pytest.mark.parametrize("pooling", ["cls", "max", "last2avg"])
def test_bf16_with_head_layer_pooling_and_normalisation(tiny_model_dir_3layers: Path, pooling: str) -> None:
    encoder = Encoder.load(tiny_model_dir_3layers, pooling=pooling, device="cpu")
    torch.manual_seed(0)
    encoder.head = torch.nn.ModuleList([DenseLayer(32, 16, "torch.nn.modules.activation.Tanh")])
    encoder.configure(normalize=True)
    before = _weights(encoder)
    bf16 = encoder.encode(TINY_SENTENCES, dtype="bf16")
    assert bf16.dtype == torch.float32 and bf16.shape == (len(TINY_SENTENCES), 16)
    # normalised in float32 after the cast back: unit norm to float32 precision, not bf16's 3e-3
    assert torch.allclose(bf16.norm(dim=-1), torch.ones(len(TINY_SENTENCES)), atol=1e-6)
    assert torch.nn.functional.cosine_similarity(bf16, encoder.encode(TINY_SENTENCES)).min() > 0.99
    _assert_unchanged(encoder, before)


def test_bf16_override_pooling_and_frozen_part(tiny_encoder: Encoder) -> None:
    mixed = Pooling.from_name("firstlast", tiny_encoder.num_layers)
    close = torch.nn.functional.cosine_similarity(tiny_encoder.encode(TINY_SENTENCES, dtype="bf16", pooling=mixed),
                                                  tiny_encoder.encode(TINY_SENTENCES, pooling=mixed))
    assert close.min() > 0.99
    tiny_encoder.head = torch.nn.ModuleList([DenseLayer(32, 32), DenseLayer(32, 8)])
    frozen = FrozenPart(tiny_encoder, 1).vectors(TINY_SENTENCES, dtype="bf16")
    assert frozen.dtype == torch.float32 and frozen.shape == (len(TINY_SENTENCES), 32)


def test_fp16_on_cpu_is_refused_in_one_line_before_any_model_loads(
    tiny_model_dir: Path, pairs_tsv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert FP16_ON_CPU == ("--dtype fp16 needs a CUDA GPU (on the CPU fp16 is slower than fp32); "
                           "use --dtype bf16 or fp32 on the CPU")

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(Encoder, "load", no_load)
    result = runner.invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--dtype", "fp16",
                                 "--device", "cpu"], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {FP16_ON_CPU}"


def test_fp16_on_cpu_is_refused_by_encode(tiny_encoder: Encoder) -> None:
    with pytest.raises(ConfigError) as error:
        tiny_encoder.encode(TINY_SENTENCES, dtype="fp16")
    assert str(error.value) == FP16_ON_CPU


# ---------------------------------------------------------------------------------------------------- CUDA


@pytest.mark.gpu
@pytest.mark.shared
@needs_cuda
@needs_shared()
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_half_precision_eval_on_cuda_within_0_05_of_fp32(dtype: str) -> None:
    evaluator = StsEvaluator.from_sts(list(TASKS), "test", SHARED_STS, resamples=0)
    encoder = Encoder.load(SHARED_MODELS / "paraphrase-minilm-l3-v2", device="cuda")
    before = _weights(encoder)
    fp32 = evaluator(encoder)
    half = evaluator(encoder, dtype=dtype)
    for ours, reference in zip(half.tasks, fp32.tasks):
        assert ours.metrics["spearman"] == pytest.approx(reference.metrics["spearman"],
                                                         abs=GPU_SPEARMAN_TOLERANCE), ours.task
    assert half.average == pytest.approx(fp32.average, abs=GPU_SPEARMAN_TOLERANCE)
    _assert_unchanged(encoder, before)


@pytest.mark.gpu
@needs_cuda
def test_fp16_encode_on_cuda_casts_and_never_calls_autocast(tiny_model_dir: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = Encoder.load(tiny_model_dir, device="cuda")
    before = _weights(encoder)
    seen: list[tuple[torch.dtype, torch.dtype, bool]] = []

    def record(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        seen.append((module.weight.dtype, output.dtype, torch.is_autocast_enabled("cuda")))

    def no_autocast(*args: object, **kwargs: object) -> None:
        raise AssertionError("encode(dtype='fp16') called torch.autocast")

    monkeypatch.setattr(torch, "autocast", no_autocast)
    handle = encoder.backbone.encoder.layer[0].attention.self.query.register_forward_hook(record)
    try:
        vectors = encoder.encode(TINY_SENTENCES, dtype="fp16")
    finally:
        handle.remove()
    assert seen == [(torch.float16, torch.float16, False)]
    assert vectors.dtype == torch.float32 and vectors.device.type == "cpu"
    _assert_unchanged(encoder, before)
    monkeypatch.undo()
    reference = encoder.encode(TINY_SENTENCES)
    assert torch.nn.functional.cosine_similarity(vectors, reference).min() > 0.99
