"""--matryoshka: every recipe's loss and the distillation term summed over prefixes of the vectors (issue 45)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sentadapt.config.merging import train_config
from sentadapt.model.encoder import Encoder
from sentadapt.recipes.base import Term
from sentadapt.recipes.clsr import ClsrConfig, ClsrRecipe
from sentadapt.recipes.consert import ConsertConfig, ConsertRecipe
from sentadapt.recipes.losses import distillation_kl, keep_prefix, nt_xent
from sentadapt.recipes.matryoshka import WHOLE, Matryoshka
from sentadapt.recipes.sgopt import SgOptConfig, SgOptRecipe
from sentadapt.train.distill import build_distillation
from sentadapt.train.loop import TrainingModule
from sentadapt.train.objective import Objective
from tests.conftest import TINY_SENTENCES, run_adapt


def test_a_kept_prefix_scores_as_the_prefix_itself() -> None:
    generator = torch.Generator().manual_seed(0)
    first, second = torch.randn(8, 32, generator=generator), torch.randn(8, 32, generator=generator)
    for dim in (32, 16, 5):
        zeroed = nt_xent(keep_prefix(first, dim), keep_prefix(second, dim), 0.05)
        sliced = nt_xent(first[:, :dim], second[:, :dim], 0.05)
        assert zeroed.item() == pytest.approx(sliced.item(), rel=1e-6, abs=1e-6)
        kl = distillation_kl(keep_prefix(first, dim), second, 0.05)
        assert kl.item() == pytest.approx(distillation_kl(first[:, :dim], second, 0.05).item(), rel=1e-6, abs=1e-6)
    assert keep_prefix(first, 32) is first  # the whole width: no copy, the same loss as without --matryoshka


def test_the_total_is_the_weighted_sum_over_the_prefixes() -> None:
    vectors = torch.randn(6, 16, generator=torch.Generator().manual_seed(1))

    def term(cut):
        return cut(vectors).pow(2).sum()

    sizes = Objective(None, Matryoshka.of((16, 8, 4), (1.0, 0.5, 2.0)))  # type: ignore[arg-type]
    expected = vectors.pow(2).sum() + 0.5 * vectors[:, :8].pow(2).sum() + 2.0 * vectors[:, :4].pow(2).sum()
    assert sizes.sized(Term("squares", term)).item() == pytest.approx(expected.item(), rel=1e-6)
    # no weights given: the largest size 2, each other 1 (research/findings.md, "Weighting the full size"); one size
    # alone is the plain loss
    assert Matryoshka.of((16, 8, 4), ()).weights == (2.0, 1.0, 1.0)
    assert Matryoshka.of((16,), ()).weights == (1.0,)
    assert Objective(None, WHOLE).sized(Term("squares", term)).item() == vectors.pow(2).sum().item()  # type: ignore[arg-type]
    # a term that reads no vectors is taken once, whatever the sizes
    assert sizes.summed([Term("once", term, sized=False)]).item() == vectors.pow(2).sum().item()


def _sentence_batch(encoder: Encoder) -> dict[str, torch.Tensor]:
    tokens = encoder.collate(encoder.tokenize_ids(TINY_SENTENCES))
    return {"input_ids": tokens.input_ids, "attention_mask": tokens.attention_mask}


def _loss(name: str, model: Path, sizes: Matryoshka, distill: bool) -> float:
    """The loss of one batch at step 0 for a fresh recipe with `sizes`, under a fixed seed (the same views)."""
    encoder = Encoder.load(model, device="cpu")
    recipe = {
        "consert": lambda: ConsertRecipe(ConsertConfig(), encoder),
        "consert-joint": lambda: ConsertRecipe(ConsertConfig(mode="joint", nli=("x",)), encoder),
        "sg-opt": lambda: SgOptRecipe(SgOptConfig(head_hidden=32), encoder),
        "clsr": lambda: ClsrRecipe(ClsrConfig(init="random"), encoder),
    }[name]()
    if name == "clsr":
        recipe.table = encoder.encode(TINY_SENTENCES)
        rows = torch.arange(len(TINY_SENTENCES))
        batch = {"a_rows": rows, "b_rows": rows.roll(1)}
    elif name == "consert-joint":
        left = encoder.collate(encoder.tokenize_ids(TINY_SENTENCES))
        right = encoder.collate(encoder.tokenize_ids(TINY_SENTENCES[1:] + TINY_SENTENCES[:1]))
        batch = {"a_input_ids": left.input_ids, "a_attention_mask": left.attention_mask,
                 "b_input_ids": right.input_ids, "b_attention_mask": right.attention_mask,
                 "labels": torch.arange(len(TINY_SENTENCES)) % 3}
    else:
        batch = _sentence_batch(encoder)
    heads = recipe.trainable_heads()
    recipe.prepare_export(encoder, heads)
    distillation = build_distillation(train_config(distill=1.0), recipe, encoder) if distill else None
    module = TrainingModule(encoder, heads, Objective(recipe, sizes, distillation)).train()
    if distill:  # move the weights, or the term is 0 at step 0 whatever its sizes
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            for parameter in (p for p in module.parameters() if p.requires_grad and p.dim() == 2):
                parameter.add_(0.3 * torch.randn_like(parameter))
    torch.manual_seed(3)
    output = module(batch)
    # SG-OPT's regulariser weighs parameters, not vectors: it is not summed over sizes, so it is left out here
    return (output.total - output.parts.get("regularizer", torch.zeros(()))).item()


@pytest.mark.parametrize("name", ["consert", "consert-joint", "sg-opt", "clsr"])
@pytest.mark.parametrize("distill", [False, True])
def test_every_recipe_and_the_distillation_term_sum_over_the_sizes(tiny_model_dir: Path, name: str,
                                                                   distill: bool) -> None:
    # the tiny BERT is 32 wide: 32 alone is the loss without --matryoshka; (32, 8) is (32) + (8), term by term
    whole = _loss(name, tiny_model_dir, WHOLE, distill)
    assert _loss(name, tiny_model_dir, Matryoshka.of((32,), ()), distill) == pytest.approx(whole, rel=1e-6)
    half = _loss(name, tiny_model_dir, Matryoshka.of((8,), ()), distill)
    assert half != pytest.approx(whole, rel=1e-3)  # the prefix is a different loss
    both = _loss(name, tiny_model_dir, Matryoshka.of((32, 8), (1.0, 0.5)), distill)
    assert both == pytest.approx(whole + 0.5 * half, rel=1e-5)


@pytest.mark.parametrize(("sets", "message"), [
    (["--matryoshka", "16,32"], "--matryoshka: 16,32 is not decreasing; list each size once, largest first: 32,16"),
    (["--matryoshka", "32,0"], "--matryoshka: 32,0 has a size below 1; list widths such as 384,192,96"),
    (["--matryoshka", "32,16", "--set", "matryoshka_weights=1"],
     "matryoshka_weights: 1 weights for 2 sizes (32,16); give one per size"),
    (["--set", "matryoshka_weights=1,1"],
     "matryoshka_weights: given without --matryoshka; list the sizes they weigh, e.g. --matryoshka 384,192,96"),
    (["--matryoshka", "32,16", "--set", "distill_kind=mse"],
     "--matryoshka: distill_kind mse compares every coordinate of a vector with its target's, which a prefix "
     "cannot match; use distill_kind=kl or sim-mse"),
    (["--matryoshka", "32,a"], "--matryoshka: expected an integer, got 'a'"),
])
def test_bad_sizes_are_one_line_errors_before_any_weights_load(tiny_model_dir: Path, corpus: Path, tmp_path: Path,
                                                               sets: list[str], message: str) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev",
                       "none", "--max-steps", "1", *sets)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"Error: {message}"]


def test_a_size_above_the_width_names_the_width(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev",
                       "none", "--max-steps", "1", "--matryoshka", "64,32")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "Error: --matryoshka: 64 is above this model's embedding width 32; list sizes up to 32, e.g. 32,16,8")


def test_a_matryoshka_run_trains_saves_its_sizes_and_logs_a_larger_loss(tiny_model_dir: Path, corpus: Path,
                                                                        tmp_path: Path) -> None:
    import json

    import yaml

    logs = {}
    for name, flags in (("plain", []), ("sizes", ["--matryoshka", "32,16,8"])):
        result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / name), "--dev",
                           "none", "--max-steps", "2", "--batch-size", "8", "--set", "log_every=1", *flags)
        assert result.exit_code == 0, result.output
        logs[name] = [json.loads(line)["loss"] for line in (tmp_path / name / "train.log").read_text().splitlines()
                      if '"loss"' in line]
    saved = yaml.safe_load((tmp_path / "sizes" / "config.yaml").read_text())["train"]
    assert saved["matryoshka"] == [32, 16, 8]
    # four weights' worth of terms (2 + 1 + 1) instead of one: step 1 (the same weights and views) is larger than the
    # plain run's
    assert logs["sizes"][0] > logs["plain"][0] * 2.5


@pytest.mark.parametrize(("flags", "message"), [
    (["--sizes", "16", "--dev", "none"], "Error: --sizes: weighs each size on the dev set against the base's whole "
                                         "vectors; pass --dev FILE (e.g. 100 labelled pairs from your domain) or "
                                         "--dev stsb --data-dir DIR"),
    (["--sizes", "64,16", "--dev", "PAIRS"], "Error: --sizes: 64 is above this model's embedding width 32; list sizes "
                                             "up to 32"),
])
def test_sizes_without_a_dev_set_or_above_the_width_are_one_line(tiny_model_dir: Path, corpus: Path,
                                                                 pairs_tsv: Path, tmp_path: Path, flags: list[str],
                                                                 message: str) -> None:
    flags = [str(pairs_tsv) if flag == "PAIRS" else flag for flag in flags]
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--max-steps", "1", "--batch-size", "8", *flags)
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == message
