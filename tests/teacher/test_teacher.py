"""`adapt --teacher MODEL`: a tiny student (32 dims) learns from a tiny teacher of another width (48 dims) and
another vocabulary; the teacher's vectors are computed once, cached, and carried by the batches."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from sentadapt.data.batching import plan_epoch
from sentadapt.model.encoder import Encoder
from sentadapt.run.execute import train_stage, write_config
from sentadapt.run.inputs import build_inputs
from sentadapt.run.plan import resumed_config
from sentadapt.train.distill import TEACHER_VECTORS
from sentadapt.train.loop import Trainer, TrainingInterrupted
from tests.conftest import ASSETS, FLOAT32_RTOL, TINY_SENTENCES, run_adapt, run_config
from tests.train.test_distill import reference_kl
from tests.train.test_train import Recorder

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
    config = dataclasses.replace(config, teacher=str(teacher))
    return config


def _train(config, reporter=None, resume: bool = False, notes: list[str] | None = None):
    if not resume:
        write_config(config)  # as the lifecycle does before training: what `--resume` reads back
    note = notes.append if notes is not None else (lambda _t: None)
    return train_stage(Trainer(build_inputs(config, note), reporter), resume)


def test_the_teacher_tokenizes_for_itself(tiny_model_dir: Path, teacher_dir: Path) -> None:
    student, teacher = Encoder.load(tiny_model_dir, device="cpu"), Encoder.load(teacher_dir, device="cpu")
    assert student.tokenize_ids(["the server"]) != teacher.tokenize_ids(["the server"])
    assert (student.embedding_dim, teacher.embedding_dim) == (32, TEACHER_WIDTH)


def test_the_loss_is_the_kl_of_student_and_cached_teacher_similarities(tiny_model_dir: Path, teacher_dir: Path,
                                                                      corpus: Path, tmp_path: Path) -> None:
    """Step 1's batch: its teacher rows are the cache file's rows of its sentences, and the distill part equals
    teacher_weight × a plain KL of the in-batch softmax distributions, student (as encoded) against teacher;
    with recipe_weight=0 it is the whole loss (the teacher alone) and ConSERT's views are not computed."""
    config = _config(tiny_model_dir, teacher_dir, corpus, tmp_path / "run", ("teacher_weight=2", "recipe_weight=0"))
    trainer = Trainer(build_inputs(config, lambda _t: None))
    trainer._build(resume=False)
    assert trainer.micro_batches is not None
    batch = trainer.micro_batches(0)
    rows = plan_epoch(trainer.micro_batches.lengths, 8, config.train.seed, 0, config.train.length_grouping)[0]
    lines = corpus.read_text().splitlines()
    texts = [lines[row] for row in rows]  # a 40-line corpus of distinct lines: example i is line i

    cached = torch.from_numpy(np.load(trainer.inputs.teacher_table.path))  # a plain .npy in the cache
    assert cached.shape == (40, TEACHER_WIDTH)
    torch.testing.assert_close(batch[TEACHER_VECTORS], cached[torch.as_tensor(rows)], rtol=0, atol=0)
    teacher = Encoder.load(teacher_dir, device="cpu").encode(texts)
    torch.testing.assert_close(batch[TEACHER_VECTORS], teacher, rtol=FLOAT32_RTOL, atol=1e-5)

    trainer.module.train()
    batch = {key: value.to(trainer.accelerator.device) for key, value in batch.items()}
    output = trainer.module(batch)
    ours = output.parts["distill"].item()
    student = trainer.inputs.encoder.encode(texts)  # eval mode, the export pooling: what the student is
    plain = 2 * reference_kl(student.double(), teacher.double(), config.train.distillation.distill_temperature).item()
    assert ours == pytest.approx(plain, rel=FLOAT32_RTOL) and plain > 1e-3
    assert output.total.item() == ours and "contrastive" not in output.parts  # recipe_weight 0: no views computed


def test_the_teacher_is_scored_with_the_runs_dev_evaluator(tiny_model_dir: Path, teacher_dir: Path, corpus: Path,
                                                            pairs_tsv: Path, tmp_path: Path) -> None:
    config = run_config("consert", tiny_model_dir, corpus, tmp_path / "run", FLAGS, [], dev=str(pairs_tsv))
    config = dataclasses.replace(config, teacher=str(teacher_dir))
    inputs = build_inputs(config, lambda _t: None)
    expected = inputs.evaluator(Encoder.load(teacher_dir, device="cpu"), intervals=False).average
    assert inputs.teacher_table.score == pytest.approx(expected, rel=FLOAT32_RTOL)
    student, teacher = inputs.teacher_table.dev_encode_seconds  # both timed on the dev sentences
    assert student > 0 and teacher > 0 and inputs.teacher_table.speedup == pytest.approx(teacher / student)
    blind = build_inputs(_config(tiny_model_dir, teacher_dir, corpus, tmp_path / "blind"), lambda _t: None)
    assert blind.teacher_table.score is None and blind.teacher_table.dev_encode_seconds is None


def test_the_share_of_the_teachers_lead_and_the_summary_line() -> None:
    from sentadapt.run.summary import teacher_text
    from sentadapt.teacher.table import TeacherTable

    ahead = TeacherTable(torch.zeros(1, 4), "big-model", "/m", False, 1.0, "t.safetensors", 84.0, (1.0, 2.5))
    assert ahead.gap_closed(82.0, 83.5) == pytest.approx(0.75)  # (83.5 − 82) / (84 − 82)
    assert teacher_text(ahead, 82.0, 83.5) == ("84.00 (big-model); the student keeps 75 % of its +2.00 over the "
                                               "base at 2.5× its encode speed")
    # a student that lost ground: what it scored, not a negative share ("keeps -50 %")
    assert teacher_text(ahead, 82.0, 81.0) == ("84.00 (big-model); none of its +2.00 over the base reached the "
                                               "student (-1.00; the student encodes 2.5× as fast)")
    assert teacher_text(ahead, 82.0, 82.0) == ("84.00 (big-model); none of its +2.00 over the base reached the "
                                               "student (+0.00; the student encodes 2.5× as fast)")
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


@pytest.mark.parametrize(("teacher", "sets", "code", "message"), [
    ("{tmp}/missing", (), 1, "Error: --teacher {tmp}/missing: no such model folder"),
    ("{tmp}", (), 1, "Error: --teacher {tmp}: not a model folder (no config.json or modules.json); pass a Hugging Face "
                  "or sentence-transformers model folder, a sentadapt run directory, or a Hub id"),
    ("{base}/", (), 2, "Error: --teacher {base}/: is the base model itself; a teacher must be another, stronger model"),
    ("{teacher}", ("teacher_weight=0",), 2, "Error: teacher_weight: 0.0 is out of range; valid: (0, inf]"),
    ("{tmp}/vectors.jsonl", (), 1, "Error: --teacher {tmp}/vectors.jsonl: no such file; give a model (folder or Hub "
                                "id) or a vectors file: .jsonl or .json (JSON Lines, or one JSON array, of "
                                '{{"text", "embedding"}} objects; gzipped as .jsonl.gz / .json.gz), .parquet (the '
                                "same two columns), or .npy with a .txt of its sentences beside it"),
    ("{teacher}", ("teacher_check=maybe",), 2, "Error: teacher_check: 'maybe' is not one of on, off"),
])
def test_bad_input_fails_with_one_line(tiny_model_dir: Path, teacher_dir: Path, corpus: Path, tmp_path: Path,
                                       teacher: str, sets: tuple[str, ...], code: int, message: str) -> None:
    names = {"tmp": str(tmp_path), "base": str(tiny_model_dir), "teacher": str(teacher_dir)}
    arguments = [str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--teacher",
                 teacher.format(**names), "--output", str(tmp_path / "run"), "--dev", "none", "--batch-size", "8",
                 "--max-length", "16", "--max-steps", "1"]
    for setting in sets:
        arguments += ["--set", setting]
    result = run_adapt(*arguments)
    assert result.exit_code == code, result.output  # 1: a file or model error, 2: a bad option
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == message.format(**names)
    assert len(lines) == 1  # refused before anything loads


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


# ---------------------------------------------------------------------- vector kinds: a projection, training-only

@pytest.mark.parametrize("kind", ["mse", "cosine"])
def test_vector_kinds_reach_a_wider_teacher_through_a_projection_that_is_never_exported(
        tiny_model_dir: Path, teacher_dir: Path, corpus: Path, tmp_path: Path, kind: str) -> None:
    """Student 32 wide, teacher 48: the projection starts at the least-squares fit on the base's vectors, trains
    with the student, is in the checkpoints (exact resume) and not in the saved model."""
    from sentadapt.train.distill import fitted_projection

    config = _config(tiny_model_dir, teacher_dir, corpus, tmp_path / "run", (f"distill_kind={kind}",), max_steps=2)
    result = _train(config)
    projection = result.output / "checkpoints"
    saved = load_file(str(next(projection.iterdir()) / "model.safetensors"))
    assert saved["projection.weight"].shape == (TEACHER_WIDTH, 32)
    exported = load_file(str(result.output / "model.safetensors"))
    assert not any("projection" in key for key in exported)
    # the start: W = argmin ‖S W − T‖² + 1e-3 ‖W‖², checked against numpy's least squares on the same rows
    student = torch.randn(20, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    teacher = torch.randn(20, TEACHER_WIDTH, generator=torch.Generator().manual_seed(1))
    from sentadapt.train.distill import TeacherTargets

    fitted = fitted_projection(lambda n: student[:n], TeacherTargets(teacher), 32).weight.detach().double().numpy()
    ridge = np.vstack([student.numpy(), np.sqrt(1e-3) * np.eye(32)])
    target = np.vstack([teacher.double().numpy(), np.zeros((32, TEACHER_WIDTH))])
    expected = np.linalg.lstsq(ridge, target, rcond=None)[0].T
    np.testing.assert_allclose(fitted, expected, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- --teacher FILE: vectors the user has

def _teacher_vectors(teacher_dir: Path, corpus: Path) -> tuple[list[str], np.ndarray]:
    lines = corpus.read_text().splitlines()
    return lines, Encoder.load(teacher_dir, device="cpu").encode(lines, max_length=16).numpy()


def _write_vectors(kind: str, folder: Path, texts: list[str], vectors: np.ndarray) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "npy":
        np.save(folder / "teacher.npy", vectors)
        (folder / "teacher.txt").write_text("\n".join(texts) + "\n")
        return folder / "teacher.npy"
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": texts, "embedding": [list(map(float, row)) for row in vectors]}),
                       folder / "teacher.parquet")
        return folder / "teacher.parquet"
    path = folder / "teacher.jsonl"
    path.write_text("".join(json.dumps({"text": text, "embedding": [float(v) for v in row]}) + "\n"
                            for text, row in zip(texts, vectors)))
    return path


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "npy"])
def test_a_vectors_file_gives_the_losses_of_the_model_it_came_from(tiny_model_dir: Path, teacher_dir: Path,
                                                                  corpus: Path, tmp_path: Path, kind: str) -> None:
    texts, vectors = _teacher_vectors(teacher_dir, corpus)
    path = _write_vectors(kind, tmp_path / "file", texts[::-1], vectors[::-1])  # any order: looked up by text
    from_model, from_file = Recorder(), Recorder()
    _train(_config(tiny_model_dir, teacher_dir, corpus, tmp_path / "model", max_steps=3), from_model)
    _train(_config(tiny_model_dir, path, corpus, tmp_path / "vectors", max_steps=3), from_file)
    assert sorted(from_file.losses_by_step) == [1, 2, 3]
    for step, loss in from_model.losses_by_step.items():
        assert from_file.losses_by_step[step] == pytest.approx(loss, rel=1e-5), step


@pytest.mark.parametrize(("case", "message"), [
    ("missing", "Error: {path}: no vector for 2 of the 40 training sentences, the first '{first}'; add their vectors "
                "to the file (every sentence of the corpus as adapt reads it)"),
    ("nan", "Error: {path}:3: the vector holds NaN or infinity; recompute it or leave that sentence out of the "
            "corpus"),
    ("widths", "Error: {path}:2: a vector of 47 values, but the first has 48; every vector must have the same "
               "width"),
    ("fields", "Error: {path}:1: expected a JSON object with \"text\" (a string) and \"embedding\" (a list of "
               "numbers); name other fields with --set teacher_text_field=NAME --set teacher_vector_field=NAME"),
    ("npy-no-txt", "Error: {path}: no teacher.txt beside it; a .npy of vectors needs its sentences, one per line, "
                   "row i of the matrix the vector of line i"),
])
def test_a_bad_vectors_file_is_one_line(tiny_model_dir: Path, teacher_dir: Path, corpus: Path, tmp_path: Path,
                                        case: str, message: str) -> None:
    texts, vectors = _teacher_vectors(teacher_dir, corpus)
    if case == "missing":
        path = _write_vectors("jsonl", tmp_path / "file", texts[2:], vectors[2:])
    elif case == "nan":
        vectors[2, 5] = np.nan
        path = _write_vectors("jsonl", tmp_path / "file", texts, vectors)
    elif case == "widths":
        path = _write_vectors("jsonl", tmp_path / "file", texts, vectors)
        lines = path.read_text().splitlines()
        record = json.loads(lines[1])
        record["embedding"] = record["embedding"][:-1]
        lines[1] = json.dumps(record)
        path.write_text("\n".join(lines) + "\n")
    elif case == "fields":
        path = tmp_path / "file" / "teacher.jsonl"
        path.parent.mkdir()
        path.write_text(json.dumps({"sentence": texts[0], "vector": [0.0]}) + "\n")
    else:
        path = _write_vectors("npy", tmp_path / "file", texts, vectors)
        (tmp_path / "file" / "teacher.txt").unlink()
    result = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--teacher", str(path),
                       "--output", str(tmp_path / "run"), "--dev", "none", "--batch-size", "8", "--max-length", "16",
                       "--max-steps", "1")
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1] == message.format(path=path, first=texts[0])
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------- weighing the teacher before training

def test_the_teacher_is_weighed_against_the_base_before_training(tiny_model_dir: Path, teacher_dir: Path,
                                                                 corpus: Path, pairs_tsv: Path,
                                                                 tmp_path: Path) -> None:
    """One line with both dev scores, the lead and its paired CI; the base is scored once (the loop reuses it)."""
    config = run_config("consert", tiny_model_dir, corpus, tmp_path / "run", FLAGS, [], dev=str(pairs_tsv))
    config = dataclasses.replace(config, teacher=str(teacher_dir))
    notes: list[str] = []
    inputs = build_inputs(config, notes.append)
    base = inputs.evaluator(Encoder.load(tiny_model_dir, device="cpu"), intervals=False).average
    assert inputs.base_dev is not None and inputs.base_dev[0] == pytest.approx(base, rel=FLOAT32_RTOL)
    lead = inputs.teacher_table.lead
    assert lead.value == pytest.approx(inputs.teacher_table.score - base, rel=1e-6, abs=1e-9)
    (line,) = [note for note in notes if note.startswith("teacher ") and "on the dev set" in note]
    low, high = lead.interval
    assert line.startswith(f"teacher {teacher_dir} on the dev set: {inputs.teacher_table.score:.2f} vs the base's "
                           f"{base:.2f}, {lead.value:+.2f} [95 % CI {low:+.2f}, {high:+.2f}] over ")


@pytest.mark.parametrize(("interval", "verdict"), [
    ((0.5, 2.0), "it leads; distilling it can carry that lead over"),
    ((-2.0, -0.5), "it trails on these pairs"),
    ((-0.5, 2.0), "it may lead, the dev set cannot tell; the run decides on dev whether the student keeps a gain"),
])
def test_the_verdict_says_what_the_lead_means(interval: tuple[float, float], verdict: str) -> None:
    from sentadapt.evaluation.evaluator import Delta
    from sentadapt.teacher.table import teacher_verdict

    value = sum(interval) / 2
    line = teacher_verdict("big", 84.0, 84.0 - value, Delta(value, interval), 100, "pairs")
    assert line.endswith(verdict), line
    assert line.startswith(f"teacher big on the dev set: 84.00 vs the base's {84.0 - value:.2f}, {value:+.2f} "
                           f"[95 % CI {interval[0]:+.2f}, {interval[1]:+.2f}] over 100 pairs: ")


def test_a_teacher_that_trails_on_dev_stops_before_training(tiny_model_dir: Path, teacher_dir: Path, corpus: Path,
                                                            pairs_tsv: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The base scores itself as the teacher: the teacher is made to trail by the paired CI of its outputs."""
    from sentadapt.evaluation.evaluator import Delta, Evaluator

    monkeypatch.setattr(Evaluator, "compare_outputs", lambda self, a, b: Delta(-3.0, (-5.0, -1.0)))
    result = run_adapt(str(corpus), "--recipe", "consert", "--base", str(tiny_model_dir), "--teacher",
                       str(teacher_dir), "--output", str(tmp_path / "run"), "--dev", str(pairs_tsv), "--batch-size",
                       "8", "--max-length", "16", "--max-steps", "1")
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: teacher {teacher_dir} on the dev set: ")
    assert last.endswith("-3.00 [95 % CI -5.00, -1.00] over 8 pairs: it trails on these pairs; stopped before "
                         "training. Pick a stronger teacher, or --set teacher_check=off to distil it anyway (a student "
                         "can still gain: docs/teacher.md)")
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert "teacher embeddings" not in result.output  # stopped before the corpus was encoded


# ---------------------------------------------------------------------- a teacher run's length and defaults

@pytest.mark.parametrize(("examples", "passes"), [(2_701, 4.0), (8_297, 20_000 / 8_297), (100_000, 1.0)])
def test_the_passes_follow_the_corpus_size(tiny_model_dir: Path, corpus: Path, tmp_path: Path, examples: int,
                                           passes: float) -> None:
    from sentadapt.train.steps import eval_interval, passes_for, total_steps_for

    config = run_config("consert", tiny_model_dir, corpus, tmp_path, {"batch_size": 64}, ["min_examples=20000",
                                                                                          "evals_per_pass=1"])
    assert passes_for(examples, config) == pytest.approx(passes)
    per_pass = examples // 64
    assert total_steps_for(examples, config) == math.ceil(passes * per_pass)
    assert eval_interval(examples, config) == per_pass  # one evaluation per pass
    plain = run_config("consert", tiny_model_dir, corpus, tmp_path, {"batch_size": 64, "eval_every": 7}, [])
    assert passes_for(examples, plain) == 1.0 and eval_interval(examples, plain) == 7  # off: epochs, eval_every


def test_a_teacher_brings_its_defaults_above_the_preset_and_below_the_flags(tiny_model_dir: Path, teacher_dir: Path,
                                                                           corpus: Path, tmp_path: Path) -> None:
    from sentadapt.config.schema import flat_values
    from sentadapt.recipes.presets import TEACHER_DEFAULTS
    from sentadapt.run.plan import Settings, new_config

    def config(**flags: object):
        return new_config(Settings(corpus=(str(corpus),), output=tmp_path / "run", recipe="consert",
                                   base=str(tiny_model_dir), flags={**flags, "teacher": str(teacher_dir)}))

    defaults = config()
    for key, value in TEACHER_DEFAULTS.items():
        assert flat_values(defaults.train)[key] == value, key
    assert defaults.preset["reason"].endswith("; --teacher: the distillation defaults")
    assert config(lr=3e-4).train.lr == 3e-4  # a flag still wins
    # ConSERT's own teacher default (ConsertRecipe.spec.teacher_defaults), above TEACHER_DEFAULTS and below a flag
    assert defaults.train.mixed_precision == "auto" and defaults.preset["values"]["mixed_precision"] == "auto"
    assert config(mixed_precision="no").train.mixed_precision == "no"



def test_an_eval_every_or_epochs_given_turns_off_the_teacher_run_s_value_that_would_override_it(
        tiny_model_dir: Path, teacher_dir: Path, corpus: Path, tmp_path: Path) -> None:
    """`--eval-every 5` on a teacher run evaluates every 5 steps and `--epochs 1` trains one pass: the teacher
    defaults' evals_per_pass (which replaces eval_every) and min_examples (which makes epochs a floor) give way, and
    the dry run says why. A value given for them stays as given."""
    from sentadapt.run.plan import Settings, new_config
    from sentadapt.run.summary import preset_lines
    from sentadapt.train.steps import eval_interval, passes_for

    def config(set_options: tuple[str, ...] = (), **flags: object):
        return new_config(Settings(corpus=(str(corpus),), output=tmp_path / "run", recipe="consert",
                                   base=str(tiny_model_dir), set_options=set_options,
                                   flags={**flags, "teacher": str(teacher_dir)}))

    defaults = config()
    assert eval_interval(2_701, defaults) == 2_701 // 64 and passes_for(2_701, defaults) == 4.0
    every = config(eval_every=5)
    assert (every.train.evaluation.evals_per_pass, eval_interval(2_701, every)) == (0.0, 5)
    assert every.sources["train.evals_per_pass"] == "off: eval_every given (flag)"
    assert "preset paper: evals_per_pass 0.0 → 1.0 (off: eval_every given (flag))" in preset_lines(every)
    assert every.train.min_examples == 20_000  # epochs not given: the length still follows the corpus
    one_pass = config(set_options=("epochs=1",))
    assert (one_pass.train.min_examples, passes_for(2_701, one_pass)) == (0, 1.0)
    assert one_pass.sources["train.min_examples"] == "off: epochs given (--set)"
    both = config(set_options=("evals_per_pass=2",), eval_every=5)  # evals_per_pass given too: it wins, as documented
    assert (both.train.evaluation.evals_per_pass, both.sources["train.evals_per_pass"]) == (2.0, "--set")


def test_only_consert_s_teacher_run_defaults_to_auto_precision() -> None:
    """The bf16 default was measured on ConSERT teacher runs alone (research/findings.md, "A faster teacher run"):
    SG-OPT with a teacher, and any run without one, keep fp32."""
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.presets import Preset, with_teacher

    plain = Preset("tuned-base", "test")
    assert with_teacher(plain, RECIPES.get("consert")).values["mixed_precision"] == "auto"
    assert "mixed_precision" not in with_teacher(plain, RECIPES.get("sg-opt")).values
    assert with_teacher(plain, RECIPES.get("clsr")) == plain  # CLSR keeps its own defaults


def test_the_summary_reports_passes_the_term_and_the_dev_curve() -> None:
    from types import SimpleNamespace

    from sentadapt.run.summary import dev_curve, distillation_rows

    state = SimpleNamespace(distill_first=0.3391, distill_last=0.2139, distill_logged=20, history=[
        {"step": 0, "dev": 84.97}, {"step": 42, "dev": 85.46}, {"step": 84, "dev": 86.05}])
    result = SimpleNamespace(state=state, passes=2.0, examples=2701)
    assert distillation_rows(result) == [
        ("distillation", "2.0 passes over 2701 examples; term 0.3391 over the first 10 % of steps → 0.2139 over the "
                         "last 10 %"),
        ("dev curve", "84.97 → 85.46 (s42) → 86.05 (s84)")]
    long = [{"step": 10 * i, "dev": float(i)} for i in range(12)]
    assert dev_curve(long, most=4) == "0.00 → … → 9.00 (s90) → 10.00 (s100) → 11.00 (s110)"
    assert distillation_rows(SimpleNamespace(state=SimpleNamespace(distill_first=None))) == []


def test_a_parquet_vector_of_another_width_or_null_is_one_line(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sentadapt.data.vectors import read_vectors
    from sentadapt.errors import DataError

    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"text": ["a", "b", "c"], "embedding": [[1.0, 2.0], [1.0, 2.0], [1.0]]}), path)
    with pytest.raises(DataError) as error:
        read_vectors(path)
    assert str(error.value) == (f"{path}: row 3: a vector of 1 values, but row 1 has 2; every vector must have the "
                                "same width")
    pq.write_table(pa.table({"text": ["a", "b"], "embedding": [[1.0, 2.0], None]}), path)
    with pytest.raises(DataError) as error:
        read_vectors(path)
    assert str(error.value) == (f"{path}: row 2: no vector (null), but row 1 has 2; every vector must have the same "
                                "width")
    pq.write_table(pa.table({"text": ["a", "b"], "embedding": [[1.0, 2.0], [0.5, 0.25]]}), path)
    vectors = read_vectors(path)
    np.testing.assert_array_equal(vectors.lookup(["b", "a"]), [[0.5, 0.25], [1.0, 2.0]])


def test_the_distillation_term_is_averaged_over_the_first_and_last_tenth_of_the_steps(tmp_path: Path) -> None:
    """One batch at each end made every run look diverged (0.22 → 0.58); 10 % of 100 steps logged every 5 are
    steps 5 and 10 at the start and 95 and 100 at the end."""
    from sentadapt.train.tracking import TrainLog

    log = TrainLog(tmp_path / "train.log")
    for step in [1, *range(5, 101, 5)]:
        log.append({"step": step, "loss": 1.0, "distill": 0.9 if step == 1 else step / 100, "lr": 0.0})
    log.append({"step": 100, "dev": 80.0})  # an evaluation line: not a step's losses
    assert log.ends("distill") == pytest.approx(((0.9 + 0.05 + 0.10) / 3, (0.95 + 1.0) / 2))
    assert TrainLog(tmp_path / "none.log").ends("distill") is None


def test_vectors_texts_match_after_the_corpus_readers_normalisation(tmp_path: Path) -> None:
    """A .txt saved on Windows (CRLF) or texts with a trailing newline or spaces match the corpus's sentences."""
    from sentadapt.data.vectors import read_vectors

    np.save(tmp_path / "v.npy", np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    (tmp_path / "v.txt").write_bytes(b"the server is down\r\nreboot it \r\n")
    vectors = read_vectors(tmp_path / "v.npy")
    assert vectors.missing(["the server is down", "reboot it"]) == []
    np.testing.assert_array_equal(vectors.lookup(["reboot it", " the server is down"]), [[0.0, 1.0], [1.0, 0.0]])
    path = tmp_path / "v.jsonl"
    path.write_text('{"text": "reboot it\\n", "embedding": [0.5, 0.5]}\n')
    assert read_vectors(path).missing(["reboot it"]) == []


@pytest.mark.parametrize("name", ["v.json", "v.jsonl.gz", "v.json.gz", "v-array.json"])
def test_vectors_in_json_gzipped_json_lines_or_one_json_array_are_read(name: str, tmp_path: Path) -> None:
    import gzip

    from sentadapt.data.vectors import read_vectors

    records = [{"text": "a", "embedding": [1.0, 2.0]}, {"text": "b", "embedding": [3.0, 4.0]}]
    text = json.dumps(records) if "array" in name else "".join(json.dumps(r) + "\n" for r in records)
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    np.testing.assert_array_equal(read_vectors(path).lookup(["b", "a"]), [[3.0, 4.0], [1.0, 2.0]])


@pytest.mark.parametrize(("lines", "message"), [
    (['{"text": "a", "embedding": [1, 2]}', '{"text": "a ", "embedding": [2, 1]}'],
     "{path}: line 2 gives 'a' another vector than line 1; keep one vector per sentence (texts are compared "
     "without surrounding whitespace)"),
    (['{"text": "a", "embedding": [1, 2]}', '{"text": "b", "embedding": [0, 0]}'],
     "{path}: line 2: an all-zero vector has no direction (its cosine with anything is undefined); recompute it or "
     "leave that sentence out of the corpus"),
])
def test_conflicting_duplicates_and_zero_vectors_are_one_line(lines: list[str], message: str,
                                                              tmp_path: Path) -> None:
    from sentadapt.data.vectors import read_vectors
    from sentadapt.errors import DataError

    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as error:
        read_vectors(path)
    assert str(error.value) == message.format(path=path)


def test_a_teacher_file_of_an_unknown_format_names_the_accepted_ones(tiny_model_dir: Path, corpus: Path,
                                                                     tmp_path: Path) -> None:
    vectors = tmp_path / "vectors.csv"
    vectors.write_text("text,embedding\n")
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--teacher", str(vectors), "--output",
                       str(tmp_path / "run"), "--max-steps", "1")
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (
        f"Error: --teacher {vectors}: a file, but not one sentadapt reads as vectors; accepted: .jsonl or .json "
        '(JSON Lines, or one JSON array, of {"text", "embedding"} objects; gzipped as .jsonl.gz / .json.gz), '
        ".parquet (the same two columns), or .npy with a .txt of its sentences beside it")
    assert not (tmp_path / "run").exists()


def test_processes_build_one_table_together_each_encoding_its_share(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes (threads here, a barrier between them): each encodes every other block, rank 0 joins the parts
    in block order; the table is byte for byte the one-process table and no part file is left."""
    import threading

    import sentadapt.model.embedding_cache as cache
    from sentadapt.model.embedding_cache import Processes

    monkeypatch.setenv("SENTADAPT_CACHE", str(tmp_path / "cache"))
    texts = [f"sentence {i}" for i in range(1000)]
    encoded: dict[int, int] = {0: 0, 1: 0}

    def vectors_of(rank: int):
        def encode(block: list[str], _advance) -> np.ndarray:
            encoded[rank] += len(block)
            return np.array([[float(t.split()[1]), len(t)] for t in block], dtype=np.float32)
        return encode

    def digest():
        import hashlib
        return hashlib.sha256(b"test-table")

    single = cache._table(digest(), lambda a, b: texts[a:b], len(texts), 2, 64, vectors_of(0))
    expected = single.path.read_bytes()
    single.path.unlink()
    encoded[0] = 0
    barrier = threading.Barrier(2)
    results: dict[int, object] = {}

    def build(rank: int) -> None:
        results[rank] = cache._table(digest(), lambda a, b: texts[a:b], len(texts), 2, 64, vectors_of(rank),
                                     processes=Processes(rank, 2, barrier.wait))

    threads = [threading.Thread(target=build, args=(rank,)) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert encoded == {0: 512, 1: 488}  # 16 blocks of 64 (the last 40): 8 each
    assert single.path.read_bytes() == expected
    assert [p.name for p in single.path.parent.iterdir() if ".part-" in p.name or p.name.startswith(".tmp")] == []
    assert all(not result.hit for result in results.values())


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo")
def test_two_processes_build_the_teacher_table_once_and_train_as_one(tiny_model_dir: Path, teacher_dir: Path,
                                                                     corpus: Path, tmp_path: Path) -> None:
    """torchrun with 2 CPU processes: one table, byte for byte the one-process run's, no part left behind, and
    the same losses (deterministic views, so only the gather could differ). The loss is kl plus a cosine term: the kl
    term's gathered similarities, and the student reaching the wider teacher through a projection trained on each
    rank's own rows (a gradient counted twice would show from the second step on), in one run of each."""
    kind = "kl:1,cosine:5"
    from tests.conftest import FLOAT32_RTOL, run_checked

    common = [str(corpus), "--base", str(tiny_model_dir), "--teacher", str(teacher_dir), "--batch-size", "8",
              "--max-steps", "3", "--max-length", "16", "--lr", "1e-3", "--dev", "none", "--set", "views=none,none",
              "--set", "log_every=1", "--set", "distill_batches=random", "--checkpoint-every", "0",
              "--set", f"distill_kind={kind}",
              "--mixed-precision", "no"]  # float32 equality: the teacher run's bf16 default would round the gather
    runs = {}
    for name, launcher in (("single", [sys.executable, "-m", "sentadapt"]),
                           ("double", [str(Path(sys.executable).parent / "torchrun"), "--standalone",
                                       "--local-addr", "127.0.0.1", "--nproc_per_node", "2", "-m", "sentadapt"])):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1",
               "SENTADAPT_CACHE": str(tmp_path / f"cache-{name}")}
        run_checked([*launcher, "adapt", *common, "--output", str(tmp_path / name)], env)
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())
        records = [json.loads(line) for line in (tmp_path / name / "train.log").read_text().splitlines()]
        runs[name] = (Path(metrics["teacher"]["cache_file"]), [r["loss"] for r in records if "loss" in r])
    (single_table, single_losses), (double_table, double_losses) = runs["single"], runs["double"]
    assert double_table.read_bytes() == single_table.read_bytes()
    assert [p.name for p in double_table.parent.iterdir() if ".part-" in p.name] == []
    assert len(single_losses) == 3 and double_losses == pytest.approx(single_losses, rel=FLOAT32_RTOL)


def test_a_blend_target_is_the_weighted_sum_of_the_two_similarity_structures() -> None:
    from sentadapt.recipes.losses import blended_cosines, distillation_kl, distillation_sim_mse

    generator = torch.Generator().manual_seed(0)
    student, teacher, base = (torch.randn(6, width, generator=generator) for width in (4, 8, 4))
    unit = torch.nn.functional.normalize
    cos = {name: unit(v, dim=1) @ unit(v, dim=1).T for name, v in (("teacher", teacher), ("base", base))}
    blend = blended_cosines(teacher, base, 0.25)
    torch.testing.assert_close(blend, 0.25 * cos["teacher"] + 0.75 * cos["base"])
    alone = distillation_kl(student, teacher, 0.05)
    assert distillation_kl(student, teacher, 0.05, blended_cosines(teacher, base, 1.0)) == pytest.approx(
        alone.item(), rel=1e-6)
    assert distillation_kl(base, teacher, 0.05, blended_cosines(teacher, base, 0.0)).item() == pytest.approx(
        0.0, abs=1e-6)  # the blend at α 0 is the base's own structure
    assert distillation_sim_mse(student, teacher, blend).item() == pytest.approx(
        ((unit(student, dim=1) @ unit(student, dim=1).T - blend)[~torch.eye(6, dtype=torch.bool)] ** 2).mean().item(),
        rel=1e-6)


def test_auto_picks_the_best_blend_on_dev_and_the_larger_alpha_within_the_tie_margin(tmp_path: Path) -> None:
    from sentadapt.teacher.table import choose_blend
    from tests.conftest import sts_dev_evaluator

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 300)
    evaluator = sts_dev_evaluator(tmp_path, gold)
    task = evaluator.tasks[0].name
    # two models that each see half of the signal: their blend ranks the pairs better than either
    noise_t, noise_b = rng.normal(size=300), rng.normal(size=300)
    teacher = {task: {"cosine": (gold + 3 * noise_t).tolist()}}
    base = {task: {"cosine": (gold + 3 * noise_b).tolist()}}
    alpha, scores = choose_blend(evaluator, base, teacher)
    assert list(scores) == ["0.25", "0.5", "0.75", "1"]
    best = max(scores.values())
    assert alpha == max(a for a in (0.25, 0.5, 0.75, 1.0) if scores[f"{a:g}"] >= best - 0.05)
    assert alpha < 1 and scores[f"{alpha:g}"] > scores["1"]
    assert choose_blend(evaluator, {task: {"score": [1.0]}}, teacher) == (1.0, {})  # not pair cosines


@pytest.mark.parametrize(("sets", "message"), [
    (("teacher_blend=half",), "teacher_blend: 'half' is not auto or a number in [0, 1] (the teacher's weight in the "
                              "target's similarities)"),
    (("teacher_blend=1.5",), "teacher_blend: 1.5 is out of range; valid: [0, 1]"),
    (("teacher_blend=0.5", "distill_kind=mse"), "teacher_blend: blends the teacher's and the base's similarities, "
                                                "which distill_kind mse does not compare; use distill_kind=kl or "
                                                "sim-mse, or drop teacher_blend"),
])
def test_a_bad_blend_is_one_line(sets: tuple[str, ...], message: str, tiny_model_dir: Path, corpus: Path,
                                 tmp_path: Path) -> None:
    options = [item for key in sets for item in ("--set", key)]
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), *options)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"Error: {message}"


def test_a_blend_run_learns_another_target_and_records_it(tiny_model_dir: Path, teacher_dir: Path, corpus: Path,
                                                         tmp_path: Path) -> None:
    losses = {}
    for alpha in ("1", "0.5"):
        output = tmp_path / f"blend-{alpha}"
        config = _config(tiny_model_dir, teacher_dir, corpus, output, ("distill_batches=random",
                                                                        f"teacher_blend={alpha}"), max_steps=1)
        _train(config)
        losses[alpha] = json.loads((output / "train.log").read_text().splitlines()[0])["distill"]
        assert json.loads((output / "metrics.json").read_text())["teacher"]["blend"] == float(alpha)
    assert losses["0.5"] != pytest.approx(losses["1"], rel=1e-3)
