"""The memory-mapped corpus cache (`sentadapt.data.prepare`) and batching from it.

The in-memory path it replaced (Python lists of token ids, a per-window `sorted`) lives on here only as a
reference: the same seed must give the same batches and the same step-by-step losses.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from sentadapt.data.batching import GROUPING_WINDOW, TokenizedExamples, plan_epoch
from sentadapt.data.cache_contents import cache_entries
from sentadapt.data.corpus import read_corpus
from sentadapt.data.nli import read_nli
from sentadapt.data.prepare import (
    COMPLETE,
    corpora_dir,
    prepare_nli,
    prepare_sentences,
    tokenizer_fingerprint,
)
from sentadapt.errors import ConfigError, DataError
from sentadapt.model.encoder import Encoder, pad_batch
from tests.conftest import ASSETS, run_adapt, run_config

REPO = Path(__file__).resolve().parents[2]
WORDS = ["the", "a", "man", "server", "database", "disk", "network", "error", "failed", "job", "backup", "dns",
         "restart", "deploy", "playing", "guitar", "music", "cooking", "running", "fast", "red", "car", "user"]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SENTADAPT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def corpus_file(path: Path, lines: int = 300, seed: int = 0) -> Path:
    """Random sentences with repeats, blank lines and a few long lines (truncated at max length 16)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(lines):
        roll = rng.random()
        if roll < 0.05:
            rows.append("   ")
        elif roll < 0.15 and rows:
            rows.append(rng.choice(rows))  # a duplicate
        else:
            rows.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 20 if roll > 0.9 else 10))))
    path.write_text("\n".join(rows) + "\n")
    return path


# ------------------------------------------------------------------------------ the reference (old) path


class InMemoryExamples:
    """The replaced in-memory TokenizedExamples, verbatim in behaviour: lists of token-id lists."""

    def __init__(self, columns: list[list[list[int]]], labels: list[int] | None = None) -> None:
        self.columns, self.labels = columns, labels

    def __len__(self) -> int:
        return len(self.columns[0])

    def lengths(self) -> list[int]:
        return [max(len(column[i]) for column in self.columns) for i in range(len(self))]

    def collate(self, indices: list[int], pad_id: int, multiple: int = 1) -> dict[str, torch.Tensor]:
        assert multiple == 1, "the in-memory reference pads to the longest only (the CPU's pad_multiple)"
        indices = [int(i) for i in indices]
        if len(self.columns) == 1:
            padded = pad_batch([self.columns[0][i] for i in indices], pad_id)
            return {"input_ids": padded.input_ids, "attention_mask": padded.attention_mask}
        batch: dict[str, torch.Tensor] = {}
        for side, column in zip("ab", self.columns):
            padded = pad_batch([column[i] for i in indices], pad_id)
            batch[f"{side}_input_ids"], batch[f"{side}_attention_mask"] = padded.input_ids, padded.attention_mask
        if self.labels is not None:
            batch["labels"] = torch.tensor([self.labels[i] for i in indices], dtype=torch.long)
        return batch


def in_memory_plan_epoch(lengths: list[int], global_batch: int, seed: int, epoch: int,
                         group_by_length: bool) -> list[list[int]]:
    """The replaced list-based plan_epoch."""
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(len(lengths), generator=generator).tolist()
    usable = len(order) - len(order) % global_batch
    order = order[:usable]
    if group_by_length:
        window = global_batch * GROUPING_WINDOW
        order = [i for start in range(0, usable, window)
                 for i in sorted(order[start:start + window], key=lambda i: -lengths[i])]
    batches = [order[start:start + global_batch] for start in range(0, usable, global_batch)]
    if group_by_length:
        shuffled = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in shuffled]
    return batches


# ------------------------------------------------------------------------------------------- batching


@pytest.mark.parametrize("size,batch", [(1000, 16), (5003, 8), (70_001, 64)])
def test_vectorised_plan_equals_the_list_plan(size: int, batch: int) -> None:
    lengths = np.random.default_rng(size).integers(3, 12, size)  # many ties: the sort must be stable
    for seed, epoch, grouped in [(0, 0, True), (7, 3, True), (1, 0, False)]:
        new = plan_epoch(lengths, batch, seed, epoch, grouped)
        assert new.tolist() == in_memory_plan_epoch(lengths.tolist(), batch, seed, epoch, grouped)


def test_same_sentences_token_ids_batches_and_losses_as_the_in_memory_path(tiny_model_dir: Path,
                                                                           tmp_path: Path) -> None:
    from sentadapt.run.inputs import build_inputs
    from sentadapt.train.loop import Trainer

    corpus = corpus_file(tmp_path / "corpus.txt", 400)
    flags = {"batch_size": 16, "max_length": 16, "max_steps": 4, "eval_every": 0, "checkpoint_every": 0,
             "log_every": 1, "lr": 3e-3}
    config = run_config("consert", tiny_model_dir, corpus, tmp_path / "new", flags, [])
    notes: list[str] = []
    inputs = build_inputs(config, notes.append)
    encoder = inputs.encoder
    reference = read_corpus([corpus])
    old = InMemoryExamples([encoder.tokenize_ids(reference.sentences, 16)])
    assert notes[0] == reference.report.summary()
    assert [row.as_py() for row in inputs.examples.columns[0]] == old.columns[0]
    assert inputs.examples.lengths().tolist() == old.lengths()
    for batch in in_memory_plan_epoch(old.lengths(), 16, 42, 0, True)[:5]:
        for key, value in old.collate(batch, 0).items():
            assert torch.equal(inputs.examples.collate(batch, 0)[key], value)
    Path(config.output).mkdir(parents=True)
    Trainer(inputs).run()

    old_config = run_config("consert", tiny_model_dir, corpus, tmp_path / "old", flags, [])
    old_inputs = build_inputs(old_config, lambda _t: None)
    old_inputs.examples = old
    Path(old_config.output).mkdir(parents=True)
    import sentadapt.train.feed as micro_batches

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(micro_batches, "plan_epoch", in_memory_plan_epoch)
        Trainer(old_inputs).run()
    new_losses, old_losses = (
        [json.loads(line)["loss"] for line in (tmp_path / run / "train.log").read_text().splitlines()]
        for run in ("new", "old"))
    assert len(new_losses) == 4
    assert new_losses == pytest.approx(old_losses, rel=1e-5)


def test_nli_pairs_equal_the_in_memory_reader(tiny_encoder: Encoder, tmp_path: Path) -> None:
    rows = [{"premise": f"the server {i} is down", "hypothesis": "a dns error" if i % 3 else "",
             "label": ["entailment", "neutral", "contradiction", "-"][i % 4]} for i in range(40)]
    path = tmp_path / "nli.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    prepared = prepare_nli([path], tiny_encoder.tokenizer, 16)
    nli = read_nli([path])
    examples = prepared.examples
    assert [row.as_py() for row in examples.columns[0]] == tiny_encoder.tokenize_ids(nli.premises, 16)
    assert [row.as_py() for row in examples.columns[1]] == tiny_encoder.tokenize_ids(nli.hypotheses, 16)
    assert examples.labels.tolist() == nli.labels
    assert prepared.notes[0] == f"NLI: {len(nli)} labelled pairs from {path}"
    batch = examples.collate([2, 0, 1], tiny_encoder.tokenizer.pad_token_id)
    assert batch["labels"].tolist() == [nli.labels[2], nli.labels[0], nli.labels[1]]


# ------------------------------------------------------------------------------------------- dedup


def test_dedup_keeps_first_occurrences_across_files_like_a_set(tiny_encoder: Encoder, tmp_path: Path) -> None:
    rng = random.Random(3)
    pool = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) for _ in range(60)]
    first = tmp_path / "a.txt"
    second = tmp_path / "b.txt.gz"
    first.write_text("\n".join(rng.choice(pool) for _ in range(500)) + "\n")
    import gzip

    second.write_bytes(gzip.compress(("\n".join(f"  {rng.choice(pool)} " for _ in range(500)) + "\n").encode()))
    seen: set[str] = set()
    expected = []
    for line in first.read_text().splitlines() + gzip.decompress(second.read_bytes()).decode().splitlines():
        text = line.strip()
        if text and text not in seen:
            seen.add(text)
            expected.append(text)
    prepared = prepare_sentences([first, second], tiny_encoder.tokenizer, 16, num_proc=1)
    assert [row.as_py() for row in prepared.examples.columns[0]] == tiny_encoder.tokenize_ids(expected, 16)
    assert prepared.notes[0] == (f"read 1000 lines from 2 files → {len(expected)} sentences "
                                 f"(skipped: {1000 - len(expected)} duplicate)")
    kept = prepare_sentences([first, second], tiny_encoder.tokenizer, 16, dedup=False)
    assert len(kept.examples) == 1000


# ------------------------------------------------------------------------------------------- cache keys


def test_cache_hits_and_what_invalidates_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    tokenizer = Encoder.load(tiny_model_dir, device="cpu").tokenizer
    corpus = corpus_file(tmp_path / "c.txt", 200)

    def last_note(**options: object) -> str:
        return prepare_sentences([corpus], tokenizer, options.pop("max_length", 16), **options).notes[-1]

    assert last_note().startswith("corpus cache: miss, read and tokenized once into ")
    assert last_note().startswith("corpus cache: hit, token ids memory-mapped from ")
    assert last_note(max_length=12).startswith("corpus cache: text reused, tokenized once into ")
    assert last_note(max_length=12).startswith("corpus cache: hit")
    # another tokenizer (another vocabulary order): text reused, tokens not
    from transformers import BertTokenizerFast

    vocab = (ASSETS / "vocab.txt").read_text().split()
    shuffled = BertTokenizerFast(vocab={t: i for i, t in enumerate(reversed(vocab))}, do_lower_case=True)
    assert tokenizer_fingerprint(shuffled) != tokenizer_fingerprint(tokenizer)
    assert prepare_sentences([corpus], shuffled, 16).notes[-1].startswith("corpus cache: text reused")
    # calling the tokenizer (which changes its truncation state) does not change its identity
    tokenizer(["x"], truncation=True, max_length=5)
    assert last_note().startswith("corpus cache: hit")
    # an edited file (same size, new mtime) is read again
    os.utime(corpus, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    assert last_note().startswith("corpus cache: miss")
    # and so are other reading options
    assert last_note(dedup=False).startswith("corpus cache: miss")
    kinds = sorted(entry.kind for entry in cache_entries())
    assert kinds == ["text"] * 3 + ["tokens"] * 5


def test_the_cached_report_is_said_again_on_a_hit(tiny_encoder: Encoder, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c d e f g h i j k l m n o p q\nthe server\n\nthe server\n")
    cold = prepare_sentences([corpus], tiny_encoder.tokenizer, 6)
    warm = prepare_sentences([corpus], tiny_encoder.tokenizer, 6)
    expected = ["read 4 lines from 1 file → 2 sentences (skipped: 1 blank, 1 duplicate)",
                "1 of 2 sentences are longer than --max-length 6 tokens and were truncated"]
    assert cold.notes[:2] == warm.notes[:2] == expected


def test_a_second_run_and_resume_reuse_the_cache(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path / "c.txt", 200)
    run = tmp_path / "run"
    common = ["--base", str(tiny_model_dir), "--dev", "none", "--batch-size", "8", "--max-length", "16"]
    first = run_adapt(str(corpus), "--output", str(run), "--max-steps", "2", "--checkpoint-every", "1", *common)
    assert first.exit_code == 0, first.output
    assert "corpus cache: miss" in first.stderr
    # make the finished run resumable again: one more step to do
    (run / "metrics.json").unlink()
    config = (run / "config.yaml").read_text().replace("max_steps: 2", "max_steps: 3")
    (run / "config.yaml").write_text(config)
    resumed = run_adapt("--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    assert "corpus cache: hit, token ids memory-mapped from " in resumed.stderr
    assert "resumed from" in resumed.stderr


def test_hub_datasets_are_read_in_batches_streamed_when_asked_and_fail_fast_offline(
        tiny_encoder: Encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    calls: list[tuple[str, str, bool]] = []

    class FakeDataset:
        column_names = ("idx", "text")

        def iter(self, batch_size: int):
            yield {"idx": [1, 2], "text": [" hub one ", ""]}
            yield {"idx": [3], "text": ["hub two"]}

    def load_dataset(name: str, split: str, streaming: bool = False) -> FakeDataset:
        calls.append((name, split, streaming))
        return FakeDataset()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sentadapt.data.corpus.hub_is_reachable", lambda: True)
    import datasets

    fake = types.SimpleNamespace(**{**vars(datasets), "load_dataset": load_dataset})  # the cache uses the rest
    monkeypatch.setitem(sys.modules, "datasets", fake)
    prepared = prepare_sentences(["someone/corpus:test"], tiny_encoder.tokenizer, 16, streaming=True)
    assert calls == [("someone/corpus", "test", True)]
    assert prepared.notes[0] == "read 3 lines from 1 file → 2 sentences (skipped: 1 blank)"
    assert [row.as_py() for row in prepared.examples.columns[0]] == tiny_encoder.tokenize_ids(["hub one", "hub two"])
    monkeypatch.setattr("sentadapt.data.corpus.hub_is_reachable", lambda: False)
    with pytest.raises(DataError) as caught:
        prepare_sentences(["someone/other"], tiny_encoder.tokenizer, 16)
    assert str(caught.value) == ("someone/other: not a local file, and the Hugging Face Hub is unreachable "
                                 "(offline); pass a local text file")


# ------------------------------------------------------------------------------------------- faults


def test_errors_keep_file_and_line_with_worker_processes(tiny_encoder: Encoder, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n" * 50_000 + b"bad \xff\n")
    with pytest.raises(DataError) as caught:
        prepare_sentences([bad], tiny_encoder.tokenizer, 16, num_proc=2)
    assert str(caught.value) == (f"{bad}:50001: not valid UTF-8 (invalid start byte 0xff at byte 5 of the line); "
                                 "fix the file or pass --encoding-errors replace|skip")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(DataError, match=r"empty.txt: no sentences \(0 lines read: the file is empty\)"):
        prepare_sentences([empty], tiny_encoder.tokenizer, 16, num_proc=2)
    column = tmp_path / "c.jsonl"
    column.write_text('{"body": "x"}\n')
    with pytest.raises(DataError, match=r"c.jsonl:1: no field 'text' \(fields: body\)"):
        prepare_sentences([column], tiny_encoder.tokenizer, 16, text_column="text", num_proc=2)
    assert not [entry for entry in cache_entries() if entry.kind != "incomplete"]
    assert not list(corpora_dir().glob(".tmp-*"))  # a failed preparation removes its temporary folder


def test_tokenizing_in_worker_processes_gives_the_same_ids(tiny_encoder: Encoder, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    rng = random.Random(1)
    corpus.write_text("".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))) + f" {i}\n"
                              for i in range(45_000)))
    parallel = prepare_sentences([corpus], tiny_encoder.tokenizer, 16, num_proc=2).examples
    files = json.loads(next(corpora_dir().glob("tokens-*/meta.json")).read_text())["files"]
    assert len(files) == 2  # two workers each wrote a shard
    sentences = read_corpus([corpus]).sentences
    assert [row.as_py() for row in parallel.columns[0]] == tiny_encoder.tokenize_ids(sentences, 16)


_PREPARE_AND_HANG = """
import sys, time
from contextlib import contextmanager
from transformers import AutoTokenizer
from sentadapt.data.prepare import prepare_sentences

@contextmanager
def progress(description, total):
    def advance(n):
        if description == "tokenizing":
            print("tokenizing", flush=True)
            time.sleep(600)  # killed here, with a chunk of token ids written
    yield advance

prepare_sentences([sys.argv[1]], AutoTokenizer.from_pretrained(sys.argv[2]), 16, num_proc=1, progress=progress)
"""


def test_a_preparation_killed_with_sigkill_leaves_nothing_trusted(tiny_model_dir: Path, tmp_path: Path,
                                                                 own_cache: Path) -> None:
    corpus = corpus_file(tmp_path / "c.txt", 300)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SENTADAPT_CACHE": str(own_cache)}
    child = subprocess.Popen([sys.executable, "-c", _PREPARE_AND_HANG, str(corpus), str(tiny_model_dir)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "tokenizing", child.stderr.read() if child.stderr else ""
        pending = list(corpora_dir().glob(".tmp-*"))
        assert len(pending) == 1 and list(pending[0].glob("ids-*.arrow"))  # mid-write
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    complete = [path for path in corpora_dir().glob("tokens-*") if (path / COMPLETE).exists()]
    assert complete == []  # the text entry finished before the kill; no token entry exists
    tokenizer = Encoder.load(tiny_model_dir, device="cpu").tokenizer
    prepared = prepare_sentences([corpus], tokenizer, 16)
    assert prepared.notes[-1].startswith("corpus cache: text reused, tokenized once")
    assert not list(corpora_dir().glob(".tmp-*"))  # the killed run's temporary folder was removed
    assert [row.as_py() for row in prepared.examples.columns[0]] == \
        Encoder.load(tiny_model_dir, device="cpu").tokenize_ids(read_corpus([corpus]).sentences, 16)


# ------------------------------------------------------------------------------------------- cache command


def test_cache_info_and_clear(tiny_encoder: Encoder, tmp_path: Path, own_cache: Path) -> None:
    from typer.testing import CliRunner

    from sentadapt.cli import app

    corpus = corpus_file(tmp_path / "c.txt", 100)
    prepare_sentences([corpus], tiny_encoder.tokenizer, 16)
    info = CliRunner().invoke(app, ["cache", "info"], catch_exceptions=False)
    assert info.exit_code == 0
    assert info.stdout.count("text-") == 1 and info.stdout.count("tokens-") == 1
    # issue 82: each entry says what it holds (the corpus file, its count, the tokenizer and max length)
    text = " ".join(info.stdout.replace("│", " ").split())
    assert "sentences of c.txt (" in text
    assert "token ids of the sentences of c.txt by " in text and ", max 16" in text
    assert " 2 entries, " in " " + info.stdout.replace("\n", " ")
    cleared = CliRunner().invoke(app, ["cache", "clear"], catch_exceptions=False)
    assert cleared.exit_code == 0
    assert cleared.stderr.startswith("removed 2 entries (")
    assert cache_entries() == []


def test_from_lists_round_trip() -> None:
    examples = TokenizedExamples.from_lists([[[1, 2, 3], [4], [5, 6]]])
    assert examples.lengths().tolist() == [3, 1, 2]
    batch = examples.collate(np.array([2, 0]), pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 0], [1, 2, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]


def test_padding_to_a_multiple_rounds_the_longest_up_and_masks_the_extra_positions() -> None:
    examples = TokenizedExamples.from_lists([[[1, 2, 3], [4], [5] * 9]], labels=None)
    batch = examples.collate(np.array([1, 0]), pad_id=0, multiple=8)
    assert batch["input_ids"].tolist() == [[4] + [0] * 7, [1, 2, 3] + [0] * 5]
    assert batch["attention_mask"].sum(dim=1).tolist() == [1, 3]
    assert examples.collate(np.array([2, 1]), pad_id=0, multiple=8)["input_ids"].shape == (2, 16)  # 9 → 16
    pairs = TokenizedExamples.from_lists([[[1, 2], [3]], [[4, 5, 6, 7, 8], [9]]])
    both = pairs.collate(np.array([0, 1]), pad_id=0, multiple=4)
    assert (both["a_input_ids"].shape, both["b_input_ids"].shape) == ((2, 4), (2, 8))  # each side its own width


def test_pad_multiple_auto_is_8_on_a_gpu_and_1_on_the_cpu() -> None:
    from sentadapt.config.schema import TrainConfig
    from sentadapt.train.feed import pad_multiple

    assert pad_multiple(TrainConfig(), torch.device("cpu")) == 1
    assert pad_multiple(TrainConfig(), torch.device("cuda", 0)) == 8
    assert pad_multiple(TrainConfig(pad_multiple=16), torch.device("cpu")) == 16
    with pytest.raises(ConfigError, match=r"^pad_multiple: -1 is out of range; valid: \[0, inf\]$"):
        TrainConfig(pad_multiple=-1).validate()


def test_a_batch_across_chunks_keeps_its_order() -> None:
    import pyarrow as pa

    rows = [[i] * (1 + i % 4) for i in range(30)]
    chunks = [pa.array(rows[start:end], type=pa.list_(pa.int32())) for start, end in [(0, 7), (7, 8), (8, 30)]]
    examples = TokenizedExamples([pa.chunked_array(chunks)], labels=np.arange(30) % 3)
    indices = [29, 0, 7, 8, 3, 7, 15]
    expected = InMemoryExamples([rows], list(np.arange(30) % 3)).collate(indices, 0)
    got = examples.collate(np.array(indices), 0)
    assert got["input_ids"].tolist() == expected["input_ids"].tolist()
    assert got["attention_mask"].tolist() == expected["attention_mask"].tolist()


def test_a_cache_folder_that_cannot_be_written_is_one_line_naming_it(tiny_model_dir: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 82: a read-only cache folder ended in a traceback from data/prepare.py; now one line naming the folder
    and the way out, before anything is read (a file where the folder should be stands in for a read-only one:
    tests may run as root, whom no permission bit stops)."""
    from tests.conftest import run_adapt

    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("SENTADAPT_CACHE", str(blocked))
    result = run_adapt(str(corpus_file(tmp_path / "c.txt", 40)), "--base", str(tiny_model_dir), "--dev", "none",
                       "--output", str(tmp_path / "run"), "--max-steps", "1", "--batch-size", "4")
    assert result.exit_code == 1
    assert " ".join(result.output.split()).endswith(
        f"Error: the cache folder {blocked} cannot be written (not a directory: {blocked / 'corpora'}); point "
        "$SENTADAPT_CACHE at a writable folder, or make this one writable")


def test_embedding_cache_entries_say_whose_vectors_they_hold(tiny_encoder: Encoder, own_cache: Path) -> None:
    """Issue 82: `cache info` listed embedding files by hash alone; each now names its model and count."""
    from sentadapt.data.cache_contents import cache_entries
    from sentadapt.model.embedding_cache import cached_vectors
    from sentadapt.text_tables import model_label

    cached_vectors(tiny_encoder, ["a printer", "a server"], max_length=16)
    [entry] = [entry for entry in cache_entries() if entry.kind == "embeddings"]
    assert entry.holds == f"vectors of {model_label(tiny_encoder.name)} (2 texts)"


def test_a_cpus_timings_are_cache_entries_that_say_what_they_timed(tiny_encoder: Encoder, own_cache: Path) -> None:
    """Issue 84: the training pass timed on this CPU (train/pass_costs.py) is listed and cleared like the rest."""
    from sentadapt.data.cache_contents import cache_entries, clear_cache
    from sentadapt.train.pass_costs import choose_arithmetic, cpu_model

    choose_arithmetic("no", tiny_encoder, on_gpu=False, processes=1, message=lambda text: None)
    [entry] = cache_entries()
    config = tiny_encoder.backbone.config
    assert (entry.kind, entry.path.parent.name) == ("timings", "pass-costs")
    assert entry.holds == (f"fp32 training passes of a {config.num_hidden_layers}-layer {config.hidden_size}-wide bert "
                           f"on {cpu_model()} (torch {torch.__version__})")
    assert clear_cache()[0] == 1 and cache_entries() == []
