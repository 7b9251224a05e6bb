"""`--set distill_kind=kl:1,sim-mse:10,cosine:0.5`: the distillation term as a weighted sum of its kinds, each on the
same batch's vectors (the vector kinds through the projection a wider teacher needs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sentadapt.config.schema import DistillMix
from sentadapt.errors import ConfigError
from sentadapt.model.encoder import Encoder
from sentadapt.recipes.consert import ConsertConfig, ConsertRecipe
from sentadapt.recipes.losses import distillation_loss
from sentadapt.train.distill import TEACHER_VECTORS, Distillation, TeacherTargets, clean_embeddings
from sentadapt.train.objective import Objective
from tests.conftest import TINY_SENTENCES, run_adapt

TEACHER_WIDTH = 48


@pytest.mark.parametrize(("value", "terms"), [
    ("kl", (("kl", 1.0),)),
    ("kl:1,sim-mse:10,cosine:0.5", (("kl", 1.0), ("sim-mse", 10.0), ("cosine", 0.5))),
    ("kl, cosine:0", (("kl", 1.0),)),  # a weight 0 is that term off; a bare kind weighs 1
    ("mse:2", (("mse", 2.0),)),
])
def test_distill_kind_reads_one_kind_or_a_weighted_sum(value: str, terms: tuple[tuple[str, float], ...]) -> None:
    assert DistillMix.parse(value).terms == terms


@pytest.mark.parametrize(("value", "message"), [
    ("l1", "distill_kind: 'l1' is not one of kl, sim-mse, mse, cosine"),
    ("kl:1,l1:2", "distill_kind: 'l1' in 'kl:1,l1:2' is not one of kl, sim-mse, mse, cosine; give one kind or a "
                  "weighted sum such as kl:1,sim-mse:10"),
    ("kl:1,kl:2", "distill_kind: 'kl:1,kl:2' names kl twice; give each kind once, e.g. kl:1,sim-mse:10"),
    ("kl:lots", "distill_kind: 'kl:lots' has a weight that is not a number; write kind:weight, e.g. kl:1,sim-mse:10"),
    ("kl:-1", "distill_kind: 'kl:-1' has a weight that is not ≥ 0 and finite (0 = off)"),
    ("kl:0,mse:0", "distill_kind: 'kl:0,mse:0' weighs every kind 0; give one a weight above 0, or turn "
                   "distillation off with distill=0"),
])
def test_a_bad_sum_is_one_line_naming_the_part(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        DistillMix.parse(value)
    assert str(caught.value) == message


def test_the_sum_is_each_kind_weighted_with_the_vector_kinds_through_the_projection(tiny_encoder: Encoder) -> None:
    """Against the kinds computed one by one: kl and sim-mse on the student's vectors, cosine on their projection to
    the teacher's width."""
    recipe = ConsertRecipe(ConsertConfig(), tiny_encoder)
    tokens = tiny_encoder.collate(tiny_encoder.tokenize_ids(list(TINY_SENTENCES[:6])))
    teacher = torch.randn(6, TEACHER_WIDTH, generator=torch.Generator().manual_seed(3))
    batch = {"input_ids": tokens.input_ids, "attention_mask": tokens.attention_mask, TEACHER_VECTORS: teacher}
    torch.manual_seed(0)
    projection = torch.nn.Linear(tiny_encoder.embedding_dim, TEACHER_WIDTH, bias=False)
    def distilled(kind: str, projection: torch.nn.Linear | None = None) -> torch.Tensor:
        term = Distillation(1.0, DistillMix.parse(kind), 0.05, TeacherTargets(teacher), projection=projection)
        return Objective(recipe).summed(term.terms(tiny_encoder, batch))

    value = distilled("kl:1,sim-mse:10,cosine:0.5", projection)
    student = clean_embeddings(tiny_encoder, tokens.input_ids, tokens.attention_mask)
    expected = (distillation_loss("kl", student, teacher, 0.05)
                + 10 * distillation_loss("sim-mse", student, teacher, 0.05)
                + 0.5 * distillation_loss("cosine", projection(student), teacher, 0.05))
    torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-6)
    alone, off = distilled("kl"), distilled("kl:1,cosine:0")
    assert off.item() == alone.item()  # a weight 0 adds nothing, not even a rounding
    value.backward()  # the projection learns from the cosine term
    assert projection.weight.grad is not None and projection.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(("sets", "message"), [
    (("--matryoshka", "32,16", "--set", "distill_kind=kl:1,cosine:1"),
     "--matryoshka: distill_kind cosine compares every coordinate of a vector with its target's, which a prefix "
     "cannot match; use distill_kind=kl or sim-mse"),
    (("--matryoshka", "32,16", "--set", "distill_kind=kl:1,cosine:0"), None),  # off: nothing compares coordinates
])
def test_matryoshka_refuses_a_sum_with_a_vector_kind(sets: tuple[str, ...], message: str | None, corpus: Path,
                                                     tiny_model_dir: Path, tmp_path: Path) -> None:
    result = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--output",
                       str(tmp_path / "run"), "--dev", "none", "--set", "distill=1", "--set", "max_steps=1",
                       "--set", "batch_size=4", *sets)
    if message is None:
        assert result.exit_code == 0, result.output
        assert "distill_kind: kl:1,cosine:0" in (tmp_path / "run" / "config.yaml").read_text()
    else:
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == f"Error: {message}"
