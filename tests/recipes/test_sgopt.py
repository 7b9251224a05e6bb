"""SG-OPT: the paper's equations term by term, the frozen guide, the regulariser, the loop, the export."""

from __future__ import annotations

import json
import math
import os
import random
import sys
from pathlib import Path

import pytest
import torch
import yaml

from sentadapt.errors import ConfigError
from sentadapt.model.encoder import Encoder
from sentadapt.recipes import RECIPES
from sentadapt.recipes.losses import nt_xent, opt1_loss, opt2_loss, opt3_loss, squared_distance
from sentadapt.recipes.sgopt import SgOptConfig, SgOptRecipe
from sentadapt.run.execute import train_stage, write_config
from sentadapt.run.inputs import build_inputs
from sentadapt.train.loop import Trainer, TrainingInterrupted, TrainingModule
from sentadapt.train.objective import Objective
from tests.conftest import adapt_imports_torch, cpu_state, run_checked, run_config
from tests.conftest import run_adapt as _adapt
from tests.train.test_train import Recorder

REPO = Path(__file__).resolve().parents[2]
WORDS = ["the", "a", "man", "woman", "dog", "server", "database", "disk", "network", "error", "failed", "job",
         "backup", "restart", "playing", "guitar", "music", "food", "running", "fast", "red", "blue", "big",
         "small", "new", "old", "request", "timeout", "memory", "cluster", "node", "user", "login", "dns"]
SENTENCES = ["the server is down", "a man is playing a guitar", "dns timeout on the cluster", "red car",
             "the database backup failed", "user login failed with a new password"]


# ---------------------------------------------------------------------- the equations, term by term

def _cos(u: torch.Tensor, v: torch.Tensor) -> float:
    return (u @ v / (u.norm() * v.norm())).item()


def reference_base(c: torch.Tensor, h: torch.Tensor, tau: float) -> float:
    """L_base: X = {c_i} ∪ {h_i}; μ(c_i) = h_i, μ(h_i) = c_i; Z = Σ_{n≠m} φ(x_m, x_n); mean over 2b."""
    b = len(c)
    x = [*c.double(), *h.double()]
    total = 0.0
    for m in range(2 * b):
        match = (m + b) % (2 * b)
        z = sum(math.exp(_cos(x[m], x[n]) / tau) for n in range(2 * b) if n != m)
        total += -math.log(math.exp(_cos(x[m], x[match]) / tau) / z)
    return total / (2 * b)


def reference_opt1(c: torch.Tensor, h: torch.Tensor, tau: float) -> float:
    """L_opt1_i = −log(φ(c_i,h_i)/Ẑ), Ẑ = Σ_{j≠i} φ(c_i,c_j) + Σ_j φ(c_i,h_j); mean over b."""
    c, h, b = c.double(), h.double(), len(c)
    total = 0.0
    for i in range(b):
        z = sum(math.exp(_cos(c[i], c[j]) / tau) for j in range(b) if j != i)
        z += sum(math.exp(_cos(c[i], h[j]) / tau) for j in range(b))
        total += -math.log(math.exp(_cos(c[i], h[i]) / tau) / z)
    return total / b


def reference_opt2(c: torch.Tensor, h: torch.Tensor, tau: float) -> float:
    """L_opt2_i = −log(φ(c_i,h_i) / Σ_j φ(c_i,h_j)); mean over b."""
    c, h, b = c.double(), h.double(), len(c)
    total = 0.0
    for i in range(b):
        z = sum(math.exp(_cos(c[i], h[j]) / tau) for j in range(b))
        total += -math.log(math.exp(_cos(c[i], h[i]) / tau) / z)
    return total / b


def reference_opt3(c: torch.Tensor, h: torch.Tensor, tau: float) -> float:
    """L_opt3_{i,k} = −log(φ(c_i,h_{i,k}) / (φ(c_i,h_{i,k}) + Σ_{m≠i} Σ_n φ(c_i,h_{m,n}))); 1/(b(l+1)) Σ_i Σ_k."""
    c, h = c.double(), h.double()
    b, layers = h.shape[0], h.shape[1]
    total = 0.0
    for i in range(b):
        negatives = sum(math.exp(_cos(c[i], h[m, n]) / tau) for m in range(b) if m != i for n in range(layers))
        for k in range(layers):
            positive = math.exp(_cos(c[i], h[i, k]) / tau)
            total += -math.log(positive / (positive + negatives))
    return total / (b * layers)


def _random(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


CASES = [(1, 4, 0.1), (2, 3, 0.5), (5, 8, 0.1), (6, 16, 0.01)]


@pytest.mark.parametrize(("b", "d", "tau"), CASES)
def test_sg_objective_is_l_base(b: int, d: int, tau: float) -> None:
    c, h = _random((b, d), b), _random((b, d), b + 100)
    assert nt_xent(c, h, tau).item() == pytest.approx(reference_base(c, h, tau), abs=1e-6)


@pytest.mark.parametrize(("b", "d", "tau"), CASES)
def test_opt1_and_opt2_match_the_equations(b: int, d: int, tau: float) -> None:
    c, h = _random((b, d), b), _random((b, d), b + 100)
    assert opt1_loss(c, h, tau).item() == pytest.approx(reference_opt1(c, h, tau), abs=1e-6)
    assert opt2_loss(c, h, tau).item() == pytest.approx(reference_opt2(c, h, tau), abs=1e-6)
    # float32 inputs: the same up to float32 rounding
    assert opt1_loss(c.float(), h.float(), tau).item() == pytest.approx(reference_opt1(c, h, tau), abs=1e-4)


@pytest.mark.parametrize(("b", "layers", "d", "tau"), [(1, 3, 4, 0.1), (2, 1, 3, 0.5), (4, 3, 8, 0.1),
                                                       (6, 7, 16, 0.01)])
def test_opt3_matches_the_equation(b: int, layers: int, d: int, tau: float) -> None:
    c, h = _random((b, d), b), _random((b, layers, d), b + 100)
    assert opt3_loss(c, h, tau).item() == pytest.approx(reference_opt3(c, h, tau), abs=1e-6)
    assert opt3_loss(c.float(), h.float(), tau).item() == pytest.approx(reference_opt3(c, h, tau), abs=1e-4)


def test_opt3_with_one_layer_is_opt2() -> None:
    """With a single view per sentence the positive plus the other sentences' views is L_opt2's denominator."""
    c, h = _random((5, 8), 1), _random((5, 8), 2)
    assert opt3_loss(c, h[:, None], 0.1).item() == pytest.approx(opt2_loss(c, h, 0.1).item(), abs=1e-9)


def test_losses_compute_in_float32_under_autocast_and_give_gradients() -> None:
    c = _random((4, 8), 1).float().requires_grad_(True)
    h = _random((4, 3, 8), 2).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = opt3_loss(c.bfloat16(), h.bfloat16(), 0.01)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(c.grad).all() and c.grad.abs().sum() > 0


def test_squared_distance_is_the_sum_of_squared_differences() -> None:
    params = [_random((3, 4), 1), _random((5,), 2)]
    reference = [_random((3, 4), 3), _random((5,), 4)]
    expected = sum(((p - r) ** 2).sum().item() for p, r in zip(params, reference))
    assert squared_distance(params, reference).item() == pytest.approx(expected, rel=1e-12)
    assert squared_distance(params, [p.clone() for p in params]).item() == 0.0


def test_loss_shape_errors_are_clear() -> None:
    with pytest.raises(ValueError, match=r"opt3_loss: expected \(N, D\) sentences and \(N, K, D\) views"):
        opt3_loss(torch.zeros(3, 4), torch.zeros(3, 4), 0.1)
    with pytest.raises(ValueError, match=r"opt1_loss: expected two \(N, D\) tensors of equal shape"):
        opt1_loss(torch.zeros(3, 4), torch.zeros(2, 4), 0.1)


# ---------------------------------------------------------------------- the recipe on a tiny BERT

def _batch(encoder: Encoder, sentences: list[str] = SENTENCES) -> dict[str, torch.Tensor]:
    tokens = encoder.collate(encoder.tokenize_ids(sentences))
    return {"input_ids": tokens.input_ids, "attention_mask": tokens.attention_mask}


def test_recipe_is_registered_with_paper_defaults() -> None:
    assert RECIPES.get("sg-opt") is SgOptRecipe
    config = SgOptConfig()
    assert (config.objective, config.temperature, config.regularizer, config.view_pooling) == ("sg-opt", 0.01, 0.1,
                                                                                               "max")
    assert (config.layer_min, config.layer_max, config.freeze_embeddings, config.head_hidden) == (0, -1, True, 4096)
    assert SgOptRecipe.spec.train_defaults == {
        "lr": 5e-5, "batch_size": 16, "epochs": 1, "eval_every": 50, "patience": 10, "adam_beta1": 0.9,
        "adam_beta2": 0.9, "weight_decay": 0.0, "warmup_ratio": 0.1, "max_length": 128,
    }
    assert [stage.name for stage in SgOptRecipe.stages(config)] == ["unsup"]


def test_views_are_per_layer_pooled_hidden_states_of_the_frozen_guide(tiny_encoder: Encoder) -> None:
    recipe = SgOptRecipe(SgOptConfig(head_hidden=16), tiny_encoder)
    assert recipe.layers == (0, 1, 2)  # hidden states 0 (embeddings) .. L, inclusive
    batch = _batch(tiny_encoder)
    views = recipe.guide_views(batch["input_ids"], batch["attention_mask"])
    assert views.shape == (len(SENTENCES), 3, tiny_encoder.hidden_size) and not views.requires_grad
    tiny_encoder.eval()
    hidden = tiny_encoder.backbone(**batch, output_hidden_states=True).hidden_states
    for i, length in enumerate(batch["attention_mask"].sum(1).tolist()):
        for k in range(3):
            assert torch.allclose(views[i, k], hidden[k][i, :length].max(dim=0).values, atol=1e-6)
    mean = SgOptRecipe(SgOptConfig(head_hidden=16, view_pooling="mean", layer_min=1, layer_max=1), tiny_encoder)
    views = mean.guide_views(batch["input_ids"], batch["attention_mask"])
    assert views.shape[1] == 1
    assert torch.allclose(views[2, 0], hidden[1][2, : batch["attention_mask"][2].sum()].mean(dim=0), atol=1e-6)


@pytest.mark.parametrize("objective", ["sg", "opt1", "opt2", "sg-opt"])
def test_each_objective_is_wired_to_its_equation(tiny_encoder: Encoder, objective: str) -> None:
    """Dropout off: the recipe's loss = the pure loss of f(CLS) and f(views), + 0 regulariser at step 0."""
    recipe = SgOptRecipe(SgOptConfig(objective=objective, head_hidden=16), tiny_encoder)
    heads = recipe.trainable_heads()
    batch = _batch(tiny_encoder)
    tiny_encoder.eval()
    torch.manual_seed(7)
    output = Objective(recipe)(tiny_encoder, heads, batch)
    assert output.parts["regularizer"].item() == 0.0
    assert output.total.item() == pytest.approx(output.parts["contrastive"].item(), abs=1e-6)

    head = heads["projection"]
    with torch.no_grad():
        cls = head(tiny_encoder.backbone(**batch).last_hidden_state[:, 0])  # raw [CLS], no Normalize, no pooler
        views = recipe.guide_views(batch["input_ids"], batch["attention_mask"])
        if objective == "sg-opt":
            expected = opt3_loss(cls, head(views), 0.01)
        else:
            torch.manual_seed(7)
            picked = torch.randint(3, (len(SENTENCES),))  # σ: one uniformly drawn layer per sentence
            one = head(views[torch.arange(len(SENTENCES)), picked])
            expected = {"sg": nt_xent, "opt1": opt1_loss, "opt2": opt2_loss}[objective](cls, one, 0.01)
    assert output.parts["contrastive"].item() == pytest.approx(expected.item(), rel=1e-5)


def test_guide_and_frozen_embeddings_get_no_gradient_head_does(tiny_encoder: Encoder) -> None:
    recipe = SgOptRecipe(SgOptConfig(head_hidden=16), tiny_encoder)
    heads = recipe.trainable_heads()
    tiny_encoder.train()
    Objective(recipe)(tiny_encoder, heads, _batch(tiny_encoder)).total.backward()
    assert all(p.grad is None and not p.requires_grad for p in recipe.guide.parameters())
    assert all(p.grad is None and not p.requires_grad for p in tiny_encoder.backbone.embeddings.parameters())
    assert tiny_encoder.backbone.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    assert heads["projection"][0].weight.grad.abs().sum() > 0
    head = heads["projection"]
    assert [type(m).__name__ for m in head] == ["Linear", "GELU", "Linear", "GELU"]
    assert head[0].in_features == tiny_encoder.hidden_size and head[2].out_features == 16


def test_guide_is_outside_the_trained_module_tree(tiny_encoder: Encoder) -> None:
    recipe = SgOptRecipe(SgOptConfig(head_hidden=16), tiny_encoder)
    module = TrainingModule(tiny_encoder, recipe.trainable_heads(), Objective(recipe))
    assert all(sub is not recipe.guide for sub in module.modules())
    guide_ids = {id(p) for p in recipe.guide.parameters()}
    assert not guide_ids & {id(p) for p in module.parameters()}
    assert not any(k.startswith("guide") or "_guide" in k for k in module.state_dict())
    module.train()  # what the loop does at the start and after every evaluation
    assert not recipe.guide.training and tiny_encoder.backbone.training
    assert recipe.guide is not tiny_encoder.backbone


def test_regulariser_sums_squared_differences_of_the_trainable_parameters(tiny_encoder: Encoder) -> None:
    recipe = SgOptRecipe(SgOptConfig(head_hidden=16, regularizer=0.5), tiny_encoder)
    assert recipe.distance_to_guide(tiny_encoder).item() == 0.0
    layer = tiny_encoder.backbone.encoder.layer[1].output.dense
    with torch.no_grad():
        layer.weight.add_(0.01)
        layer.bias.sub_(0.02)
    expected = layer.weight.numel() * 0.01**2 + layer.bias.numel() * 0.02**2
    assert recipe.distance_to_guide(tiny_encoder).item() == pytest.approx(expected, rel=1e-4)
    tiny_encoder.eval()
    output = Objective(recipe)(tiny_encoder, recipe.trainable_heads(), _batch(tiny_encoder))
    assert output.parts["regularizer"].item() == pytest.approx(0.5 * expected, rel=1e-4)
    assert output.total.item() == pytest.approx(output.parts["contrastive"].item() + 0.5 * expected, rel=1e-5)


def test_layer_range_outside_the_model_is_refused(tiny_encoder: Encoder) -> None:
    with pytest.raises(ConfigError) as error:
        SgOptRecipe(SgOptConfig(layer_max=3), tiny_encoder)
    assert str(error.value) == ("layer_min..layer_max: 0..3 is outside this model's hidden states 0..2 "
                                "(0 = embeddings, -1 = the last layer)")


# ---------------------------------------------------------------------- through the real loop

@pytest.fixture(scope="module")
def toy_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(0)
    lines = {" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10))) for _ in range(120)}
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(sorted(lines)) + "\n")
    return path


def sg_config(model: Path, corpus: Path, output: Path, dev: str | None = "none", sets: tuple[str, ...] = (),
              **train: object):
    flags = {"batch_size": 8, "max_length": 16, "lr": 1e-3, "max_steps": 4, "eval_every": 0, "checkpoint_every": 0,
             "log_every": 1, **train}
    return run_config("sg-opt", model, corpus, output, flags, ["head_hidden=32", *sets], dev)


def run(config, reporter=None, resume: bool = False):
    if not resume:
        write_config(config)  # as the lifecycle does before training: what `--resume` reads back
    inputs = build_inputs(config, lambda _t: None)
    train_stage(Trainer(inputs, reporter), resume)
    return inputs


def _log(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / "train.log").read_text().splitlines()]


def test_training_keeps_the_guide_and_embeddings_and_exports_cls(tiny_model_dir: Path, toy_corpus: Path,
                                                                 pairs_tsv: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    inputs = run(sg_config(tiny_model_dir, toy_corpus, output, dev=str(pairs_tsv), max_steps=4, eval_every=2))
    base = Encoder.load(tiny_model_dir, device="cpu").backbone.state_dict()
    recipe = inputs.recipe
    # the guide: bit-identical to the base model, no gradient, still in eval mode after the loop's .train()
    guide = cpu_state(recipe.guide)  # the trainer leaves the modules on its device (cuda on a GPU machine)
    assert guide.keys() == base.keys() and all(torch.equal(guide[k], base[k]) for k in base)
    assert not recipe.guide.training and all(p.grad is None for p in recipe.guide.parameters())
    # the tuned copy: embeddings frozen (unchanged), the transformer layers trained
    tuned = cpu_state(inputs.encoder.backbone)
    embeddings = [k for k in base if k.startswith("embeddings.")]
    assert embeddings and all(torch.equal(tuned[k], base[k]) for k in embeddings)
    assert not torch.equal(tuned["encoder.layer.0.attention.self.query.weight"],
                           base["encoder.layer.0.attention.self.query.weight"])
    # the regulariser is exactly zero before the first update, positive afterwards
    log = [r for r in _log(output) if "loss" in r]
    assert log[0]["step"] == 1 and log[0]["regularizer"] == 0.0 and log[-1]["regularizer"] > 0
    # export: CLS pooling, no projection head, the same vectors in sentence-transformers and sentadapt
    modules = json.loads((output / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling"]
    pooling = json.loads((output / modules[1]["path"] / "config.json").read_text())
    assert pooling["pooling_mode_cls_token"] and not pooling["pooling_mode_mean_tokens"]
    from safetensors.torch import load_file

    saved = load_file(str(output / "model.safetensors"))
    assert not any("projection" in k or "pooler" in k for k in saved)
    assert set(saved) == {k for k in base}  # the backbone only
    assert json.loads((output / "metrics.json").read_text())["pooling"] == "cls"
    encoder = Encoder.load(output, device="cpu")
    assert encoder.pooling_name == "cls" and encoder.pooling_source == "modules.json"
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(SENTENCES, convert_to_tensor=True).cpu()
    assert torch.nn.functional.cosine_similarity(encoder.encode(SENTENCES), theirs).min() >= 0.9999


def test_unfrozen_embeddings_are_trained(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    inputs = run(sg_config(tiny_model_dir, toy_corpus, tmp_path / "run", max_steps=2,
                           sets=("freeze_embeddings=false",)))
    base = Encoder.load(tiny_model_dir, device="cpu").backbone.state_dict()
    tuned, guide = cpu_state(inputs.encoder.backbone), cpu_state(inputs.recipe.guide)  # off the trainer's device
    name = "embeddings.word_embeddings.weight"
    assert not torch.equal(tuned[name], base[name])
    assert torch.equal(guide[name], base[name])


def test_a_few_steps_lower_the_loss(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    recorder = Recorder()
    run(sg_config(tiny_model_dir, toy_corpus, tmp_path / "run", max_steps=24, lr=3e-4), recorder)
    first = sum(recorder.losses_by_step[s] for s in range(1, 5)) / 4
    last = sum(recorder.losses_by_step[s] for s in range(21, 25)) / 4
    assert last < first * 0.9, (first, last)


def test_resume_rebuilds_the_guide_and_reproduces_the_trajectory(tiny_model_dir: Path, toy_corpus: Path,
                                                                 tmp_path: Path) -> None:
    """The guide is not in checkpoints: it is the base model again, so the resumed steps are exact."""
    straight = Recorder()
    run(sg_config(tiny_model_dir, toy_corpus, tmp_path / "straight", max_steps=5), straight)
    config = sg_config(tiny_model_dir, toy_corpus, tmp_path / "resumed", max_steps=5)
    with pytest.raises(TrainingInterrupted):
        run(config, Recorder(stop_at=2))
    resumed = Recorder()
    run(config, resumed, resume=True)
    assert sorted(resumed.losses_by_step) == [3, 4, 5]
    for step in (3, 4, 5):
        assert resumed.losses_by_step[step] == pytest.approx(straight.losses_by_step[step], abs=1e-5), step


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo")
def test_two_processes_match_one_process(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    """Dropout off and the all-layer objective, so only the gather and the scaling of the gathered contrastive
    term (× P by the loop) and of the local regulariser (÷ P by the recipe) can make a difference. λ is large
    so that a mis-scaled regulariser gradient would change the later steps.

    Both runs are `sentadapt adapt` subprocesses on the CPU with one thread each: an in-process run would train
    on CUDA (in TF32) on a GPU machine, and another device or thread count is another float32 computation.
    torchrun's rendezvous (--standalone) binds port 0, so the OS picks a free port. A port computed from the pid
    can be taken (by another test session's run, an xdist worker's, any listener): torchrun then exits 1 with
    EADDRINUSE. A failing run's stderr is in the assertion message."""
    model = tmp_path / "no-dropout"
    model.mkdir()
    for item in tiny_model_dir.iterdir():
        (model / item.name).write_bytes(item.read_bytes())
    config = json.loads((model / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (model / "config.json").write_text(json.dumps(config))
    single, double = tmp_path / "single", tmp_path / "double"
    common = [str(toy_corpus), "--recipe", "sg-opt", "--base", str(model), "--batch-size", "8", "--max-steps", "4",
              "--max-length", "16", "--lr", "1e-3", "--eval-every", "0", "--checkpoint-every", "0", "--dev", "none",
              "--set", "head_hidden=32", "--set", "regularizer=300", "--set", "log_every=1"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    adapt = ["-m", "sentadapt", "adapt", *common]
    run_checked([sys.executable, *adapt, "--output", str(single)], env)
    run_checked([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                 "--local-addr", "127.0.0.1", *adapt, "--output", str(double)], env)
    one, two = _log(single), _log(double)
    assert len(one) == 4 and one[-1]["regularizer"] > 1e-3
    for key in ("contrastive", "regularizer"):
        assert [r[key] for r in two] == pytest.approx([r[key] for r in one], rel=1e-4, abs=1e-6), key


# ---------------------------------------------------------------------- the command line

@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "objective=simclr"], "Error: objective: 'simclr' is not one of sg, opt1, opt2, sg-opt"),
        (["--set", "temperature=0"], "Error: temperature: 0.0 is out of range; valid: (0, inf]"),
        (["--set", "temperature=-0.01"], "Error: temperature: -0.01 is out of range; valid: (0, inf]"),
        (["--set", "view_pooling=cls"], "Error: view_pooling: 'cls' is not one of max, mean"),
        (["--set", "regularizer=-1"], "Error: regularizer: -1.0 is out of range; valid: [0, inf]"),
        (["--set", "layer_min=3", "--set", "layer_max=2"],
         "Error: layer_max: 2 is below layer_min 3; the views are hidden states layer_min..layer_max (inclusive)"),
        (["--set", "views=shuffle,none"], "Error: --set: Unknown key 'views'."),
    ],
)
def test_bad_options_fail_fast_with_one_line(corpus: Path, tiny_model_dir: Path, tmp_path: Path, extra: list[str],
                                             message: str) -> None:
    result = _adapt(str(corpus), "--recipe", "sg-opt", "--base", str(tiny_model_dir), "--output",
                    str(tmp_path / "run"), *extra)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_dry_run_prints_the_papers_settings(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    args = (str(corpus), "--recipe", "sg-opt", "--config", str(REPO / "recipes" / "sg-opt.yaml"), "--base",
            str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dry-run")
    result = _adapt(*args)
    assert result.exit_code == 0, result.output
    assert adapt_imports_torch(*args) == (0, False)  # nothing loaded, not even torch
    printed = yaml.safe_load(result.stdout)
    assert printed["recipe"] == "sg-opt"
    train = printed["train"]
    assert (train["lr"], train["batch_size"], train["epochs"], train["adam_beta1"], train["adam_beta2"]) == (
        5e-5, 16, 1.0, 0.9, 0.9)
    assert (train["weight_decay"], train["warmup_ratio"], train["eval_every"], train["patience"],
            train["max_length"]) == (0.0, 0.1, 50, 10, 128)
    assert printed["recipe_args"] == {
        "objective": "sg-opt", "temperature": 0.01, "regularizer": 0.1, "view_pooling": "max", "layer_min": 0,
        "layer_max": -1, "freeze_embeddings": True, "head_hidden": 4096, "export_pooling": "cls",
    }
    # the YAML documents the built-in defaults: without it, the same config
    plain = _adapt(str(corpus), "--recipe", "sg-opt", "--base", str(tiny_model_dir), "--output",
                   str(tmp_path / "run"), "--dry-run")
    assert yaml.safe_load(plain.stdout) == printed


def test_option_errors_do_not_import_torch(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    assert adapt_imports_torch(
        str(corpus), "--recipe", "sg-opt", "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
        "--set", "objective=x", "--dev", "none") == (2, False)


def test_export_pooling_auto_keeps_a_declared_pooling_and_cls_stays_the_papers(tiny_model_dir: Path,
                                                                                tmp_path: Path) -> None:
    Encoder.load(tiny_model_dir, pooling="mean", device="cpu").save(tmp_path / "st")
    declared = Encoder.load(tmp_path / "st", device="cpu")
    plain = Encoder.load(tiny_model_dir, device="cpu")  # an HF folder: mean by default, but not declared
    for encoder, expected in ((declared, "mean"), (plain, "cls")):
        recipe = SgOptRecipe(SgOptConfig(export_pooling="auto", head_hidden=8), encoder)
        assert recipe.prepare_export(encoder, recipe.trainable_heads()).pooling_name == expected
    assert SgOptConfig().export_pooling == "cls"
    forced = SgOptRecipe(SgOptConfig(export_pooling="cls", head_hidden=8), declared)
    assert forced.prepare_export(declared, forced.trainable_heads()).pooling_name == "cls"
    SgOptConfig(export_pooling="auto").validate()
    with pytest.raises(ConfigError) as error:
        SgOptConfig(export_pooling="pooler").validate()
    assert str(error.value) == ("export_pooling: 'pooler' is not one of auto, cls, mean, max, last2avg, firstlast, "
                                "lasttoken")
