from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.errors import ConfigError
from sentadapt.model.encoder import Encoder
from sentadapt.recipes import RECIPES
from sentadapt.recipes.consert import ConsertConfig, ConsertRecipe
from sentadapt.train.objective import Objective

NLI_ROWS = [
    ("a man is playing a guitar", "a man is playing music", "entailment"),
    ("a man is playing a guitar", "a woman is cooking food", "contradiction"),
    ("the server is down", "the server is not running", "entailment"),
    ("the server is down", "the dog is running fast", "neutral"),
    ("the database backup failed", "the backup job failed", "entailment"),
    ("the red car is big", "the car is small", "contradiction"),
    ("user login failed", "the password is new", "neutral"),
    ("dns timeout on the cluster", "the cluster has a dns error", "entailment"),
]


@pytest.fixture
def nli_file(tmp_path: Path) -> Path:
    path = tmp_path / "nli.jsonl"
    path.write_text("".join(json.dumps({"premise": p, "hypothesis": h, "label": lab}) + "\n" for p, h, lab in NLI_ROWS))
    return path


def _batch(encoder: Encoder, rows: list[tuple[str, str, str]]) -> dict[str, torch.Tensor]:
    left = encoder.collate(encoder.tokenize_ids([r[0] for r in rows]))
    right = encoder.collate(encoder.tokenize_ids([r[1] for r in rows]))
    labels = torch.tensor([("entailment", "neutral", "contradiction").index(r[2]) for r in rows])
    return {"a_input_ids": left.input_ids, "a_attention_mask": left.attention_mask,
            "b_input_ids": right.input_ids, "b_attention_mask": right.attention_mask, "labels": labels}


@pytest.mark.parametrize("views", [("shuffle", "feature-cutoff"), ("adversarial", "token-cutoff")])
def test_joint_loss_combines_classification_and_contrastive(tiny_encoder: Encoder, views: tuple[str, str]) -> None:
    config = ConsertConfig(mode="joint", views=views, nli=("x",))
    config.validate()
    recipe = ConsertRecipe(config, tiny_encoder)
    heads = recipe.trainable_heads()
    assert recipe.stage_mode == "joint" and heads["classifier"].out_features == 3
    tiny_encoder.train()
    torch.manual_seed(0)
    output = Objective(recipe)(tiny_encoder, heads, _batch(tiny_encoder, NLI_ROWS))
    assert set(output.parts) == {"classification", "contrastive"}
    expected = (output.parts["classification"] + config.alpha * output.parts["contrastive"]).item()
    assert output.total.item() == pytest.approx(expected, rel=1e-5)
    output.total.backward()
    assert heads["classifier"].weight.grad is not None
    assert tiny_encoder.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_adversarial_view_moves_along_the_classification_gradient(tiny_encoder: Encoder) -> None:
    """With norm 0 the adversarial view equals the clean view, so NT-Xent only sees dropout-free twins."""
    config = ConsertConfig(mode="joint", views=("adversarial", "none"), nli=("x",), adversarial_norm=0.0)
    recipe = ConsertRecipe(config, tiny_encoder)
    batch = _batch(tiny_encoder, NLI_ROWS)
    same = Objective(recipe)(tiny_encoder, recipe.trainable_heads(), batch).parts["contrastive"]
    config.adversarial_norm = 5.0
    moved = Objective(recipe)(tiny_encoder, recipe.trainable_heads(), batch).parts["contrastive"]
    assert moved > same


def test_unsupervised_views_run_without_internal_dropout(tiny_encoder: Encoder) -> None:
    """Paper: dropout off for the augmented views, so two 'none' views are identical → a fixed loss."""
    recipe = ConsertRecipe(ConsertConfig(views=("none", "none")), tiny_encoder)
    tiny_encoder.train()
    batch = tiny_encoder.collate(tiny_encoder.tokenize_ids(["the server is down", "a man is playing", "red car"]))
    losses = {Objective(recipe)(tiny_encoder, recipe.trainable_heads(),
                                  {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}).total.item()
              for _ in range(3)}
    assert len(losses) == 1
    assert tiny_encoder.backbone.training  # the recipe restores the mode it found


def test_roberta_positions_are_offset_past_padding(tmp_path: Path) -> None:
    from transformers import RobertaConfig, RobertaModel

    config = RobertaConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=37, max_position_embeddings=40, pad_token_id=1)
    backbone = RobertaModel(config, add_pooling_layer=False)

    class Tok:
        pad_token_id = 1

    encoder = Encoder(backbone, Tok(), pooling=__import__("sentadapt.model.pooling").model.pooling.Pooling("mean"))
    recipe = ConsertRecipe(ConsertConfig(), encoder)
    assert recipe.position_offset == 2  # padding_idx + 1, not 0 (the official code's bug)
    mask = torch.tensor([[1, 1, 1, 0]])
    view = recipe._view("shuffle", torch.tensor([[0, 5, 2, 1]]), mask)
    assert sorted(view.position_ids[0, :3].tolist()) == [2, 3, 4] and view.position_ids[0, 3].item() == 5
    recipe._encode_view(encoder, view)  # position ids inside the embedding table


def test_models_without_position_ids_refuse_shuffle_clearly(tiny_encoder: Encoder) -> None:
    class NoPositions(torch.nn.Module):
        config = tiny_encoder.backbone.config

        def forward(self, input_ids, attention_mask):
            raise AssertionError

    tiny_encoder.backbone = NoPositions()
    with pytest.raises(ConfigError) as error:
        ConsertRecipe(ConsertConfig(), tiny_encoder)
    assert str(error.value) == ("views: 'shuffle' permutes position ids, which bert models do not accept; choose "
                                "other views (e.g. views=token-cutoff,feature-cutoff)")


def test_recipe_is_registered_with_paper_defaults() -> None:
    recipe = RECIPES.get("consert")
    assert recipe is ConsertRecipe
    assert recipe.spec.train_defaults["batch_size"] == 96 and recipe.spec.train_defaults["max_length"] == 64
    assert ConsertConfig().temperature == 0.1 and ConsertConfig().views == ("shuffle", "feature-cutoff")
    staged = ConsertRecipe.stages(ConsertConfig(mode="sup-unsup", nli=("x",)))
    assert [(stage.name, stage.noun) for stage in staged] == [("sup", "NLI pair"), ("unsup", "sentence")]


def test_sup_unsup_runs_two_stages(tiny_model_dir: Path, nli_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(24)))
    output = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", "none",
        "--set", "mode=sup-unsup", "--set", f"nli={nli_file}", "--batch-size", "4", "--max-steps", "2",
        "--max-length", "16",
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    stage_one = output / "stage-1-sup"
    assert (stage_one / "modules.json").is_file() and (output / "modules.json").is_file()
    # the run's base, which the decision weighs against (stage 2 trains from stage 1's model)
    assert json.loads((output / "metrics.json").read_text())["base_model"] == str(tiny_model_dir)
    assert "stage 1/2: sup" in result.stderr and "stage 2/2: unsup" in result.stderr
    log = [json.loads(line) for line in (stage_one / "train.log").read_text().splitlines()]
    assert "classification" in log[0]


def test_identity_positions_reproduce_the_plain_forward_on_roberta() -> None:
    """The offset is read from the position table, so an unshuffled view equals the default positions."""
    from transformers import RobertaConfig, RobertaModel

    from sentadapt.model.pooling import Pooling

    config = RobertaConfig(vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=37, max_position_embeddings=40, pad_token_id=1)
    backbone = RobertaModel(config, add_pooling_layer=False).eval()

    class Tok:
        pad_token_id = 1

    encoder = Encoder(backbone, Tok(), Pooling("mean"))
    offset = ConsertRecipe(ConsertConfig(), encoder).position_offset
    ids, mask = torch.tensor([[0, 7, 9, 2, 1]]), torch.tensor([[1, 1, 1, 1, 0]])
    positions = torch.tensor([[offset + i for i in range(4)] + [1]])
    plain = encoder(ids, mask)
    assert torch.allclose(encoder(ids, mask, position_ids=positions), plain, atol=1e-6)


def test_export_pooling_auto_keeps_a_declared_pooling(tiny_model_dir: Path, tmp_path: Path) -> None:
    Encoder.load(tiny_model_dir, pooling="max", device="cpu").save(tmp_path / "st")
    declared = Encoder.load(tmp_path / "st", device="cpu")
    plain = Encoder.load(tiny_model_dir, device="cpu")
    for encoder, expected in ((declared, "max"), (plain, "last2avg")):
        recipe = ConsertRecipe(ConsertConfig(), encoder)
        assert recipe.prepare_export(encoder, recipe.trainable_heads()).pooling_name == expected
    forced = ConsertRecipe(ConsertConfig(export_pooling="last2avg"), declared)
    assert forced.prepare_export(declared, forced.trainable_heads()).pooling_name == "last2avg"


def test_a_base_declaring_cls_is_told_that_the_mean_is_trained(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The vector trained is not the one exported: said once, at the start, with the setting that trains it; not
    said when they agree, when the base declares nothing (the paper's last2avg export) or when export is forced."""
    Encoder.load(tiny_model_dir, pooling="cls", device="cpu").save(tmp_path / "cls")
    Encoder.load(tiny_model_dir, pooling="mean", device="cpu").save(tmp_path / "mean")
    cls, mean = Encoder.load(tmp_path / "cls", device="cpu"), Encoder.load(tmp_path / "mean", device="cpu")
    plain = Encoder.load(tiny_model_dir, device="cpu")

    def said(config: ConsertConfig, encoder: Encoder) -> str | None:
        return ConsertRecipe(config, encoder)._pooling_mismatch(encoder)

    assert said(ConsertConfig(), cls) == ("ConSERT trains mean pooling (train_pooling) but the model is used with "
                                          "the cls pooling its folder declares; --set train_pooling=cls trains the "
                                          "vector you get (docs/recipes.md)")
    assert said(ConsertConfig(train_pooling="cls"), cls) is None
    assert said(ConsertConfig(export_pooling="mean"), cls) is None
    assert said(ConsertConfig(), mean) is None and said(ConsertConfig(), plain) is None
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(8)))
    result = CliRunner().invoke(app, ["adapt", str(corpus), "--base", str(tmp_path / "cls"), "--output",
                                      str(tmp_path / "run"), "--dev", "none", "--batch-size", "4", "--max-steps", "1",
                                      "--max-length", "16"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stderr.count("ConSERT trains mean pooling (train_pooling)") == 1


def test_distilbert_takes_every_view() -> None:
    from transformers import DistilBertConfig, DistilBertModel

    from sentadapt.model.pooling import Pooling

    config = DistilBertConfig(vocab_size=60, dim=32, n_layers=2, n_heads=2, hidden_dim=37, max_position_embeddings=40,
                              pad_token_id=0)

    class Tok:
        pad_token_id = 0

    encoder = Encoder(DistilBertModel(config), Tok(), Pooling("mean"))
    ids = torch.tensor([[2, 5, 7, 3, 0], [2, 9, 3, 0, 0], [2, 4, 4, 4, 3]])
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long()}
    for views in (("shuffle", "token-cutoff"), ("feature-cutoff", "span-cutoff")):
        recipe = ConsertRecipe(ConsertConfig(views=views), encoder)
        assert torch.isfinite(Objective(recipe)(encoder, recipe.trainable_heads(), batch).total)


def test_shuffle_is_refused_where_the_model_ignores_its_position_ids() -> None:
    """DeBERTa with relative positions alone (DeBERTa-v3's configuration) takes position_ids and ignores them: the
    shuffle view would be the sentence unchanged. With absolute positions too, the view is accepted."""
    from transformers import DebertaV2Config, DebertaV2Model

    from sentadapt.model.pooling import Pooling

    class Tok:
        pad_token_id = 0

    def deberta(absolute: bool) -> Encoder:
        torch.manual_seed(0)
        config = DebertaV2Config(vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=37, max_position_embeddings=40, relative_attention=True,
                                 position_biased_input=absolute, pos_att_type=["p2c", "c2p"], position_buckets=16)
        return Encoder(DebertaV2Model(config), Tok(), Pooling("mean"))

    with pytest.raises(ConfigError) as error:
        ConsertRecipe(ConsertConfig(), deberta(absolute=False))
    assert str(error.value) == (
        "views: 'shuffle' permutes position ids, which this deberta-v2 model takes but ignores (its positions are "
        "relative: the same output whatever the ids), so the view would be the sentence unchanged; choose other "
        "views (e.g. views=token-cutoff,feature-cutoff)")
    ConsertRecipe(ConsertConfig(views=("token-cutoff", "feature-cutoff")), deberta(absolute=False))
    encoder = deberta(absolute=True)
    encoder.train()
    ConsertRecipe(ConsertConfig(), encoder)
    assert encoder.backbone.training  # the probe's eval pass left the mode as it was


@pytest.mark.parametrize("views", [("shuffle", "feature-cutoff"), ("token-cutoff", "span-cutoff"),
                                   ("dropout", "shuffle"), ("none", "encoder-dropout")])
def test_both_views_go_through_one_forward_pass_and_equal_two_passes(
    tiny_encoder: Encoder, views: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One pass of 2B rows (half the kernel launches) gives each view what its own pass gives; a view that
    runs the model's dropout keeps its own pass (one pass has one dropout mode)."""
    recipe = ConsertRecipe(ConsertConfig(views=views), tiny_encoder)
    batch = tiny_encoder.collate(tiny_encoder.tokenize_ids(["the server is down", "a man is playing the guitar",
                                                            "red car", "dns timeout on the cluster"]))
    ids, mask = batch.input_ids, batch.attention_mask
    tiny_encoder.eval()  # the model's dropout off, so the two-pass reference draws nothing the fused pass does not
    torch.manual_seed(3)
    made = [recipe._view(name, ids, mask) for name in views]
    with torch.no_grad():
        fused = recipe._encode_pair(tiny_encoder, *made)
        # the transforms drew their masks in the fused pass and reuse them: the same views, one pass each
        separate = [recipe._encode_view(tiny_encoder, view) for view in made]
    for ours, theirs in zip(fused, separate):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    calls = []
    original = type(tiny_encoder).forward
    monkeypatch.setattr(type(tiny_encoder), "forward", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    Objective(recipe)(tiny_encoder, recipe.trainable_heads(), {"input_ids": ids, "attention_mask": mask})
    assert len(calls) == (2 if "encoder-dropout" in views else 1)


def test_a_staged_run_plans_each_stage_and_trains_what_it_planned(tiny_model_dir: Path, nli_file: Path,
                                                                   tmp_path: Path) -> None:
    """`--dry-run` of sup-unsup: the supervised stage's steps from the NLI file's labelled pairs, the unsupervised
    stage's from the corpus; the run then trains those steps in each stage."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(24)))
    output = tmp_path / "run"
    args = ["adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", "none", "--set",
            "mode=sup-unsup", "--set", f"nli={nli_file}", "--batch-size", "4", "--max-length", "16"]
    planned = CliRunner().invoke(app, [*args, "--dry-run"], catch_exceptions=False)
    assert planned.exit_code == 0, planned.output
    assert ("planned: stage 1/2 (sup): 2 steps, 1 pass over 8 NLI pairs (batch 4)\n"  # 8 labelled pairs // 4
            "planned: stage 2/2 (unsup): 6 steps, 1 pass over 24 sentences (batch 4)\n") in planned.stderr
    trained = CliRunner().invoke(app, args, catch_exceptions=False)
    assert trained.exit_code == 0, trained.output
    stages = [json.loads((folder / "metrics.json").read_text()) for folder in (output / "stage-1-sup", output)]
    assert [metrics["total_steps"] for metrics in stages] == [2, 6]


def test_the_nli_files_are_recorded_absolute_and_a_missing_one_is_named(tiny_model_dir: Path, nli_file: Path,
                                                                        tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--set nli=FILE` given relative is recorded absolute, as the corpus is (config.yaml: `--resume` from another
    directory reads the same file); a missing one is one line naming the setting, before anything loads."""
    import yaml

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(24)))
    monkeypatch.chdir(tmp_path)
    args = ["adapt", "corpus.txt", "--base", str(tiny_model_dir), "--output", "run", "--dev", "none", "--set",
            "mode=sup-unsup", "--batch-size", "4", "--dry-run"]
    planned = CliRunner().invoke(app, [*args, "--set", f"nli={nli_file.name}"], catch_exceptions=False)
    assert planned.exit_code == 0, planned.output
    assert yaml.safe_load(planned.stdout)["recipe_args"]["nli"] == [str(nli_file)]
    missing = CliRunner().invoke(app, [*args, "--set", "nli=missing.jsonl"], catch_exceptions=False)
    assert missing.exit_code != 0
    assert missing.stderr == ("Error: --set nli=missing.jsonl: no such file; pass .jsonl/.tsv/.csv/.parquet files of "
                              "premise, hypothesis and label\n")


def test_a_staged_run_stopped_in_its_first_stage_resumes_as_a_whole_and_refuses_its_stage_alone(
        tiny_model_dir: Path, nli_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in stage 1: the message says to resume the run's folder (it named the stage's, and resuming that alone
    trained the stage as a run of its own inside itself, then failed with a traceback); resuming it finishes both."""
    import sentadapt.train.tracking as tracking
    from tests.conftest import run_adapt

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(24)))
    output = tmp_path / "run"
    real_log = tracking.RunRecords.log

    def interrupt_stage_one(self, record):  # Ctrl-C after step 1 of the supervised stage: a checkpoint is written
        real_log(self, record)
        if "stage-1-sup" in str(self.train_log.path) and record.get("step") == 1 and "loss" in record:
            signal.raise_signal(signal.SIGINT)  # a Ctrl-C: the loop stops at this step's boundary

    monkeypatch.setattr(tracking.RunRecords, "log", interrupt_stage_one)
    first = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", "none", "--set",
                      "mode=sup-unsup", "--set", f"nli={nli_file}", "--batch-size", "4", "--max-length", "16",
                      "--set", "log_every=1")
    assert first.exit_code == 130, first.output
    assert " ".join(first.stderr.split()).endswith(f"resume with: sentadapt adapt --resume --output {output}")
    monkeypatch.setattr(tracking.RunRecords, "log", real_log)
    stage = output / "stage-1-sup"
    alone = run_adapt("--resume", "--output", str(stage))
    assert alone.exit_code != 0
    assert " ".join(alone.stderr.split()) == (f"Error: --output {stage}: is an earlier stage of the run in {output}; "
                                              f"resume the whole run: sentadapt adapt --resume --output {output}")
    assert not (stage / "stage-1-sup").exists()
    resumed = run_adapt("--resume", "--output", str(output))
    assert resumed.exit_code == 0, resumed.output
    stages = [json.loads((folder / "metrics.json").read_text()) for folder in (stage, output)]
    assert [metrics["total_steps"] for metrics in stages] == [2, 6]


def test_the_last_stage_is_weighed_against_the_runs_base_model(tiny_model_dir: Path, nli_file: Path,
                                                                pairs_tsv: Path, tmp_path: Path) -> None:
    """A staged run decides whether it beat the model the user gave: stage 2's Δ is against the base model's dev
    score as stage 1 scored it, not against stage 1's model (which stage 1 itself may have judged worse)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(24)))
    output = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(output), "--dev", str(pairs_tsv),
        "--set", "mode=sup-unsup", "--set", f"nli={nli_file}", "--batch-size", "4", "--max-steps", "2",
        "--max-length", "16"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    first, last = (json.loads((folder / "metrics.json").read_text()) for folder in (output / "stage-1-sup", output))
    assert first["base_model"] == last["base_model"] == str(tiny_model_dir)
    assert last["base_score"] == first["base_score"] and last["history"][0]["dev"] == first["base_score"]
    assert last["dev_change"] == pytest.approx(last["best_score"] - first["base_score"])
    base_outputs = json.loads((output / "stage-1-sup" / "dev_outputs.json").read_text())["base"]
    assert json.loads((output / "dev_outputs.json").read_text())["base"] == base_outputs
    assert f"weighed against the base model {tiny_model_dir} (dev {first['base_score']:.2f}, scored in stage 1)" \
        in result.stderr
    summary = " ".join(result.stdout.split("sentadapt adapt — summary")[-1].split())
    assert "│ base model │ /" in summary and "│ trained from │ /" in summary  # (long paths fold over lines)
