"""sentadapt.data.textfile: one opener, one UTF-8 decoder and one format detector for every reader in data/."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sentadapt.data import textfile
from sentadapt.data.corpus import read_corpus
from sentadapt.data.nli import read_nli
from sentadapt.data.pair_files import read_labelled_pairs, read_scored_pairs, sniff_columns
from sentadapt.data.positives import read_positive_pairs
from sentadapt.data.rerank_files import read_rerank
from sentadapt.data.textfile import format_of, json_objects, open_binary, require_format, text_lines
from sentadapt.errors import DataError
from sentadapt.evaluation.task_types import detect_task_type


def write(path: Path, data: str | bytes) -> Path:
    raw = data.encode() if isinstance(data, str) else data
    path.write_bytes(gzip.compress(raw) if path.suffix.lower() == ".gz" else raw)
    return path


def raises_exactly(message: str) -> Any:
    return pytest.raises(DataError, match=f"^{re.escape(message)}$")


# --------------------------------------------------------------------------------------------- detection


@pytest.mark.parametrize(("name", "fmt"), [
    ("c.txt", "text"), ("corpus", "text"), ("notes.md", "text"), ("c.txt.gz", "text"), ("archive.gz", "text"),
    ("c.jsonl", "jsonl"), ("c.json", "jsonl"), ("c.jsonl.gz", "jsonl"), ("C.JSONL.GZ", "jsonl"),
    ("p.tsv", "tsv"), ("p.tsv.gz", "tsv"), ("P.TSV.GZ", "tsv"), ("stsb.dev.tsv", "tsv"),
    ("p.csv", "csv"), ("p.Csv.gz", "csv"), ("p.tsv.txt", "text"),
])
def test_format_of_every_name(name: str, fmt: str) -> None:
    assert format_of(Path(name)) == fmt


@pytest.mark.parametrize(("name", "shown"), [("x.txt", ".txt"), ("x.txt.gz", ".txt"), ("x", "no suffix"),
                                             ("x.GZ", "no suffix")])
def test_require_format_names_the_suffix_and_the_choices(name: str, shown: str) -> None:
    with raises_exactly(f"{name}: unknown pairs format '{shown}'; use .tsv, .csv or .jsonl (optionally .gz)"):
        require_format(Path(name), "pairs", ("tsv", "csv", "jsonl"))
    assert require_format(Path("x.JSON.gz"), "NLI", ("jsonl",)) == "jsonl"


# ---------------------------------------------------------------------------------------- opening, decoding


def test_gzip_bom_crlf_and_an_invalid_byte_named_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "p.TXT.GZ", b"\xef\xbb\xbffirst\r\nsecond\n\nfou\xffrth\nfifth\n")
    lines = textfile.Utf8Lines(path, encoding_errors="replace")
    assert list(lines) == ["first\r", "second", "", "fou\ufffdrth", "fifth"] and lines.replaced == 1
    with raises_exactly(f"{path}:4: not valid UTF-8 (invalid start byte 0xff at byte 4 of the line); "
                        "save the file as UTF-8"):
        list(text_lines(path))


def test_a_sequence_cut_at_the_end_of_the_file_is_named_on_the_last_line(tmp_path: Path) -> None:
    path = write(tmp_path / "cut.tsv", b"a\nb\nc\xc3")
    with raises_exactly(f"{path}:3: not valid UTF-8 (unexpected end of data 0xc3 at byte 2 of the line); "
                        "save the file as UTF-8"):
        list(text_lines(path))


def test_files_that_are_not_utf8_text_or_cannot_be_opened(tmp_path: Path) -> None:
    utf16 = tmp_path / "u.tsv"
    utf16.write_bytes("a\tb\n".encode("utf-16"))
    with raises_exactly(f"{utf16}: is UTF-16 text; save it as UTF-8"):
        list(text_lines(utf16))
    binary = write(tmp_path / "b.csv", b"x\x00y\n")
    with raises_exactly(f"{binary}: looks like a binary file, not text; pass a UTF-8 text file"):
        list(text_lines(binary))
    fake = write(tmp_path / "f.tsv", b"plain")
    fake = fake.rename(tmp_path / "f.tsv.GZ")
    with raises_exactly(f"{fake}: not a gzip file despite the .gz suffix"):
        open_binary(fake)
    with raises_exactly(f"{tmp_path / 'none.tsv'}: no such file"):
        open_binary(tmp_path / "none.tsv")


def test_json_objects_name_the_line_and_count_blanks(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", '{"a": 1}\n\n  \n{"a": 2}\n[1]\n')
    blanks: list[int] = []
    records = json_objects(path, "a field a", required="a", on_blank=lambda: blanks.append(1))
    assert [next(records), next(records)] == [(1, {"a": 1}), (4, {"a": 2})] and len(blanks) == 2
    with raises_exactly(f"{path}:5: expected a JSON object with a field a"):
        next(records)
    bad = write(tmp_path / "bad.jsonl", '{"a": 1}\n{"a": \n')
    with raises_exactly(f"{bad}:2: invalid JSON (Expecting value); each line must be one JSON object"):
        list(json_objects(bad, "a"))


# ------------------------------------------------------------------------------ every reader, the same way


_PAIRS = "sentence1\tsentence2\tscore\nA cat sits.\tA cat is sitting.\t4.5\nA dog runs.\tThe sky is blue.\t0.5\n"
_LABELLED = "sentence1\tsentence2\tlabel\nA cat sits.\tA cat is sitting.\t1\nA dog runs.\tThe sky is blue.\t0\n"
_NLI = "premise\thypothesis\tlabel\nA cat sits.\tA cat is sitting.\tentailment\nA dog runs.\tNo dog.\tcontradiction\n"
_RERANK = json.dumps({"query": "cat", "positive": ["A cat sits."], "negative": ["The sky is blue."]}) + "\n"
_CORPUS = "text\nA cat sits.\nA dog runs.\n"

# (reader, file content, what the reader gives back): each named X.TSV.GZ / X.JSONL.GZ, a name none of the three
# former detectors read (two refused it, one decoded the gzip bytes as text)
READERS: dict[str, tuple[Callable[[Path], object], str, object]] = {
    "corpus": (lambda p: read_corpus([p]).sentences, _CORPUS, ["A cat sits.", "A dog runs."]),
    "scored pairs": (lambda p: read_scored_pairs(p).scores, _PAIRS, [4.5, 0.5]),
    "labelled pairs": (lambda p: read_labelled_pairs(p).labels, _LABELLED, [1, 0]),
    "nli": (lambda p: read_nli([p]).labels, _NLI, [0, 2]),
    "positives (clsr)": (lambda p: read_positive_pairs([p], min_score=4.0).first, _PAIRS, ["A cat sits."]),
    "task detection": (detect_task_type, _PAIRS, "sts"),
    "reranking": (lambda p: read_rerank(p).positives, _RERANK, [1]),
}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_opens_and_detects_through_textfile(tmp_path: Path, reader: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    read, content, expected = READERS[reader]
    path = write(tmp_path / ("X.JSONL.GZ" if content is _RERANK else "X.TSV.GZ"), "\ufeff" + content)
    assert read(path) == expected
    # and the suffix table is the one in textfile: a suffix added there is read by every reader
    monkeypatch.setitem(textfile._FORMAT_OF_SUFFIX, ".pairs", format_of(path))
    assert read(write(tmp_path / "x.pairs.gz", content)) == expected


def test_a_header_is_sniffed_whatever_bytes_follow_and_the_reader_names_them(tmp_path: Path) -> None:
    path = write(tmp_path / "p.tsv", _PAIRS.encode() + b"caf\xe9\tb\t1\n")
    assert sniff_columns(path) == {"sentence1", "sentence2", "score"}
    assert detect_task_type(path) == "sts"
    with raises_exactly(f"{path}:4: not valid UTF-8 (invalid continuation byte 0xe9 at byte 4 of the line); "
                        "save the file as UTF-8"):
        read_scored_pairs(path)


def test_old_mac_line_endings_are_named_not_a_python_hint(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "sentence1,sentence2,score\ra,b,1\r")
    with raises_exactly(f"{path}:1: malformed CSV (a line break inside a row: the file uses old Mac line endings "
                        "or a bare carriage return); save it with LF or CRLF line endings"):
        read_scored_pairs(path)
