"""Bad input and untrusted files: one-line errors naming file and line, refusals of pickle and remote code, and
property-based tests over the pairs / NLI readers and the config parser (never a traceback, never a dropped
valid line). The corpus reader's own property tests live in test_corpus.py."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sentadapt.config.merging import build_config
from sentadapt.config.schema import TrainConfig
from sentadapt.data.nli import NLI_LABELS, NliPairs, read_nli
from sentadapt.data.pair_files import ScoredPairs, read_scored_pairs
from sentadapt.errors import ConfigError, DataError
from sentadapt.recipes import RECIPES
from tests.conftest import run_adapt

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------ corpus and options


def test_long_lines_are_truncated_and_counted(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    long_line = " ".join(["the server is down"] * 5000)  # 20,000 words on one line
    corpus.write_text("".join(f"the server {i} is down\n" for i in range(20)) + f"{long_line}\n" * 2
                      + "a man is playing a guitar " * 10 + "\n")
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--dev", "none", "--batch-size", "4", "--max-steps", "1", "--max-length", "16")
    assert result.exit_code == 0, result.output
    assert "read 23 lines from 1 file → 22 sentences (skipped: 1 duplicate)" in result.stderr
    assert "2 of 22 sentences are longer than --max-length 16 tokens and were truncated" in result.stderr


def test_a_sentence_that_exactly_fills_max_length_is_not_counted_as_truncated(tiny_encoder) -> None:
    from sentadapt.data.prepare import TokenizeColumns

    texts = ["the server", "the server is", "the"]  # 4, 5 and 3 tokens with [CLS] and [SEP]
    out = TokenizeColumns(tiny_encoder.tokenizer, 4, ["text"])({"text": texts})
    assert out["text_input_ids"] == tiny_encoder.tokenize_ids(texts, 4)
    assert [len(row) for row in out["text_input_ids"]] == [4, 4, 3]
    assert out["text_truncated"] == [False, True, False]


def test_output_below_a_file_is_refused_before_loading(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(blocker / "run"))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: --output {blocker / 'run'}: {blocker} is a file, not a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any directory")
def test_unwritable_output_directory_is_refused_before_loading(corpus: Path, tiny_model_dir: Path,
                                                               tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(locked / "run"))
    finally:
        locked.chmod(0o700)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: --output {locked / 'run'}: {locked} is not writable"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--set", "temperature=-0.1"], "Error: temperature: -0.1 is out of range; valid: (0, inf]"),
        (["--set", "dropout_rate=1"], "Error: dropout_rate: 1.0 is out of range; valid: [0, 1)"),
        (["--set", "token_cutoff_rate=-0.5"], "Error: token_cutoff_rate: -0.5 is out of range; valid: [0, 1)"),
        (["--set", "warmup_ratio=1"], "Error: warmup_ratio: 1.0 is out of range; valid: [0, 1)"),
        (["--lr", "0"], "Error: lr: 0.0 is out of range; valid: (0, 1]"),
        (["--set", "on_nan=ignore"], "Error: on_nan: 'ignore' is not one of stop, skip"),
        (["--set", "keep_checkpoints=0"], "Error: keep_checkpoints: 0 is out of range; valid: [1, inf]"),
        (["--set", "temperature=nan"], "Error: temperature: nan is out of range; valid: (0, inf]"),
    ],
)
def test_out_of_range_options_name_the_valid_range(corpus: Path, tiny_model_dir: Path, tmp_path: Path,
                                                   option: list[str], message: str) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), *option)
    assert result.exit_code == 2
    assert result.stderr.strip() == message
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------ untrusted models


def _copy_tokenizer_and_config(source: Path, target: Path) -> None:
    target.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (target / name).write_bytes((source / name).read_bytes())


def test_adapt_refuses_pickle_weights_without_allow_pickle(tiny_model_dir: Path, corpus: Path,
                                                           tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    pickled = tmp_path / "pickled"
    _copy_tokenizer_and_config(tiny_model_dir, pickled)
    torch.save(load_file(str(tiny_model_dir / "model.safetensors")), pickled / "pytorch_model.bin")
    result = run_adapt(str(corpus), "--base", str(pickled), "--output", str(tmp_path / "run"), "--dev", "none")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: {pickled}: no safetensors weights; pickle checkpoints (.bin) can run code when loaded — convert "
        "the model to safetensors, or pass --allow-pickle if you trust it")
    allowed = run_adapt(str(corpus), "--base", str(pickled), "--output", str(tmp_path / "run2"), "--dev", "none",
                        "--allow-pickle", "--batch-size", "8", "--max-steps", "1", "--max-length", "16")
    assert allowed.exit_code == 0, allowed.output


def test_adapt_refuses_remote_code_without_trust_remote_code(tiny_model_dir: Path, corpus: Path,
                                                             tmp_path: Path) -> None:
    custom = tmp_path / "custom"
    _copy_tokenizer_and_config(tiny_model_dir, custom)
    (custom / "model.safetensors").write_bytes((tiny_model_dir / "model.safetensors").read_bytes())
    config = json.loads((custom / "config.json").read_text())
    config.update(model_type="tiny-custom", auto_map={"AutoConfig": "configuration_custom.CustomConfig",
                                                      "AutoModel": "modeling_custom.CustomModel"})
    (custom / "config.json").write_text(json.dumps(config))
    ran = tmp_path / "the-model-code-ran"
    for module in ("configuration_custom.py", "modeling_custom.py"):
        (custom / module).write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    result = run_adapt(str(corpus), "--base", str(custom), "--output", str(tmp_path / "run"), "--dev", "none")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: {custom}: the model ships its own Python code (auto_map in config.json), which would run when "
        "loaded; read it, then pass --trust-remote-code if you trust it")
    assert not ran.exists()


# ------------------------------------------------------------------------------------------ pairs files


def write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def test_pairs_errors_name_file_and_line(tmp_path: Path) -> None:
    header = "sentence1\tsentence2\tscore\n"
    cases = [
        (write(tmp_path / "utf8.tsv", header.encode() + b"a\tb\t1\nb\tc\xff\t2\n"),
         "{path}:3: not valid UTF-8 (invalid start byte 0xff at byte 4 of the line); save the file as UTF-8"),
        (write(tmp_path / "columns.tsv", "sentence1\tscore\na\t1\n"),
         "{path}:1: header is missing column(s) sentence2; expected a header line with sentence1, sentence2, score"),
        (write(tmp_path / "range.tsv", header + "a\tb\t1\nc\td\t7.5\n"), "{path}:3: score 7.5 is outside [0, 5]"),
        (write(tmp_path / "score.tsv", header + "a\tb\thigh\n"), "{path}:2: score 'high' is not a number"),
        (write(tmp_path / "nan.jsonl", '{"sentence1": "a", "sentence2": "b", "score": "nan"}\n'),
         "{path}:1: score 'nan' is not finite"),
        (write(tmp_path / "deep.jsonl", "[" * 100_000 + "\n"),
         "{path}:1: invalid JSON (nested too deeply); each line must be one JSON object"),
        (write(tmp_path / "huge.csv", "sentence1,sentence2,score\n\"" + "a" * 200_000 + "\",b,1\n"),
         "{path}:2: malformed CSV (field larger than field limit (131072))"),
        (write(tmp_path / "missing.jsonl", '{"sentence1": "a", "score": 1}\n'), "{path}:1: missing field(s) sentence2"),
    ]
    for path, message in cases:
        with pytest.raises(DataError) as error:
            read_scored_pairs(path, score_range=(0.0, 5.0))
        assert str(error.value) == message.format(path=path)


def test_tsv_pairs_keep_quotes_as_text(tmp_path: Path) -> None:
    path = write(tmp_path / "q.tsv", 'sentence1\tsentence2\tscore\n"Hi" she said\tbye "now\t3\n')
    pairs = read_scored_pairs(path)
    assert (pairs.sentence1, pairs.sentence2, pairs.scores) == (['"Hi" she said'], ['bye "now'], [3.0])


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff\u2028\u2029"),
                min_size=1, max_size=15).filter(lambda text: text.strip() != "")
_ROWS = st.lists(st.tuples(_TEXT, _TEXT, st.floats(0, 5, allow_nan=False)), min_size=1, max_size=8)


@PROPERTY
@given(rows=_ROWS, fmt=st.sampled_from(["tsv", "jsonl", "csv"]), gz=st.booleans())
def test_property_valid_pairs_all_come_back(rows: list[tuple[str, str, float]], fmt: str, gz: bool) -> None:
    import csv
    import io

    if fmt == "jsonl":
        text = "".join(json.dumps({"sentence1": a, "sentence2": b, "score": s}) + "\n" for a, b, s in rows)
    elif fmt == "tsv":  # no quoting: a cell is the text between tabs, quotes included
        rows = [(a.replace("\t", " "), b.replace("\t", " "), s) for a, b, s in rows]
        rows = [(a, b, s) for a, b, s in rows if a.strip() and b.strip()]
        if not rows:
            return
        text = "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s!r}\n" for a, b, s in rows)
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["sentence1", "sentence2", "score"])
        writer.writerows((a, b, repr(s)) for a, b, s in rows)
        text = buffer.getvalue()
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / f"p.{fmt}{'.gz' if gz else ''}", text)
        pairs = read_scored_pairs(path)
    assert list(zip(pairs.sentence1, pairs.sentence2, pairs.scores)) == [(a, b, float(s)) for a, b, s in rows]


_SOUP = st.lists(st.sampled_from([b"\n", b"\r\n", b"\t", b",", b'"', b"\xff", b"\xc3", b"sentence1", b"sentence2",
                                  b"score", b"a", b" ", b"1", b"7", b"nan", b"{", b"}", b":", b"[", b"\x00",
                                  b'"score"', b'"sentence1"', "é".encode()]), max_size=40).map(b"".join)


@PROPERTY
@given(data=st.one_of(st.binary(max_size=200), _SOUP),
       name=st.sampled_from(["p.tsv", "p.csv", "p.jsonl", "p.tsv.gz", "p.txt"]))
def test_property_pairs_reader_never_crashes(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / name, data)
        try:
            pairs = read_scored_pairs(path, score_range=(0.0, 5.0))
        except DataError as error:
            assert "\n" not in str(error) and str(path) in str(error)
            return
    assert isinstance(pairs, ScoredPairs)
    assert all(0 <= score <= 5 for score in pairs.scores)


# ------------------------------------------------------------------------------------------ NLI files


_LABELS = st.sampled_from([*NLI_LABELS, "Entailment", " neutral ", 0, 1, 2, "2"])


@PROPERTY
@given(rows=st.lists(st.tuples(_TEXT, _TEXT, _LABELS), min_size=1, max_size=8), fmt=st.sampled_from(["jsonl", "tsv"]))
def test_property_valid_nli_records_all_come_back(rows: list[tuple[str, str, object]], fmt: str) -> None:
    rows = [(a.replace("\t", " ").strip(), b.replace("\t", " ").strip(), label) for a, b, label in rows]
    rows = [(a, b, label) for a, b, label in rows if a and b]
    if not rows:
        return
    if fmt == "jsonl":
        text = "".join(json.dumps({"premise": a, "hypothesis": b, "label": label}) + "\n" for a, b, label in rows)
    else:
        text = "premise\thypothesis\tlabel\n" + "".join(f"{a}\t{b}\t{label}\n" for a, b, label in rows)
    with tempfile.TemporaryDirectory() as folder:
        nli = read_nli([write(Path(folder) / f"n.{fmt}", text)])
    assert nli.premises == [a for a, _, _ in rows] and nli.hypotheses == [b for _, b, _ in rows]
    expected = [label if isinstance(label, int) else NLI_LABELS.index(label.strip().lower()) if not
                label.strip().isdigit() else int(label) for _, _, label in rows]
    assert nli.labels == expected


_NLI_SOUP = st.lists(st.sampled_from([b"\n", b"\t", b",", b'"', b"\xff", b"premise", b"hypothesis", b"label",
                                      b"entailment", b"maybe", b"-", b"-1", b"3", b"a", b"{", b"}", b":", b"null",
                                      b'"premise"', b'"label"', b"\x00"]), max_size=40).map(b"".join)


@PROPERTY
@given(data=st.one_of(st.binary(max_size=200), _NLI_SOUP),
       name=st.sampled_from(["n.jsonl", "n.tsv", "n.csv", "n.jsonl.gz", "n.txt"]))
def test_property_nli_reader_never_crashes(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / name, data)
        try:
            nli = read_nli([path])
        except (DataError, ConfigError) as error:
            assert "\n" not in str(error) and str(path) in str(error)
            return
    assert isinstance(nli, NliPairs) and len(nli) > 0


# ------------------------------------------------------------------------------------------ config parser


_KEYS = st.sampled_from(["temperature", "views", "mode", "lr", "batch_size", "warmup_ratio", "on_nan", "max_steps",
                         "train.seed", "recipe.temperature", "dropout_rate", "dedup", "max_grad_norm", "tempreture",
                         "", "=", "epochs", "keep_checkpoints"])
_VALUES = st.one_of(st.text(max_size=12), st.integers(-5, 10**6).map(str), st.floats().map(str),
                    st.sampled_from(["true", "none", "shuffle,dropout", "1e-5", "0", "-1", "inf", "nan", "1,2"]))


@PROPERTY
@example(items=["on_nan=st\nop", "a\nb=1"], raw=[]).via("an escaped newline keeps the error on one line")
@example(items=[], raw=["\n"]).via("found by hypothesis: the raw item was quoted as is")
@given(items=st.lists(st.tuples(_KEYS, _VALUES).map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=4),
       raw=st.lists(st.text(max_size=10), max_size=2))
def test_property_config_parser_gives_a_config_or_one_line_error(items: list[str], raw: list[str]) -> None:
    recipe = RECIPES.get("consert")
    try:
        config = build_config("consert", recipe.spec.settings, recipe.spec.train_defaults, None, {}, [*items, *raw],
                              base="m", corpus=["c.txt"], output="o")
    except ConfigError as error:
        assert "\n" not in str(error) and str(error)
        return
    config.train.validate()  # whatever was accepted is in range


@PROPERTY
@given(temperature=st.floats(1e-4, 10), lr=st.floats(1e-7, 1), warmup=st.floats(0, 0.999),
       batch=st.integers(2, 4096), rate=st.floats(0, 0.999))
def test_property_in_range_values_are_always_accepted(temperature: float, lr: float, warmup: float, batch: int,
                                                      rate: float) -> None:
    recipe = RECIPES.get("consert")
    config = build_config(
        "consert", recipe.spec.settings, recipe.spec.train_defaults, None, {"lr": lr, "batch_size": batch},
        [f"temperature={temperature!r}", f"warmup_ratio={warmup!r}", f"dropout_rate={rate!r}"],
        base="m", corpus=["c.txt"], output="o",
    )
    train = config.train
    assert (config.recipe_args.temperature, train.lr, train.optim.warmup_ratio) == (temperature, lr, warmup)
    assert (config.train.batch_size, config.recipe_args.dropout_rate) == (batch, rate)
    assert isinstance(config.train, TrainConfig)


@pytest.mark.parametrize(("damage", "message"), [
    ("truncate", "{name}: its weights are not a complete safetensors file (Error while deserializing header: "),
    ("no-tokenizer", "{name}: its tokenizer knows no words (every one becomes [UNK]): the folder lacks its tokenizer "
                     "files (tokenizer.json, vocab.txt, …); copy them from the model it was trained from"),
])
def test_a_damaged_model_folder_is_one_line_not_a_traceback_or_a_silent_unk(tiny_model_dir: Path, tmp_path: Path,
                                                                           damage: str, message: str) -> None:
    """Issue 82: a truncated model.safetensors ended `eval` in a SafetensorError traceback; a folder without its
    tokenizer files scored every sentence as [UNK] (Spearman 24.37 against 76.46), without a word."""
    import shutil

    from sentadapt.errors import ModelError
    from sentadapt.model.encoder import Encoder

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    if damage == "truncate":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:100])
    else:
        for name in ("vocab.txt", "tokenizer.json"):
            (folder / name).unlink(missing_ok=True)
    with pytest.raises(ModelError) as error:
        Encoder.load(folder, device="cpu")
    assert str(error.value).startswith(message.format(name=folder)) and error.value.exit_code == 1
