"""Distillation toward the frozen base (`--set distill=W`): the terms, each recipe's views, the loop's wiring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sentadapt.config.merging import train_config
from sentadapt.config.schema import DistillMix, TrainConfig
from sentadapt.model.encoder import Encoder
from sentadapt.recipes.clsr import ClsrConfig, ClsrRecipe
from sentadapt.recipes.consert import ConsertConfig, ConsertRecipe
from sentadapt.recipes.losses import distillation_kl, distillation_loss, distillation_mse
from sentadapt.recipes.sgopt import SgOptConfig, SgOptRecipe
from sentadapt.storage.run_folder import checkpoint_name
from sentadapt.train.distill import build_distillation
from sentadapt.train.loop import TrainingModule
from sentadapt.train.objective import Objective
from tests.conftest import TINY_SENTENCES, run_adapt, run_config
from tests.train.test_train import make_config, train

# ---------------------------------------------------------------------- the terms against plain loops


def reference_kl(adapted: torch.Tensor, base: torch.Tensor, temperature: float) -> torch.Tensor:
    """Σ_i KL(p_i ‖ q_i) / N, p_i and q_i the softmax over j ≠ i of cos / T, written out term by term."""
    n = adapted.shape[0]
    total = adapted.new_zeros(())
    for i in range(n):
        others = [j for j in range(n) if j != i]
        s_a = torch.stack([torch.cosine_similarity(adapted[i], adapted[j], dim=0) / temperature for j in others])
        s_b = torch.stack([torch.cosine_similarity(base[i], base[j], dim=0) / temperature for j in others])
        p = torch.exp(s_b) / torch.exp(s_b).sum()
        q = torch.exp(s_a) / torch.exp(s_a).sum()
        total = total + sum(p[k] * torch.log(p[k] / q[k]) for k in range(n - 1))
    return total / n


def reference_mse(adapted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Σ_d (a_d − t_d)² per sentence on the raw vectors, averaged over sentences."""
    rows = [((adapted[i] - target[i]) ** 2).sum() for i in range(len(adapted))]
    return torch.stack(rows).mean()


def reference_cosine(adapted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    rows = [1 - (adapted[i] @ target[i]) / (adapted[i].norm() * target[i].norm()) for i in range(len(adapted))]
    return torch.stack(rows).mean()


def reference_sim_mse(adapted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean over i ≠ j of (cos_a(i, j) − cos_t(i, j))², written out pair by pair."""
    n = len(adapted)
    terms = [(torch.cosine_similarity(adapted[i], adapted[j], dim=0)
              - torch.cosine_similarity(target[i], target[j], dim=0)) ** 2
             for i in range(n) for j in range(n) if i != j]
    return torch.stack(terms).mean()


def reference(kind: str, adapted: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    if kind == "kl":
        return reference_kl(adapted, target, temperature)
    return {"mse": reference_mse, "cosine": reference_cosine, "sim-mse": reference_sim_mse}[kind](adapted, target)


@pytest.mark.parametrize("kind", ["kl", "sim-mse", "mse", "cosine"])
@pytest.mark.parametrize(("n", "d", "temperature"), [(3, 3, 0.05), (7, 16, 0.05), (5, 8, 1.0)])
def test_value_and_gradient_match_the_plain_loop(kind: str, n: int, d: int, temperature: float) -> None:
    generator = torch.Generator().manual_seed(n * d)
    base = torch.randn(n, d, dtype=torch.float64, generator=generator)
    adapted = (base + 0.3 * torch.randn(n, d, dtype=torch.float64, generator=generator)).requires_grad_(True)
    ours = distillation_loss(kind, adapted, base, temperature)
    theirs = reference(kind, adapted, base, temperature)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12) and ours.item() > 1e-4
    (grad_ours,) = torch.autograd.grad(ours, adapted)
    (grad_theirs,) = torch.autograd.grad(theirs, adapted)
    assert torch.allclose(grad_ours, grad_theirs, rtol=1e-10, atol=1e-12)


def test_structure_kinds_take_a_target_of_another_width() -> None:
    generator = torch.Generator().manual_seed(3)
    adapted, wide = torch.randn(5, 4, generator=generator), torch.randn(5, 12, generator=generator)
    for kind in ("kl", "sim-mse"):
        assert distillation_loss(kind, adapted, wide, 0.05).item() > 0
    with pytest.raises(ValueError, match="of equal shape"):
        distillation_loss("cosine", adapted, wide, 0.05)


def test_terms_are_exactly_zero_for_equal_inputs_and_base_gets_no_gradient() -> None:
    vectors = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    base = vectors.clone().requires_grad_(True)
    for kind in ("kl", "sim-mse", "mse", "cosine"):
        assert distillation_loss(kind, vectors, base, 0.05).item() == 0.0, kind
    adapted = vectors.clone().requires_grad_(True)
    distillation_kl(adapted * 2, base, 0.05).backward()  # a rescaling keeps every cosine: still 0
    assert base.grad is None and adapted.grad is not None
    assert distillation_kl(vectors[:1], vectors[:1], 0.05).item() == 0.0  # one sentence: no distribution
    # two sentences: each row's distribution has one entry (the self-pair is left out), so kl is always 0
    assert distillation_kl(vectors[:2], vectors[2:4], 0.05).item() == 0.0


def test_structure_and_vector_kinds_see_different_changes() -> None:
    """kl and sim-mse compare the in-batch similarity structure, mse and cosine each vector: a rotation moves only
    the vector kinds; a rescaling moves only mse (cosine compares directions)."""
    vectors = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2)))
    rotated = vectors @ rotation
    assert distillation_kl(rotated, vectors, 0.05).item() == pytest.approx(0.0, abs=1e-12)
    assert distillation_loss("sim-mse", rotated, vectors, 0.05).item() == pytest.approx(0.0, abs=1e-12)
    assert distillation_mse(rotated, vectors).item() > 0.1
    assert distillation_loss("cosine", rotated, vectors, 0.05).item() > 0.05
    assert distillation_loss("cosine", 3 * vectors, vectors, 0.05).item() == pytest.approx(0.0, abs=1e-12)
    assert distillation_mse(3 * vectors, vectors).item() > 1


# ---------------------------------------------------------------------- each recipe's views at step 0

def _sentence_batch(encoder: Encoder) -> dict[str, torch.Tensor]:
    tokens = encoder.collate(encoder.tokenize_ids(TINY_SENTENCES))
    return {"input_ids": tokens.input_ids, "attention_mask": tokens.attention_mask}


def _nli_batch(encoder: Encoder) -> dict[str, torch.Tensor]:
    left = encoder.collate(encoder.tokenize_ids(TINY_SENTENCES))
    right = encoder.collate(encoder.tokenize_ids(TINY_SENTENCES[1:] + TINY_SENTENCES[:1]))
    return {"a_input_ids": left.input_ids, "a_attention_mask": left.attention_mask, "b_input_ids": right.input_ids,
            "b_attention_mask": right.attention_mask, "labels": torch.arange(len(TINY_SENTENCES)) % 3}


def _clsr_batch(recipe: ClsrRecipe, encoder: Encoder) -> dict[str, torch.Tensor]:
    recipe.table = encoder.encode(TINY_SENTENCES)  # what load_examples caches: the frozen part's output
    rows = torch.arange(len(TINY_SENTENCES))
    return {"a_rows": rows, "b_rows": rows.roll(1)}


def _prepared(name: str, encoder: Encoder):
    """A recipe as the loop holds it at step 0: export prepared, distillation on, module in train mode."""
    recipe = {
        "consert": lambda: ConsertRecipe(ConsertConfig(), encoder),
        "consert-joint": lambda: ConsertRecipe(ConsertConfig(mode="joint", nli=("x",)), encoder),
        "sg-opt": lambda: SgOptRecipe(SgOptConfig(head_hidden=32), encoder),
        "clsr": lambda: ClsrRecipe(ClsrConfig(init="identity"), encoder),
    }[name]()
    batch = (_clsr_batch(recipe, encoder) if name == "clsr" else
             _nli_batch(encoder) if name == "consert-joint" else _sentence_batch(encoder))
    heads = recipe.trainable_heads()
    recipe.prepare_export(encoder, heads)
    distillation = build_distillation(train_config(distill=1.0), recipe, encoder)
    module = TrainingModule(encoder, heads, Objective(recipe, distillation=distillation)).train()
    return recipe, module, distillation, batch


@pytest.mark.parametrize("name", ["consert", "consert-joint", "sg-opt", "clsr"])
def test_the_term_is_zero_at_step_0_and_grows_when_weights_move(tiny_encoder: Encoder, name: str) -> None:
    _recipe, module, distillation, batch = _prepared(name, tiny_encoder)
    # exactly 0: both sides run the same kernels on the same weights (the frozen side under no_grad)
    for kind in ("kl", "sim-mse", "mse", "cosine"):
        distillation.mix = DistillMix.parse(kind)
        assert _term(module, batch).item() == 0.0, kind
    output = module(batch)
    assert output.parts["distill"].item() == 0.0
    # the adapted side carries the gradient; moving the trained weights moves the term
    trained = [p for p in module.parameters() if p.requires_grad and p.dim() == 2]
    with torch.no_grad():
        for parameter in trained:
            parameter.add_(0.3 * torch.randn_like(parameter))
    for kind in ("kl", "sim-mse", "mse", "cosine"):
        distillation.mix = DistillMix.parse(kind)
        assert _term(module, batch).item() > 1e-4, kind


def _term(module: TrainingModule, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """D as the objective sums it, from the term's own pass (CLSR's examples are rows: its frozen and exported rows)."""
    objective = module._objective[0]
    assert objective.distillation is not None
    embedded = objective.recipe.embed(module.encoder, module.heads, batch, exported=True)
    rows = (embedded.exported, embedded.frozen_rows) if embedded.frozen_rows is not None else (None, None)
    return objective.summed(objective.distillation.terms(module.encoder, batch, *rows))


def test_sgopt_reuses_its_guide_and_consert_copies_once(tiny_encoder: Encoder) -> None:
    recipe, _module, distillation, _batch = _prepared("sg-opt", tiny_encoder)
    assert distillation.targets.frozen.encoder.backbone is recipe.guide
    _consert, module, distillation, _batch = _prepared("consert", Encoder.load(tiny_encoder.name, device="cpu"))
    frozen = distillation.targets.frozen.encoder
    assert frozen.backbone is not module.encoder.backbone and not frozen.training
    assert all(not p.requires_grad for p in frozen.parameters())


def test_the_frozen_copy_is_not_part_of_the_trained_module(tiny_encoder: Encoder) -> None:
    recipe, module, distillation, _batch = _prepared("consert", tiny_encoder)
    plain = TrainingModule(module.encoder, module.heads, Objective(recipe))
    assert module.state_dict().keys() == plain.state_dict().keys()
    assert sum(p.numel() for p in module.parameters()) == sum(p.numel() for p in plain.parameters())
    frozen = {id(p) for p in distillation.targets.frozen.encoder.parameters()}
    assert frozen and not frozen & {id(p) for p in module.parameters()}


# ---------------------------------------------------------------------- through the loop

def _log(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / "train.log").read_text().splitlines() if '"loss"' in line]


def test_two_steps_log_distill_change_the_weights_and_leave_checkpoints_alone(tiny_model_dir: Path, corpus: Path,
                                                                             tmp_path: Path) -> None:
    runs = {}
    for weight in ("0", "5"):
        config = make_config(tiny_model_dir, corpus, tmp_path / f"distill-{weight}", sets=(f"distill={weight}",),
                             max_steps=2, checkpoint_every=2)
        assert config.train.distillation.distill == float(weight)
        train(config)
        runs[weight] = config.output
    log = _log(Path(runs["5"]))
    assert [r["step"] for r in log] == [1, 2]
    assert log[0]["distill"] == 0.0 and log[1]["distill"] > 0  # step 1 starts at the base
    assert all("distill" not in r for r in _log(Path(runs["0"])))  # off: no term, no part
    with_distill = load_file(str(Path(runs["5"]) / "model.safetensors"))
    without = load_file(str(Path(runs["0"]) / "model.safetensors"))
    assert with_distill.keys() == without.keys()
    assert any(not torch.equal(with_distill[k], without[k]) for k in without)
    # the checkpoints hold the same tensors as without distillation: the frozen copy is never saved
    checkpoints = [load_file(str(Path(runs[w]) / "checkpoints" / checkpoint_name(2) / "model.safetensors"))
                   for w in ("5", "0")]
    assert checkpoints[0].keys() == checkpoints[1].keys()


def test_set_reaches_train_config_for_every_recipe(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    for recipe in ("consert", "sg-opt", "clsr"):
        config = run_config(recipe, tiny_model_dir, corpus, tmp_path, {},
                            ["distill=0.5", "distill_kind=mse", "distill_temperature=0.1"])
        distillation = config.train.distillation
        assert (distillation.distill, distillation.distill_kind, distillation.distill_temperature) == (0.5, "mse", 0.1)
    defaults = TrainConfig()
    settings = defaults.distillation
    assert (settings.distill, settings.distill_kind, settings.distill_temperature) == (0.0, "kl", 0.05)


@pytest.mark.parametrize(("option", "message"), [
    ("distill=-1", "Error: distill: -1.0 is out of range; valid: [0, inf] (0 = off)"),
    ("distill=nan", "Error: distill: nan is out of range; valid: [0, inf] (0 = off)"),
    ("distill_kind=l1", "Error: distill_kind: 'l1' is not one of kl, sim-mse, mse, cosine"),
    ("distill_temperature=0", "Error: distill_temperature: 0.0 is out of range; valid: (0, inf]"),
    ("distill=lots", "Error: --set: distill: expected a number, got 'lots'"),
])
def test_bad_values_fail_with_one_line(corpus: Path, tiny_model_dir: Path, tmp_path: Path, option: str,
                                       message: str) -> None:
    result = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--output",
                       str(tmp_path / "run"), "--dev", "none", "--set", option)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == message


def test_a_recipe_of_the_required_members_alone_gets_distillation(tiny_encoder: Encoder) -> None:
    """Distillation is outside the recipe contract: a recipe that declares only its spec, views and export
    registers, and distillation compares its exported vectors with the frozen base's (equal before any step)."""
    from sentadapt.recipes.base import RECIPES, RecipeBase, RecipeSpec, register_recipe

    class Bare(RecipeBase):
        spec = RecipeSpec("bare", ConsertConfig, "text", {}, {})

        def embed(self, encoder, heads, batch, exported):  # type: ignore[override]
            raise NotImplementedError

        def prepare_export(self, encoder, heads):  # type: ignore[override]
            return encoder

    try:
        register_recipe("bare")(Bare)
        distillation = build_distillation(train_config(distill=1.0, distill_kind="mse"), Bare(ConsertConfig(),
                                                                                              tiny_encoder),
                                          tiny_encoder)
        assert distillation is not None
        tokens = tiny_encoder.collate(tiny_encoder.tokenize_ids(list(TINY_SENTENCES[:4])))
        batch = {"input_ids": tokens.input_ids, "attention_mask": tokens.attention_mask}
        objective = Objective(Bare(ConsertConfig(), tiny_encoder), distillation=distillation)
        assert objective.summed(distillation.terms(tiny_encoder, batch)).item() == pytest.approx(0.0, abs=1e-10)
        with torch.no_grad():  # a trained weight moves the student away from the frozen copy
            tiny_encoder.backbone.embeddings.word_embeddings.weight.mul_(1.5)
        assert objective.summed(distillation.terms(tiny_encoder, batch)).item() > 1e-4
    finally:
        RECIPES._items.pop("bare", None)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- one pass for the view and the term

def _one_pass_parts(encoder: Encoder, views: tuple[str, ...], train_pooling: str = "mean"):
    """A ConSERT module toward a teacher table whose views are `views`, the encoder pooling by mean (as a
    sentence-tuned base exports), and a counter of the encoder's forward passes."""
    from sentadapt.model.pooling import Pooling
    from sentadapt.train.distill import TEACHER_VECTORS, Distillation, TeacherTargets

    encoder.configure(pooling=Pooling.from_name("mean", encoder.num_layers))
    recipe = ConsertRecipe(ConsertConfig(views=views, train_pooling=train_pooling), encoder)
    targets = TeacherTargets(torch.randn(len(TINY_SENTENCES), 24, generator=torch.Generator().manual_seed(0)))
    distillation = Distillation(1.0, DistillMix.parse("kl"), 0.05, targets)
    module = TrainingModule(encoder, recipe.trainable_heads(), Objective(recipe, distillation=distillation)).train()
    batch = {**_sentence_batch(encoder), TEACHER_VECTORS: targets.table}
    passes: list[int] = []
    encoder.register_forward_pre_hook(lambda _module, _args: passes.append(1))
    return recipe, module, distillation, batch, passes


def _gradients(module: TrainingModule, loss: torch.Tensor) -> list[torch.Tensor]:
    parameters = [p for p in module.parameters() if p.requires_grad]
    return [g if g is not None else torch.zeros_like(p)
            for g, p in zip(torch.autograd.grad(loss, parameters, allow_unused=True), parameters, strict=True)]


def test_a_none_view_under_the_export_pooling_serves_the_distillation_term(tiny_encoder: Encoder) -> None:
    """views=none,feature-cutoff: the recipe's one pass of both views gives the term its student rows, so a step
    runs one encoder pass where a separate clean pass made two; the term and the gradient equal the two-pass
    step's (the rows are the same encoding: mean pooling, dropout off, the same weights)."""
    recipe, module, distillation, batch, passes = _one_pass_parts(tiny_encoder, ("none", "feature-cutoff"))
    torch.manual_seed(3)  # the cutoff view's mask
    one_pass = module(batch)
    assert len(passes) == 1
    torch.manual_seed(3)
    embedded = recipe.embed(module.encoder, module.heads, batch, exported=False)
    torch.manual_seed(3)
    recipe_output = Objective(recipe)(module.encoder, module.heads, batch)
    separate = Objective(recipe).summed(distillation.terms(module.encoder, batch))  # the term's own clean pass
    assert len(passes) == 4 and embedded.exported is not None
    assert one_pass.parts["distill"].item() == pytest.approx(separate.item(), rel=1e-5) and separate.item() > 1e-3
    for ours, theirs in zip(_gradients(module, one_pass.total), _gradients(module, recipe_output.total + separate),
                            strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6)


def test_the_clean_rows_ride_in_the_views_pass_when_the_term_wants_them(tiny_encoder: Encoder) -> None:
    """views=shuffle,feature-cutoff and a term that wants the exported rows (build_distillation asks): the recipe
    stacks the clean sentences with its two views, one pass of 3 × batch rows, and the term and the gradient equal
    those of the views' pass and the term's own clean pass."""
    recipe, module, distillation, batch, passes = _one_pass_parts(tiny_encoder, ("shuffle", "feature-cutoff"))
    torch.manual_seed(3)  # the shuffle and the cutoff mask
    one_pass = module(batch)
    assert len(passes) == 1
    torch.manual_seed(3)
    embedded = recipe.embed(module.encoder, module.heads, batch, exported=False)
    torch.manual_seed(3)
    recipe_output = Objective(recipe)(module.encoder, module.heads, batch)
    separate = Objective(recipe).summed(distillation.terms(module.encoder, batch))
    assert len(passes) == 4 and embedded.exported is None
    assert one_pass.parts["distill"].item() == pytest.approx(separate.item(), rel=1e-5) and separate.item() > 1e-3
    assert one_pass.parts["contrastive"].item() == pytest.approx(recipe_output.parts["contrastive"].item(), rel=1e-5)
    for ours, theirs in zip(_gradients(module, one_pass.total), _gradients(module, recipe_output.total + separate),
                            strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("views", "train_pooling", "passes"), [(("shuffle", "encoder-dropout"), "mean", 3),
                                                                (("none", "feature-cutoff"), "cls", 2)])
def test_without_an_exported_view_the_term_runs_its_own_pass(tiny_encoder: Encoder, views: tuple[str, ...],
                                                             train_pooling: str, passes: int) -> None:
    """A view that runs the model's own dropout (a pass of its own, so nothing to stack the clean rows with), or
    training pooled other than the export (a paper-preset BERT: [CLS] exported, mean trained), gives no rows of the
    student's encoding although the objective asks for them: the term encodes the batch itself."""
    recipe, module, _distillation, batch, counted = _one_pass_parts(tiny_encoder, views, train_pooling)
    module(batch)
    assert len(counted) == passes
    assert recipe.embed(module.encoder, module.heads, batch, exported=True).exported is None
