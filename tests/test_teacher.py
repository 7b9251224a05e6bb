"""`adapt --teacher MODEL`: a tiny student (32 dims) learns from a tiny teacher of another width (48 dims) and
another vocabulary; the teacher's vectors are computed once, cached, and carried by the batches."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from sentadapt.data.batching import plan_epoch
from sentadapt.encoder import Encoder
from sentadapt.train.distill import TEACHER_VECTORS
from sentadapt.train.inputs import build_inputs
from sentadapt.train.lifecycle import resumed_config
from sentadapt.train.loop import Trainer, TrainingInterrupted
from tests.conftest import ASSETS, FLOAT32_RTOL, TINY_SENTENCES, run_adapt, run_config
from tests.test_distill import reference_kl
from tests.test_train import Recorder

TEACHER_WIDTH = 48
FLAGS = {"batch_size": 8, "max_length": 16, "lr": 1e-3, "eval_every": 0, "log_every": 1, "checkpoint_every": 2}
SPECIAL = 5  # [PAD] [UNK] [CLS] [SEP] [MASK] keep their ids


def build_tiny_teacher(folder: Path) -> Path:
    """As conftest.build_tiny_bert, but 48 wide and with its vocabulary in another order (other token ids)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tokens = (ASSETS / "vocab.txt").read_text().split()
    tokens = tokens[:SPECIAL] + tokens[SPECIAL:][::-1]
    torch.manual_seed(7)
    config = BertConfig(vocab_size=len(tokens), hidden_size=TEACHER_WIDTH, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=53, max_position_embeddings=64,
                        initializer_range=0.2)
    folder.mkdir(parents=True, exist_ok=True)
    BertModel(config, add_pooling_layer=False).save_pretrained(folder, safe_serialization=True)
    BertTokenizerFast(vocab={token: i for i, token in enumerate(tokens)}, do_lower_case=True).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_teacher(tmp_path_factory.mktemp("tiny-teacher"))


def _config(student: Path, teacher: Path, corpus: Path, output: Path, sets: tuple[str, ...] = (), **flags: object):
    config = run_config("consert", student, corpus, output, {**FLAGS, **flags}, list(sets))
    config.teacher = str(teacher)
    return config


def _train(config, reporter=None, resume: bool = False, notes: list[str] | None = None):
    Path(config.output).mkdir(parents=True, exist_ok=True)
    note = notes.append if notes is not None else (lambda _t: None)
    return Trainer(build_inputs(config, note), reporter).run(resume=resume)


def test_the_teacher_tokenizes_for_itself(tiny_model_dir: Path, teacher_dir: Path) -> None:
    student, teacher = Encoder.load(tiny_model_dir, device="cpu"), Encoder.load(teacher_dir, device="cpu")
    assert student.tokenize_ids(["the server"]) != teacher.tokenize_ids(["the server"])
    assert (student.embedding_dim, teacher.embedding_dim) == (32, TEACHER_WIDTH)


def test_the_loss_is_the_kl_of_student_and_cached_teacher_similarities(tiny_model_dir: Path, teacher_dir: Path,
                                                                      corpus: Path, tmp_path: Path) -> None:
    """Step 1's batch: its teacher rows are the cache file's rows of its sentences, and the distill part equals
    teacher_weight × a plain KL of the in-batch softmax distributions, student (as encoded) against teacher;
    with recipe_weight=0 it is the whole loss (the teacher alone)."""
    config = _config(tiny_model_dir, teacher_dir, corpus, tmp_path / "run", ("teacher_weight=2", "recipe_weight=0"))
    trainer = Trainer(build_inputs(config, lambda _t: None))
    trainer._build(resume=False)
    batch = trainer._micro_batch(0, {}, 0, 1)
    rows = plan_epoch(trainer.lengths, 8, config.train.seed, 0, config.train.length_grouping)[0]
    lines = corpus.read_text().splitlines()
    texts = [lines[row] for row in rows]  # a 40-line corpus of distinct lines: example i is line i

    cached = load_file(trainer.inputs.teacher.path)["vectors"]
    assert cached.shape == (40, TEACHER_WIDTH)
    torch.testing.assert_close(batch[TEACHER_VECTORS], cached[torch.as_tensor(rows)], rtol=0, atol=0)
    teacher = Encoder.load(teacher_dir, device="cpu").encode(texts)
    torch.testing.assert_close(batch[TEACHER_VECTORS], teacher, rtol=FLOAT32_RTOL, atol=1e-5)

    trainer.module.train()
    batch = {key: value.to(trainer.accelerator.device) for key, value in batch.items()}
    output = trainer.module(batch)
    ours = output.parts["distill"].item()
    student = trainer.inputs.encoder.encode(texts)  # eval mode, the export pooling: what the student is
    plain = 2 * reference_kl(student.double(), teacher.double(), config.train.distill_temperature).item()
    assert ours == pytest.approx(plain, rel=FLOAT32_RTOL) and plain > 1e-3
    assert output.total.item() == ours and output.parts["contrastive"].item() > 0


def test_the_teacher_is_scored_with_the_runs_dev_evaluator(tiny_model_dir: Path, teacher_dir: Path, corpus: Path,
                                                            pairs_tsv: Path, tmp_path: Path) -> None:
    config = run_config("consert", tiny_model_dir, corpus, tmp_path / "run", FLAGS, [], dev=str(pairs_tsv))
    config.teacher = str(teacher_dir)
    inputs = build_inputs(config, lambda _t: None)
    expected = inputs.evaluator(Encoder.load(teacher_dir, device="cpu"), intervals=False).average
    assert inputs.teacher.score == pytest.approx(expected, rel=FLOAT32_RTOL)
    student, teacher = inputs.teacher.dev_encode_seconds  # both timed on the dev sentences
    assert student > 0 and teacher > 0 and inputs.teacher.speedup == pytest.approx(teacher / student)
    blind = build_inputs(_config(tiny_model_dir, teacher_dir, corpus, tmp_path / "blind"), lambda _t: None)
    assert blind.teacher.score is None and blind.teacher.dev_encode_seconds is None


def test_the_share_of_the_teachers_lead_and_the_summary_line() -> None:
    from sentadapt.train.summary import teacher_text
    from sentadapt.train.teacher import TeacherTable

    ahead = TeacherTable(torch.zeros(1, 4), "big-model", "/m", False, 1.0, "t.safetensors", 84.0, (1.0, 2.5))
    assert ahead.gap_closed(82.0, 83.5) == pytest.approx(0.75)  # (83.5 − 82) / (84 − 82)
    assert teacher_text(ahead, 82.0, 83.5) == ("84.00 (big-model); the student keeps 75 % of its +2.00 over the "
                                               "base at 2.5× its encode speed")
    behind = TeacherTable(torch.zeros(1, 4), "big-model", "/m", False, 1.0, "t.safetensors", 81.0, (1.0, 2.5))
    assert behind.gap_closed(82.0, 83.5) is None  # a share of a loss means nothing
    assert teacher_text(behind, 82.0, 83.5) == ("81.00 (big-model); not ahead of the base on this dev set: it has no "
                                                "gain to pass on here (the student encodes 2.5× as fast)")


def test_two_steps_and_resume_equal_four_straight(tiny_model_dir: Path, teacher_dir: Path, corpus: Path,
                                                  tmp_path: Path) -> None:
    straight = Recorder()
    _train(_config(tiny_model_dir, teacher_dir, corpus, tmp_path / "straight", max_steps=4), straight)
    interrupted = _config(tiny_model_dir, teacher_dir, corpus, tmp_path / "resumed", max_steps=4)
    with pytest.raises(TrainingInterrupted):
        _train(interrupted, Recorder(stop_at=2))
    resumed, notes = Recorder(), []
    _train(interrupted, resumed, resume=True, notes=notes)
    assert "teacher embeddings: cache hit (40 sentences)" in notes
    assert sorted(resumed.losses_by_step) == [3, 4]
    for step in (3, 4):
        assert resumed.losses_by_step[step] == pytest.approx(straight.losses_by_step[step], rel=FLOAT32_RTOL)
    mine = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    theirs = load_file(str(tmp_path / "straight" / "model.safetensors"))
    assert mine.keys() == theirs.keys()
    for key in mine:
        torch.testing.assert_close(mine[key], theirs[key], atol=1e-5, rtol=0, msg=key)
    log = [json.loads(line) for line in (tmp_path / "straight" / "train.log").read_text().splitlines()]
    assert all(record["distill"] > 0 for record in log if "loss" in record)  # the teacher is not the base


def test_the_api_and_the_cli_train_record_cache_resume_and_export(tiny_model_dir: Path, teacher_dir: Path,
                                                                   tmp_path: Path) -> None:
    import sentadapt

    corpus = tmp_path / "own-corpus.txt"  # a corpus no other test encoded: the first run computes
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(40, 72)))
    notes, bars = [], []

    @contextmanager
    def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
        bars.append([description, total, 0])
        yield lambda n: bars[-1].__setitem__(2, bars[-1][2] + n)

    sentadapt.adapt(corpus, output=tmp_path / "first", recipe="consert", base=str(tiny_model_dir), teacher=teacher_dir,
                    dev="none", batch_size=8, max_length=16, max_steps=2, eval_every=0, note=notes.append,
                    progress=progress)
    assert any(note.startswith("teacher embeddings: computed 32 sentences in ") for note in notes), notes
    assert ["encoding with the teacher (once)", 32, 32] in bars
    second = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--teacher",
                       str(teacher_dir), "--dev", "none", "--batch-size", "8", "--max-length", "16", "--max-steps",
                       "2", "--eval-every", "0", "--output", str(tmp_path / "second"))
    assert second.exit_code == 0, second.output
    assert "teacher embeddings: cache hit (32 sentences)" in second.stderr

    records = [json.loads((tmp_path / run / "metrics.json").read_text())["teacher"] for run in ("first", "second")]
    assert records[0]["model"] == str(teacher_dir) and records[0]["dim"] == TEACHER_WIDTH
    assert (records[0]["sentences"], records[0]["cached"], records[1]["cached"]) == (32, False, True)
    assert records[0]["encode_seconds"] > 0 and records[1]["encode_seconds"] == 0
    assert json.loads((tmp_path / "first" / "metrics.json").read_text())["teacher_score"] is None  # no dev set
    assert resumed_config(tmp_path / "first").teacher == str(teacher_dir)  # config.yaml keeps it for --resume

    st = pytest.importorskip("sentence_transformers")
    exported = tmp_path / "st"
    from typer.testing import CliRunner

    from sentadapt.cli import app

    result = CliRunner().invoke(app, ["export", str(tmp_path / "first"), str(exported)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ours = Encoder.load(tmp_path / "first", device="cpu").encode(TINY_SENTENCES)
    theirs = st.SentenceTransformer(str(exported), device="cpu").encode(TINY_SENTENCES, convert_to_tensor=True)
    assert theirs.shape[1] == 32  # the student keeps its own width
    torch.testing.assert_close(theirs.float().cpu(), ours, atol=1e-5, rtol=FLOAT32_RTOL)


@pytest.mark.parametrize(("teacher", "sets", "message"), [
    ("{tmp}/missing", (), "Error: --teacher {tmp}/missing: no such model folder"),
    ("{tmp}", (), "Error: --teacher {tmp}: not a model folder (no config.json or modules.json); pass a Hugging Face "
                  "or sentence-transformers model folder, a sentadapt run directory, or a Hub id"),
    ("{base}/", (), "Error: --teacher {base}/: is the base model itself; a teacher must be another, stronger model"),
    ("{teacher}", ("teacher_weight=0",), "Error: teacher_weight: 0.0 is out of range; valid: (0, inf]"),
    ("{teacher}", ("distill_kind=mse",), "Error: distill_kind: mse compares each vector with the teacher's, which "
                                         "needs equal widths (student 32, teacher 48); use distill_kind=kl"),
])
def test_bad_input_fails_with_one_line(tiny_model_dir: Path, teacher_dir: Path, corpus: Path, tmp_path: Path,
                                       teacher: str, sets: tuple[str, ...], message: str) -> None:
    names = {"tmp": str(tmp_path), "base": str(tiny_model_dir), "teacher": str(teacher_dir)}
    arguments = [str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--teacher",
                 teacher.format(**names), "--output", str(tmp_path / "run"), "--dev", "none", "--batch-size", "8",
                 "--max-length", "16", "--max-steps", "1"]
    for setting in sets:
        arguments += ["--set", setting]
    result = run_adapt(*arguments)
    assert result.exit_code in (1, 2), result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == message.format(**names)
    assert len(lines) == 1 or "mse" in message  # refused before anything loads (mse: once the widths are known)


def test_the_recipe_weight_alone_at_0_is_refused(tiny_model_dir: Path, corpus: Path, tmp_path: Path) -> None:
    result = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--output",
                       str(tmp_path / "run"), "--dev", "none", "--set", "recipe_weight=0")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == ("Error: recipe_weight: 0 leaves nothing to train; give --teacher MODEL or --set "
                                     "distill=W, or a recipe_weight above 0")


def test_a_pair_example_gives_the_teacher_its_first_sentence() -> None:
    """CLSR's examples are pairs of rows of its text table: the teacher encodes each pair's first sentence."""
    from sentadapt.data.batching import RowPairs

    pairs = RowPairs([2, 0, 1], [0, 1, 2], ["x", "y", "z"])
    assert pairs.example_texts(0, 3) == ["z", "x", "y"] and pairs.example_texts(1, 2) == ["x"]
    assert np.array_equal(pairs.collate([1, 2], 0)["a_rows"].numpy(), [0, 1])


def test_a_run_with_a_dev_set_records_the_share_of_the_teachers_lead(tiny_model_dir: Path, teacher_dir: Path,
                                                                     corpus: Path, pairs_tsv: Path,
                                                                     tmp_path: Path) -> None:
    import sentadapt

    run = sentadapt.adapt(corpus, output=tmp_path / "run", recipe="consert", base=str(tiny_model_dir),
                          teacher=teacher_dir, dev=pairs_tsv, batch_size=8, max_length=16, max_steps=2,
                          eval_every=1)
    metrics = run.metrics
    base, best, teacher = metrics["base_score"], metrics["best_score"], metrics["teacher_score"]
    expected = (best - base) / (teacher - base) if teacher > base else None
    assert metrics["teacher_gap_closed"] == pytest.approx(expected) if expected is not None else (
        metrics["teacher_gap_closed"] is None)
    timing = metrics["teacher"]["dev_encode_seconds"]
    # the ratio of the unrounded times; each time is recorded to 0.1 ms (half a unit: 5e-5 s) and the ratio to 1e-3, so
    # on a tiny model's few-ms encodes the recorded times bound it only loosely
    half = 5e-5
    low = (timing["teacher"] - half) / (timing["student"] + half)
    high = (timing["teacher"] + half) / (timing["student"] - half)
    assert low - 5e-4 <= timing["student_speedup"] <= high + 5e-4
    rows = {row.cells[0].text: row.cells[1].text for row in run.summary.rows}
    assert rows["teacher dev"].startswith(f"{teacher:.2f} ({teacher_dir});")
