"""`sentadapt pairs`: sentence pairs from the user's corpus to label, spread over the base model's cosine range, in a
file that `eval --pairs` and `adapt --dev` read once labelled (0/1 → pair classification, scores → STS)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.errors import DataError
from sentadapt.evaluation.task_types import detect_task_type, read_task, resolve_dev_set
from sentadapt.pairs.devset import BINS, bin_of, complete_pairs, pick_per_bin, sample_sentences
from tests.conftest import SHARED_MODELS, needs_shared

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
SUBJECTS = ("the server", "the database", "a disk", "the network", "the cluster", "a node", "the pod", "the service")
STATES = ("is down", "failed", "is slow", "has a dns timeout", "is playing music", "was new")
HEADER = "sentence1\tsentence2\tlabel"


def _corpus(path: Path, lines: list[str] | None = None) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines or [f"{s} {v}" for s in SUBJECTS for v in STATES]))
    return path


def _pairs(*args: str) -> object:
    return runner.invoke(app, ["pairs", *args], catch_exceptions=False)


def _rows(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# Label each pair: 1 = same meaning, 0 = different")
    assert lines[1] == HEADER
    return [line.split("\t") for line in lines[2:]]


def _fill(path: Path, labels: list[str], target: Path | None = None) -> Path:
    """The file with its label column filled in, row by row (the comment header kept)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [line[: -len("\t")] + f"\t{label}" for line, label in zip(lines[2:], labels)]
    target = target or path
    target.write_text("\n".join([*lines[:2], *rows]) + "\n", encoding="utf-8")
    return target


# ----------------------------------------------------------------------------------------------- the command


def test_pairs_writes_a_file_to_label_with_each_sentence_once(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus.txt")
    out = tmp_path / "to-label.tsv"
    result = _pairs(str(corpus), "--base", str(tiny_model_dir), "-n", "12", "-o", str(out), "--device", "cpu")
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert len(rows) == 12 and all(len(row) == 3 and row[2] == "" for row in rows)
    sentences = [sentence for row in rows for sentence in row[:2]]
    assert len(set(sentences)) == 24  # no sentence twice
    corpus_lines = set(corpus.read_text().splitlines())
    assert set(sentences) <= corpus_lines
    assert f"wrote 12 pairs to label to {out}" in " ".join(result.stdout.split())
    bins = [line for line in result.stdout.splitlines() if "…" in line]
    assert len(bins) == BINS and sum(int(line.split()[3]) for line in bins) == 12
    assert f"--dev {out}" in result.stdout.replace("\n", "")
    assert "corpus: read 48 lines from 1 file → 48 sentences" in result.stderr


def test_a_corpus_folder_gives_the_pairs_its_files_give_and_the_next_command_names_the_folder(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    lines = [f"{s} {v}" for s in SUBJECTS for v in STATES]
    folder = tmp_path / "texts"
    folder.mkdir()
    _corpus(folder / "a.txt", lines[:20])
    _corpus(folder / "b.txt", lines[20:])
    by_folder, by_files = tmp_path / "folder.tsv", tmp_path / "files.tsv"
    result = _pairs(str(folder), "--base", str(tiny_model_dir), "-n", "8", "-o", str(by_folder), "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert f"corpus: read {len(lines)} lines from 2 files" in result.stderr
    assert by_folder.read_text().splitlines()[0].endswith(f"sentadapt adapt {folder} --base {tiny_model_dir} --dev "
                                                          f"{by_folder} --output runs/folder")
    files = [str(folder / "a.txt"), str(folder / "b.txt")]
    again = _pairs(*files, "--base", str(tiny_model_dir), "-n", "8", "-o", str(by_files), "--device", "cpu")
    assert again.exit_code == 0, again.output
    assert _rows(by_folder) == _rows(by_files)


def test_same_seed_same_file_other_seed_other_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus.txt")
    outputs = {}
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        outputs[name] = tmp_path / f"{name}.tsv"
        result = _pairs(str(corpus), "--base", str(tiny_model_dir), "-n", "10", "-o", str(outputs[name]),
                        "--seed", seed, "--device", "cpu")
        assert result.exit_code == 0, result.output
    assert _rows(outputs["a"]) == _rows(outputs["b"])
    assert _rows(outputs["a"]) != _rows(outputs["c"])


def test_csv_output_reads_back_and_an_existing_file_needs_overwrite(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus.txt")
    out = tmp_path / "to-label.csv"
    args = [str(corpus), "--base", str(tiny_model_dir), "-n", "5", "-o", str(out), "--device", "cpu"]
    assert _pairs(*args).exit_code == 0
    before = out.read_bytes()
    refused = _pairs(*args, "--seed", "3")
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (f"Error: --output {out}: exists (labels in it would be lost); pass --overwrite "
                                      "to replace it")
    assert out.read_bytes() == before
    assert _pairs(*args, "--seed", "3", "--overwrite").exit_code == 0
    assert out.read_bytes() != before
    assert out.read_text().splitlines()[1] == "sentence1,sentence2,label"
    with pytest.raises(DataError, match=r"to-label.csv:3: no label for the pair"):
        read_task(out)


@pytest.mark.parametrize(("args", "code", "message"), [
    (["{missing}", "-n", "5"], 1, "Error: {missing}: no such file"),
    (["{corpus}", "-n", "0"], 2, "Error: -n 0: must be ≥ 1 (the number of pairs to propose)"),
    (["{corpus}", "-n", "-3"], 2, "Error: -n -3: must be ≥ 1 (the number of pairs to propose)"),
    (["{corpus}", "-n", "25"], 1, "Error: {corpus}: 48 distinct sentences; -n 25 needs at least 50 (each sentence "
                                  "is used in one pair only); pass more text or a smaller -n"),
    (["{corpus}", "-n", "5", "-o", "{tmp}/x.txt"], 2, "Error: --output {tmp}/x.txt: must end in .tsv or .csv (the "
                                                      "formats `eval --pairs` and `adapt --dev` read)"),
    (["{corpus}", "-n", "5", "--base", "./no-such-model"], 1, "Error: ./no-such-model: no such model folder"),
])
def test_bad_input_is_one_line_and_writes_nothing(tiny_model_dir: Path, tmp_path: Path, args: list[str], code: int,
                                                  message: str) -> None:
    names = {"corpus": _corpus(tmp_path / "corpus.txt"), "missing": tmp_path / "missing.txt", "tmp": tmp_path}
    out = tmp_path / "to-label.tsv"
    argv = [arg.format(**names) for arg in args]
    base = [] if "--base" in argv else ["--base", str(tiny_model_dir)]
    output = [] if "-o" in argv else ["-o", str(out)]
    result = runner.invoke(app, ["pairs", *argv, *base, *output, "--device", "cpu"])
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message.format(**names)), result.stderr
    assert not out.exists()


def test_importing_the_command_does_not_import_torch() -> None:
    code = ("import sys; from typer.testing import CliRunner; from sentadapt.cli import app; "
            "r = CliRunner().invoke(app, ['pairs', '--help']); print(r.exit_code, 'torch' in sys.modules)")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["0", "False"]


# ------------------------------------------------------------------------------------ the readers of the file


def test_labelled_file_reads_as_pair_classification_or_sts(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus.txt")
    out = tmp_path / "to-label.tsv"
    result = _pairs(str(corpus), "--base", str(tiny_model_dir), "-n", "8", "-o", str(out), "--device", "cpu")
    assert result.exit_code == 0, result.output
    binary = _fill(out, ["1", "0"] * 4, tmp_path / "binary.tsv")
    graded = _fill(out, ["4.5", "0", "2", "3", "1.5", "5", "0.5", "2"], tmp_path / "graded.tsv")
    assert detect_task_type(binary) == "pair-classification" and detect_task_type(graded) == "sts"
    for path, kind, metric in ((binary, "pair-classification", "ap"), (graded, "sts", "spearman")):
        name, factory = resolve_dev_set(str(path), None)
        assert name == path.name and factory is not None
        assert factory().tasks[0].kind == kind
        report = tmp_path / f"{path.stem}.json"
        result = runner.invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(path), "--bootstrap", "0",
                                     "--json", str(report), "--device", "cpu"])
        assert result.exit_code == 0, result.output
        assert metric in json.loads(report.read_text())[0]["reports"][0]["tasks"][path.name]


@pytest.mark.parametrize("trimmed", [False, True])
def test_an_unlabelled_row_is_named_by_eval_and_by_the_dev_set(tiny_model_dir: Path, tmp_path: Path,
                                                                trimmed: bool) -> None:
    """Line 4 of the file (the comment and the header come first) has no label; an editor that trims trailing
    whitespace drops its last tab, which must read the same."""
    last = "a disk failed\tthe pod is slow" + ("" if trimmed else "\t")
    path = tmp_path / "to-label.tsv"
    path.write_text(f"# Label each pair\n{HEADER}\nthe server is down\tthe database failed\t1\n{last}\n"
                    "a node is down\tthe service was new\t0\n")
    message = (f"{path}:4: no label for the pair 'a disk failed' / 'the pod is slow'; fill in the label column "
               "(0/1 or a score) for every row, or delete the rows you do not label")
    result = runner.invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(path), "--device", "cpu"])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: {message}"
    _name, factory = resolve_dev_set(str(path), None)
    with pytest.raises(DataError) as error:
        factory()  # type: ignore[misc]
    assert str(error.value) == message
    if not trimmed:  # adapt --dev reads it through that resolver, before any training
        run = tmp_path / "run"
        corpus = _corpus(tmp_path / "corpus.txt")
        adapted = runner.invoke(app, ["adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(run),
                                      "--dev", str(path), "--max-steps", "1", "--batch-size", "4"])
        assert adapted.exit_code == 1
        assert adapted.stderr.strip() == f"Error: {message}"
        assert not (run / "model.safetensors").exists()


def test_unlabelled_graded_row_and_long_sentences_are_cut(tmp_path: Path) -> None:
    long = "the server is down again " * 4
    path = tmp_path / "dev.tsv"
    path.write_text(f"#a\n#b\n{HEADER}\na\tb\t4.5\nc\td\t2\n{long}\tx\t \n")
    assert detect_task_type(path) == "sts"
    with pytest.raises(DataError) as error:
        read_task(path)
    assert str(error.value).startswith(f"{path}:6: no label for the pair 'the server is down again the server "
                                       "is…' / 'x'; ")


def test_comment_lines_shift_line_numbers_and_existing_files_keep_their_type(tmp_path: Path) -> None:
    scored = tmp_path / "scored.tsv"
    scored.write_text("# my notes\nsentence1\tsentence2\tscore\na\tb\t4\nc\td\tfive\n")
    assert detect_task_type(scored) == "sts"
    with pytest.raises(DataError, match=r"scored.tsv:4: score 'five' is not a number$"):
        read_task(scored)
    mixed = tmp_path / "mixed.tsv"  # a label that is not a number: named with its line, whatever the rows above
    mixed.write_text(f"{HEADER}\na\tb\t1\nc\td\tyes\n")
    with pytest.raises(DataError, match=r"mixed.tsv:3: label 'yes' is not a number; label each pair 1 = same "):
        detect_task_type(mixed)
    both = tmp_path / "both.tsv"  # a 'score' column next to 'label': label decides, as before
    both.write_text("sentence1\tsentence2\tscore\tlabel\na\tb\t4\t1\nc\td\t1\t0\n")
    assert detect_task_type(both) == "pair-classification"


# --------------------------------------------------------------------------------------------- the library


def test_corpus_sample_reads_like_adapt_and_does_not_depend_on_order(tmp_path: Path) -> None:
    lines = [f"sentence number {i}" for i in range(30)]
    plain = tmp_path / "a.txt"
    plain.write_bytes(b"\xef\xbb\xbf" + "\r\n".join([*lines, "", *lines[:5], "  "]).encode() + b"\r\n")
    packed = tmp_path / "b.txt.gz"
    packed.write_bytes(gzip.compress("\n".join(reversed(lines)).encode()))
    sample, report = sample_sentences([plain], 10, seed=0)
    assert len(sample) == 10 and len(set(sample)) == 10 and set(sample) <= set(lines)
    assert report.sentences == 30 and report.skipped == {"blank": 2, "duplicate": 5}
    assert sample_sentences([packed], 10, seed=0)[0] == sample  # same sentences, any order, any format
    assert sample_sentences([plain], 10, seed=1)[0] != sample
    assert sorted(sample_sentences([plain], 100, seed=0)[0]) == sorted(lines)


def test_round_robin_takes_every_bin_and_uses_no_sentence_twice() -> None:
    rng = np.random.default_rng(0)
    count = 200
    first = rng.integers(0, count, 3000)
    second = (first + rng.integers(1, count, 3000)) % count
    cosines = np.concatenate([rng.uniform(-0.2, 0.2, 2900), rng.uniform(0.2, 0.9, 100)])  # mostly unrelated
    edges = np.linspace(-0.2, 0.9, BINS + 1)
    which = bin_of(cosines, edges)
    chosen = pick_per_bin(first, second, which, BINS, 40, np.random.default_rng(1))
    a, b = complete_pairs(first[chosen], second[chosen], count, 40, np.random.default_rng(1))
    assert len(a) == 40 and len(set(a.tolist()) | set(b.tolist())) == 80
    counts = np.bincount(which[chosen], minlength=BINS)
    assert counts.tolist() == [4] * BINS  # every bin its share: the related 3 % of the candidates give 60 %


def test_complete_pairs_pairs_up_the_leftovers() -> None:
    a, b = complete_pairs(np.array([0]), np.array([1]), 6, 3, np.random.default_rng(0))
    assert len(a) == 3 and sorted([*a.tolist(), *b.tolist()]) == [0, 1, 2, 3, 4, 5]


# ----------------------------------------------------------------------------------- the real model (../shared)


@pytest.mark.shared
@needs_shared()
def test_real_model_spreads_pairs_over_the_range_and_the_labelled_file_is_read(tmp_path: Path) -> None:
    """all-MiniLM-L6-v2 on the example IT-support corpus: the chosen pairs cover the cosine range, no sentence twice,
    seeded; filled in with 0/1 it is a pair-classification dev set, with scores an STS one."""
    from sentadapt.pairs.labelling import propose_pairs

    corpus, model = ROOT / "examples" / "it-support-corpus.txt", str(SHARED_MODELS / "all-minilm-l6-v2")
    out = tmp_path / "to-label.tsv"
    result = runner.invoke(app, ["pairs", str(corpus), "--base", model, "-n", "100", "-o", str(out),
                                 "--device", "cpu"])
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert len(rows) == 100 and len({s for row in rows for s in row[:2]}) == 200

    first = out.read_bytes()
    proposed = propose_pairs([corpus], model, 100, out, overwrite=True, device="cpu")  # the library call of `pairs`
    assert out.read_bytes() == first  # same seed, same file
    assert [*zip(proposed.sentence1, proposed.sentence2)] == [(row[0], row[1]) for row in rows]
    counts, cosines = proposed.counts, proposed.cosines
    assert (counts > 0).sum() >= 8
    assert counts[:3].sum() <= 50  # the lowest-similarity bins do not dominate, as random pairs would
    low, high = proposed.edges[0], proposed.edges[-1]
    third = (high - low) / 3
    assert (cosines >= high - third).sum() >= 15 and (cosines <= low + third).sum() >= 15

    threshold = float(np.median(cosines))
    binary = _fill(out, ["1" if c > threshold else "0" for c in cosines], tmp_path / "binary.tsv")
    scores = np.round(5 * (cosines - cosines.min()) / (cosines.max() - cosines.min()), 1)  # 0-5, like STS
    graded = _fill(out, [f"{score:g}" for score in scores], tmp_path / "graded.tsv")
    report = tmp_path / "report.json"  # one eval of both files: the model loads once, each sentence is encoded once
    evaluated = runner.invoke(app, ["eval", model, "--pairs", str(binary), "--pairs", str(graded), "--bootstrap", "0",
                                    "--json", str(report), "--device", "cpu"])
    assert evaluated.exit_code == 0, evaluated.output
    reports = {task: metrics for entry in json.loads(report.read_text())[0]["reports"]
               for task, metrics in entry["tasks"].items()}
    for path, kind, metric in ((binary, "pair-classification", "ap"), (graded, "sts", "spearman")):
        _name, factory = resolve_dev_set(str(path), None)
        assert factory is not None and factory().tasks[0].kind == kind
        assert reports[path.name][metric] > 99  # labels made from the base model's own cosines: ranked ~perfectly


def test_a_line_longer_than_a_sentence_to_judge_is_not_proposed(tmp_path: Path) -> None:
    """Issue 82: a 12 MB line went whole into the file to label (Python's csv cannot read such a field back)."""
    from sentadapt.pairs.devset import MAX_PAIR_CHARS

    document = "word " * MAX_PAIR_CHARS  # 10,000 characters on one line
    corpus = _corpus(tmp_path / "corpus.txt", [document, *(f"{s} {v}" for s in SUBJECTS for v in STATES)])
    sentences, _ = sample_sentences([str(corpus)], 1000, 0)
    assert len(sentences) == 48 and document.strip() not in sentences and max(map(len, sentences)) <= MAX_PAIR_CHARS
