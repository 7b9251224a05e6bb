"""The training corpus reader (`sentadapt.data.corpus`) and the NLI reader (`sentadapt.data.nli`)."""

from __future__ import annotations

import contextlib
import gzip
import json
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentadapt.data.corpus import ENCODING_ERRORS, Corpus, CorpusReport, read_corpus
from sentadapt.data.nli import NLI_LABELS, entailment_pairs, read_nli
from sentadapt.errors import ConfigError, DataError

SHARED_NLI = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nli"


@contextlib.contextmanager
def raises_exactly(kind: type[Exception], message: str) -> Iterator[None]:
    with pytest.raises(kind) as caught:
        yield
    assert str(caught.value) == message


def write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------------------------------------ plain text


def test_plain_text_with_bom_crlf_and_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt", "\ufeff  the server is down \r\n\r\n\tdns timeout\r\n   \r\nlast line")
    corpus = read_corpus([path])
    assert corpus.sentences == ["the server is down", "dns timeout", "last line"]
    assert corpus.report == CorpusReport(files=[str(path)], lines_read=5, sentences=3, skipped={"blank": 2})
    assert corpus.report.summary() == "read 5 lines from 1 file → 3 sentences (skipped: 2 blank)"
    assert len(corpus) == 3


def test_dedup_on_and_off(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt", "a\nb\na\n  b  \nc\na\n")
    on = read_corpus([path])
    assert on.sentences == ["a", "b", "c"]
    assert on.report.skipped == {"duplicate": 3}
    assert on.report.summary() == "read 6 lines from 1 file → 3 sentences (skipped: 3 duplicate)"
    off = read_corpus([path], dedup=False)
    assert off.sentences == ["a", "b", "a", "b", "c", "a"]
    assert off.report.skipped == {}
    assert off.report.summary() == "read 6 lines from 1 file → 6 sentences"


def test_several_files_concatenate_in_order_and_dedup_across_them(tmp_path: Path) -> None:
    first = write(tmp_path / "1.txt", "one\ntwo\n\n")
    second = write(tmp_path / "2.txt.gz", "two\nthree\n")
    third = write(tmp_path / "3.jsonl", json.dumps({"text": "four"}) + "\n" + json.dumps({"text": "one"}) + "\n")
    corpus = read_corpus([first, second, str(third)])
    assert corpus.sentences == ["one", "two", "three", "four"]
    report = corpus.report
    assert report.files == [str(first), str(second), str(third)]
    assert (report.lines_read, report.sentences, report.skipped) == (7, 4, {"blank": 1, "duplicate": 2})
    assert report.summary() == "read 7 lines from 3 files → 4 sentences (skipped: 1 blank, 2 duplicate)"


def test_a_folder_or_a_pattern_is_its_corpus_files_sorted(tmp_path: Path) -> None:
    """Hidden files and folders, other formats and model folders (a run written inside the corpus folder, its
    vocab.txt) are left out."""
    from sentadapt.data.corpus import corpus_files

    folder = tmp_path / "docs"
    for name in ("b.txt", "a.jsonl", "sub/c.txt.gz", "README.md", "notes.json", ".cache/x.txt", "sub/.hidden.txt",
                 "t.parquet.gz", "d.csv", "runs/x/config.json", "runs/x/vocab.txt", "runs/x/stage/notes.txt",
                 "model/modules.json", "model/merges.txt"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x\n")
    inside = [str(folder / name) for name in ("a.jsonl", "b.txt", "d.csv", "sub/c.txt.gz")]
    assert corpus_files([folder]) == inside
    assert corpus_files([str(folder / "*.txt"), "owner/dataset"]) == [str(folder / "b.txt"), "owner/dataset"]
    assert corpus_files([str(folder / "**" / "*.txt*")]) == [str(folder / "b.txt"), str(folder / "sub/c.txt.gz")]
    assert corpus_files([folder / "b.txt"]) == [str(folder / "b.txt")]
    with pytest.raises(DataError) as caught:
        corpus_files([str(folder / "*.tsv")])
    assert str(caught.value) == f"{folder}/*.tsv: matches no file"
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "README.md").write_text("x\n")
    with pytest.raises(DataError) as caught:
        corpus_files([tmp_path / "empty"])
    assert str(caught.value) == (f"{tmp_path / 'empty'}: a folder with no corpus files (.txt, .text, .jsonl, .csv, "
                                 ".tsv, .parquet, or .gz of them); pass files by name")


def test_an_empty_corpus_of_many_files_is_one_short_line(tmp_path: Path) -> None:
    files = [tmp_path / f"part-{i}.txt" for i in range(6)]
    for path in files:
        path.write_text("")
    with pytest.raises(DataError) as caught:
        read_corpus(files)
    assert str(caught.value) == (f"{files[0]}, {files[1]}, {files[2]} and 3 more files: no sentences (0 lines read: "
                                 "all files are empty); pass text with one sentence per line")


def test_gzipped_plain_text(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt.gz", "\ufeffalpha\r\nbeta\n")
    assert read_corpus([path]).sentences == ["alpha", "beta"]


def test_a_file_without_a_suffix_is_plain_text_and_a_lone_sentence_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "corpus", "x, y and z\n")
    corpus = read_corpus(path)  # a single path is accepted too
    assert corpus.sentences == ["x, y and z"]
    assert corpus.report.summary() == "read 1 line from 1 file → 1 sentence"


def test_min_chars(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt", "ok\na longer line\n\nabc\n")
    corpus = read_corpus([path], min_chars=3)
    assert corpus.sentences == ["a longer line", "abc"]
    assert corpus.report.skipped == {"shorter than 3 chars": 1, "blank": 1}
    with raises_exactly(ConfigError, "--min-chars 0: expected a whole number of at least 1"):
        read_corpus([path], min_chars=0)


# ----------------------------------------------------------------------------------------- jsonl, csv, tsv


def test_jsonl_with_text_column_and_the_auto_rule(tmp_path: Path) -> None:
    rows = [{"id": 1, "body": "first", "title": "t"}, {"id": 2, "body": " second ", "title": "t"}]
    path = write(tmp_path / "c.jsonl", "".join(json.dumps(row) + "\n" for row in rows) + "\n")
    corpus = read_corpus([path], text_column="body")
    assert corpus.sentences == ["first", "second"]
    assert corpus.report.skipped == {"blank": 1}
    with raises_exactly(
        DataError, f"{path}:1: 3 fields (id, body, title) and none is named text or sentence; pass --text-column NAME"
    ):
        read_corpus([path])
    with raises_exactly(
        DataError, f"{path}:1: no field 'text' (fields: id, body, title); pass --text-column with one of them"
    ):
        read_corpus([path], text_column="text")

    single = write(tmp_path / "single.jsonl.gz", '{"s": "only field"}\n{"s": null}\n{"s": ""}\n')
    assert read_corpus([single]).sentences == ["only field"]
    named = write(tmp_path / "named.json", '{"id": 1, "sentence": "by name"}\n')
    assert read_corpus([named]).sentences == ["by name"]
    text_first = write(tmp_path / "both.jsonl", '{"sentence": "no", "text": "yes"}\n')
    assert read_corpus([text_first]).sentences == ["yes"]


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    missing = write(tmp_path / "m.jsonl", '{"text": "a"}\n{"other": "b"}\n')
    with raises_exactly(
        DataError,
        f"{missing}:2: missing field 'text' (the text field picked on line 1); every line needs it, "
        "or pass --text-column NAME",
    ):
        read_corpus([missing])
    with raises_exactly(
        DataError, f"{missing}:2: no field 'text' (fields: other); pass --text-column with one of them"
    ):
        read_corpus([missing], text_column="text")
    bad = write(tmp_path / "b.jsonl", '{"text": "a"}\n{"text": "b"\n')
    with raises_exactly(
        DataError, f"{bad}:2: invalid JSON (Expecting ',' delimiter); each line must be one JSON object"
    ):
        read_corpus([bad])
    number = write(tmp_path / "n.jsonl", '{"text": 3}\n')
    with raises_exactly(
        DataError, f"{number}:1: 'text' holds a number, not text; pass --text-column with a text column"
    ):
        read_corpus([number])
    strings = write(tmp_path / "s.jsonl", '"just a string"\n')
    with raises_exactly(DataError, f"{strings}:1: expected a JSON object with a text field, found a JSON string"):
        read_corpus([strings])
    array = write(tmp_path / "a.json", '[\n  {"text": "a"}\n]\n')
    with raises_exactly(DataError, f"{array}:1: a JSON array, not JSON Lines; write one JSON object per line"):
        read_corpus([array])



def test_a_pairs_file_saved_as_one_json_array_is_named_as_such(tmp_path: Path) -> None:
    """`eval --pairs` said "no sentence pairs (only blank lines or comments)" of a .json holding one array; every
    JSON Lines reader now says what the corpus reader says."""
    from sentadapt.data.pair_files import read_user_scored_pairs
    from sentadapt.evaluation.task_types import detect_task_type

    spread = write(tmp_path / "pairs.json", '\n[\n  {"sentence1": "a", "sentence2": "b", "score": 1}\n]\n')
    with raises_exactly(DataError, f"{spread}:2: a JSON array, not JSON Lines; write one JSON object per line"):
        detect_task_type(spread)
    one_line = write(tmp_path / "one.jsonl", '[{"sentence1": "a", "sentence2": "b", "score": 1}]\n')
    with raises_exactly(DataError, f"{one_line}:1: a JSON array, not JSON Lines; write one JSON object per line"):
        read_user_scored_pairs(one_line)  # its columns sniffed first
    with raises_exactly(DataError, f"{one_line}:1: a JSON array, not JSON Lines; write one JSON object per line"):
        read_nli([one_line])  # the JSON Lines reader every other file goes through


def test_csv_and_tsv_columns(tmp_path: Path) -> None:
    one = write(tmp_path / "one.csv", 'sentence\n"hello, world"\n\nplain\n""\n')
    corpus = read_corpus([one])
    assert corpus.sentences == ["hello, world", "plain"]
    assert corpus.report.skipped == {"blank": 2}
    assert corpus.report.lines_read == 4  # the header is not a record

    several = write(tmp_path / "several.tsv.gz", 'id\ttext\tlabel\r\n1\t"Quoted" she said\tx\r\n2\t\ty\r\n')
    corpus = read_corpus([several])  # auto: the column named text; TSV has no quoting
    assert corpus.sentences == ['"Quoted" she said']
    assert corpus.report.skipped == {"blank": 1}
    assert read_corpus([several], text_column="label").sentences == ["x", "y"]

    ambiguous = write(tmp_path / "amb.csv", "a,b\n1,2\n")
    with raises_exactly(
        DataError, f"{ambiguous}:1: 2 columns (a, b) and none is named text or sentence; pass --text-column NAME"
    ):
        read_corpus([ambiguous])
    with raises_exactly(
        DataError, f"{ambiguous}:1: no column 'c' (columns: a, b); pass --text-column with one of them"
    ):
        read_corpus([ambiguous], text_column="c")


def test_parquet_columns_row_groups_and_errors(tmp_path: Path) -> None:
    """A Parquet file (what Hugging Face datasets store) is read as a table: its text column, picked as in the
    other formats, one row group at a time, a null counted as a blank record."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": [1, 2, 3, 4], "text": [" the server is down ", None, "red car", "the server is down"]})
    path = tmp_path / "corpus.parquet"
    pq.write_table(table, path, row_group_size=2)
    moved: list[int] = []
    corpus = read_corpus([path])
    assert corpus.sentences == ["the server is down", "red car"]
    assert corpus.report.lines_read == 4 and corpus.report.skipped == {"blank": 1, "duplicate": 1}
    from sentadapt.data.corpus import scan_corpus

    scan_corpus([path], lambda texts: None, on_bytes=moved.append)
    assert len(moved) == 2 and sum(moved) <= path.stat().st_size  # one step a row group
    with raises_exactly(DataError, f"{path}: row 1: 'id' holds a number, not text; pass --text-column with a text "
                                   "column"):
        read_corpus([path], text_column="id")
    with raises_exactly(DataError, f"{path}: no column 'body' (columns: id, text); pass --text-column with one of "
                                   "them"):
        read_corpus([path], text_column="body")
    broken = write(tmp_path / "broken.parquet", "not parquet at all\n")
    with pytest.raises(DataError, match=rf"^{broken}: not a readable Parquet file \("):
        read_corpus([broken])


def test_a_parquet_pairs_file_reads_as_its_tsv_does(tmp_path: Path) -> None:
    """Labelled pairs as Hugging Face datasets store them (Parquet, sentence1/sentence2/score or label columns): the
    same pairs, scores, weights and task as the same rows in a .tsv; a missing column is named."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sentadapt.data.pair_files import read_labelled_pairs, read_user_scored_pairs, sniff_columns
    from sentadapt.evaluation.task_types import detect_task_type

    rows = [("the server is down", "the server is not running", 4.5, 2.0), ("a man plays", "a dog runs", 0.5, 1.0),
            ("red car", "a red car", 5.0, 1.0), ("dns timeout", "login failed", 1.0, 3.0)]
    tsv = write(tmp_path / "pairs.tsv", "sentence1\tsentence2\tscore\tweight\n"
                + "".join(f"{a}\t{b}\t{score}\t{weight}\n" for a, b, score, weight in rows))
    scored = tmp_path / "pairs.parquet"
    pq.write_table(pa.table({"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows],
                             "score": [r[2] for r in rows], "weight": [r[3] for r in rows]}), scored,
                   row_group_size=3)
    from_tsv, from_parquet = read_user_scored_pairs(tsv), read_user_scored_pairs(scored)
    assert (from_parquet.sentence1, from_parquet.sentence2, from_parquet.scores, from_parquet.weights) == (
        from_tsv.sentence1, from_tsv.sentence2, from_tsv.scores, from_tsv.weights)
    assert sniff_columns(scored) == {"sentence1", "sentence2", "score", "weight"}
    assert detect_task_type(scored) == "sts"
    labelled = tmp_path / "labelled.parquet"
    pq.write_table(pa.table({"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows],
                             "label": [1, 0, 1, 0]}), labelled)
    assert detect_task_type(labelled) == "pair-classification"
    assert read_labelled_pairs(labelled).labels == [1, 0, 1, 0]
    no_label = tmp_path / "no_label.parquet"
    pq.write_table(pa.table({"sentence1": ["a"], "sentence2": ["b"]}), no_label)
    with raises_exactly(DataError, f"{no_label}: no column(s) label (columns: sentence1, sentence2); expected "
                                   "sentence1, sentence2, label"):
        read_labelled_pairs(no_label)


def test_table_rows_with_missing_or_extra_cells(tmp_path: Path) -> None:
    short = write(tmp_path / "short.tsv", "id\ttext\n1\tok\n2\n")
    with raises_exactly(
        DataError, f"{short}:3: expected 2 columns like the header, found 1; fields cannot contain tabs"
    ):
        read_corpus([short])
    extra = write(tmp_path / "extra.csv", "text\nfine\nunquoted, comma\n")
    with raises_exactly(
        DataError, f"{extra}:3: expected 1 columns like the header, found 2; quote fields that contain ','"
    ):
        read_corpus([extra])


# ------------------------------------------------------------------------------------------------ encodings


@pytest.mark.parametrize("chunk_bytes", [1, 3, 7, 4 << 20])
def test_reading_in_chunks_splits_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    # the first read is at least 8 KiB (BOM and binary checks), the rest come in chunk_bytes pieces
    monkeypatch.setattr("sentadapt.data.textfile._CHUNK_BYTES", chunk_bytes)
    lines = ["héllo wörld", "a", "", "日本語のテキスト", "a somewhat longer line than the chunk", "z"] * 300
    path = write(tmp_path / "c.txt", "\ufeff" + "\r\n".join(lines))
    assert read_corpus([path], dedup=False).sentences == [line for line in lines if line]
    bad = write(tmp_path / "bad.txt", "é\n".encode() * 6000 + b"\xe9t\xe9\n" + "é\n".encode())
    with raises_exactly(
        DataError,
        f"{bad}:6001: not valid UTF-8 (invalid continuation byte 0xe9 at byte 1 of the line); "
        "fix the file or pass --encoding-errors replace|skip",
    ):
        read_corpus([bad])
    assert read_corpus([bad], encoding_errors="replace").sentences == ["é", "\ufffdt\ufffd"]


def test_names_from_the_data_are_shown_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", '"multi\nline",other\n1,2\n')
    with raises_exactly(
        DataError,
        f"{path}:2: 2 columns (multi\\nline, other) and none is named text or sentence; pass --text-column NAME",
    ):
        read_corpus([path])


def test_invalid_utf8_strict_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt", b"good\nalso good\nbad \xff byte\nfine\n")
    with raises_exactly(
        DataError,
        f"{path}:3: not valid UTF-8 (invalid start byte 0xff at byte 5 of the line); "
        "fix the file or pass --encoding-errors replace|skip",
    ):
        read_corpus([path])


def test_invalid_utf8_replace_and_skip(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt.gz", b"good\nbad \xff byte\n\xc3\n\nfine\n")
    replaced = read_corpus([path], encoding_errors="replace")
    assert replaced.sentences == ["good", "bad \ufffd byte", "\ufffd", "fine"]
    assert (replaced.report.replaced, replaced.report.skipped) == (2, {"blank": 1})
    assert replaced.report.summary() == (
        "read 5 lines from 1 file → 4 sentences "
        "(skipped: 1 blank; 2 lines with invalid UTF-8 kept, bad bytes replaced by U+FFFD)"
    )
    skipped = read_corpus([path], encoding_errors="skip")
    assert skipped.sentences == ["good", "fine"]
    assert skipped.report.skipped == {"blank": 1, "invalid UTF-8": 2}
    assert skipped.report.summary() == "read 5 lines from 1 file → 2 sentences (skipped: 2 invalid UTF-8, 1 blank)"


def test_invalid_utf8_in_a_table_keeps_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path / "c.csv", b"text\nok\n\xfe\nlast\n")
    with raises_exactly(
        DataError,
        f"{path}:3: not valid UTF-8 (invalid start byte 0xfe at byte 1 of the line); "
        "fix the file or pass --encoding-errors replace|skip",
    ):
        read_corpus([path])
    corpus = read_corpus([path], encoding_errors="skip")
    assert corpus.sentences == ["ok", "last"]
    assert (corpus.report.lines_read, corpus.report.skipped) == (3, {"invalid UTF-8": 1})


def test_unknown_encoding_errors_mode(tmp_path: Path) -> None:
    path = write(tmp_path / "c.txt", "a\n")
    with raises_exactly(ConfigError, "--encoding-errors 'ignore': expected one of strict, replace, skip"):
        read_corpus([path], encoding_errors="ignore")


# ------------------------------------------------------------------------------------- files that are wrong


def test_binary_utf16_directory_missing_and_fake_gzip(tmp_path: Path) -> None:
    binary = write(tmp_path / "model.bin", b"PK\x03\x04\x00\x00weights")
    with raises_exactly(DataError, f"{binary}: looks like a binary file, not text; pass a UTF-8 text file"):
        read_corpus([binary])
    utf16 = tmp_path / "u16.txt"
    utf16.write_bytes("hello\n".encode("utf-16"))
    with raises_exactly(DataError, f"{utf16}: is UTF-16 text; save it as UTF-8"):
        read_corpus([utf16])
    with raises_exactly(DataError, f"{tmp_path}: is a directory; pass a file"):
        read_corpus([tmp_path])
    missing = tmp_path / "nope.txt"
    with raises_exactly(DataError, f"{missing}: no such file"):
        read_corpus([missing])
    fake = tmp_path / "fake.txt.gz"
    fake.write_text("not gzip\n")
    with raises_exactly(DataError, f"{fake}: not a gzip file despite the .gz suffix"):
        read_corpus([fake])
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress(b"line\n" * 1000)[:40])
    with pytest.raises(DataError, match="corrupt or truncated gzip file"):
        read_corpus([truncated])


def test_a_missing_relative_path_is_not_taken_for_a_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    for source in ("data/missing", "corpora/train.txt", "./x/y"):
        with raises_exactly(DataError, f"{Path(source)}: no such file"):
            read_corpus([source])


def test_empty_file_and_only_blank_lines(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.txt", "")
    with raises_exactly(
        DataError, f"{empty}: no sentences (0 lines read: the file is empty); pass text with one sentence per line"
    ):
        read_corpus([empty])
    bom_only = write(tmp_path / "bom.txt", "\ufeff")
    with raises_exactly(
        DataError,
        f"{empty}, {bom_only}: no sentences (0 lines read: all files are empty); pass text with one sentence per line",
    ):
        read_corpus([empty, bom_only])
    blanks = write(tmp_path / "blank.txt", "\n  \r\n\t\n")
    with raises_exactly(
        DataError, f"{blanks}: no sentences (3 lines read: 3 blank); pass text with one sentence per line"
    ):
        read_corpus([blanks])
    header_only = write(tmp_path / "h.csv", "text\n\n")
    with raises_exactly(
        DataError,
        f"{blanks}, {header_only}: no sentences (4 lines read: 4 blank); pass text with one sentence per line",
    ):
        read_corpus([blanks, header_only])


def test_no_sources_is_a_config_error() -> None:
    with raises_exactly(ConfigError, "no corpus given; pass one or more text files (one sentence per line)"):
        read_corpus([])


# ------------------------------------------------------------------------------------------- Hub datasets


def test_hub_id_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for source in ("someone/some-corpus", "someone/some-corpus:validation"):
        with raises_exactly(
            DataError,
            f"{source}: not a local file, and the Hugging Face Hub is unreachable (offline); pass a local text file",
        ):
            read_corpus([source])


class _FakeDataset:
    def __init__(self, columns: dict[str, list[object]]) -> None:
        self.columns = columns
        self.column_names = list(columns)

    def iter(self, batch_size: int) -> Iterator[dict[str, list[object]]]:
        rows = len(next(iter(self.columns.values())))
        for start in range(0, rows, batch_size):
            yield {name: values[start:start + batch_size] for name, values in self.columns.items()}


def test_hub_id_online_uses_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def load_dataset(name: str, split: str) -> _FakeDataset:
        calls.append((name, split))
        if name == "someone/gone":
            raise FileNotFoundError("Dataset 'someone/gone' doesn't exist on the Hub\nmore detail")
        return _FakeDataset({"idx": [1, 2, 3], "text": [" hub one ", "", "hub two"]})

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sentadapt.data.corpus.hub_is_reachable", lambda: True)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    corpus = read_corpus(["someone/corpus", "someone/corpus:test"])
    assert calls == [("someone/corpus", "train"), ("someone/corpus", "test")]
    assert corpus.sentences == ["hub one", "hub two"]
    assert corpus.report.skipped == {"blank": 2, "duplicate": 2}
    with raises_exactly(
        DataError, "someone/corpus: no column 'body' (columns: idx, text); pass --text-column with one of them"
    ):
        read_corpus(["someone/corpus"], text_column="body")
    with raises_exactly(
        DataError,
        "someone/gone: could not load the Hub dataset (FileNotFoundError: Dataset 'someone/gone' doesn't exist on "
        "the Hub); check the name and split, or pass a local text file",
    ):
        read_corpus(["someone/gone"])


# ---------------------------------------------------------------------------------------------- properties

_LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff"), min_size=1, max_size=20
).filter(lambda text: text.strip() != "")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_LINE, min_size=1, max_size=12),
    endings=st.lists(st.sampled_from(["\n", "\r\n"]), min_size=12, max_size=12),
    bom=st.booleans(),
    final_newline=st.booleans(),
    gz=st.booleans(),
)
def test_property_every_valid_line_comes_back_stripped(
    lines: list[str], endings: list[str], bom: bool, final_newline: bool, gz: bool
) -> None:
    text = "".join(line + ending for line, ending in zip(lines, endings))
    if not final_newline:
        text = text.removesuffix(endings[len(lines) - 1])
    text = ("\ufeff" if bom else "") + text
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / ("c.txt.gz" if gz else "c.txt"), text)
        corpus = read_corpus([path], dedup=False)
    assert corpus.sentences == [line.strip() for line in lines]
    assert corpus.report.lines_read == len(lines)


_SOUP = st.lists(
    st.sampled_from(
        [
            b"\n",
            b"\r\n",
            b"\r",
            b"\xff",
            b"\xc3",
            b"\xef\xbb\xbf",
            b"a",
            b" ",
            b",",
            b"\t",
            b'"',
            b"{",
            b"}",
            b'"text"',
            b":",
            b"[",
            b"1",
            b"null",
            b"\x00",
            "é".encode(),
            b"\xe2\x80\xa8",
        ]
    ),
    max_size=40,
).map(b"".join)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.one_of(st.binary(max_size=200), _SOUP),
    name=st.sampled_from(["c.txt", "c.jsonl", "c.csv", "c.tsv", "c.txt.gz", "c.jsonl.gz", "raw.gz"]),
    encoding_errors=st.sampled_from([*ENCODING_ERRORS, "bogus"]),
    text_column=st.sampled_from([None, "text"]),
)
def test_property_arbitrary_bytes_never_crash(
    data: bytes, name: str, encoding_errors: str, text_column: str | None
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(gzip.compress(data) if name.endswith(".txt.gz") or name.endswith(".jsonl.gz") else data)
        try:
            corpus = read_corpus([path], text_column=text_column, encoding_errors=encoding_errors)
        except (DataError, ConfigError) as error:
            assert "\n" not in str(error)  # the CLI prints errors as one line
            return
    assert isinstance(corpus, Corpus)
    assert corpus.sentences and all(s == s.strip() and s for s in corpus.sentences)
    report = corpus.report
    assert report.lines_read == report.sentences + sum(report.skipped.values())


# ---------------------------------------------------------------------------------------------------- NLI


def test_nli_jsonl_with_string_and_int_labels(tmp_path: Path) -> None:
    rows = [
        {"premise": "A man plays a guitar .", "hypothesis": "A person plays music .", "label": "entailment"},
        {"sentence1": "A man plays .", "sentence2": "Nobody plays .", "gold_label": "CONTRADICTION"},
        {"premise": "A dog runs .", "hypothesis": "A dog runs fast .", "label": 1},
        {"sentence1": "x", "sentence2": "y", "gold_label": "-"},
        {"premise": "A cat sleeps .", "hypothesis": "An animal rests .", "label": 0},
        {"premise": "a", "hypothesis": "b", "label": -1},
        {"premise": " ", "hypothesis": "b", "label": "neutral"},
    ]
    path = write(
        tmp_path / "nli.jsonl.gz",
        "\n".join(json.dumps(row) for row in rows[:4]) + "\n\n" + "\n".join(json.dumps(row) for row in rows[4:]) + "\n",
    )
    nli = read_nli([path])
    assert nli.premises == ["A man plays a guitar .", "A man plays .", "A dog runs .", "A cat sleeps ."]
    assert nli.hypotheses[1] == "Nobody plays ."
    assert nli.labels == [0, 2, 1, 0]
    assert [NLI_LABELS[label] for label in nli.labels] == ["entailment", "contradiction", "neutral", "entailment"]
    assert nli.skipped == {"no gold label": 2, "blank": 1, "empty text": 1}
    assert nli.source == str(path)
    assert nli.label_counts() == {"entailment": 2, "neutral": 1, "contradiction": 1}
    assert entailment_pairs(nli) == [
        ("A man plays a guitar .", "A person plays music ."),
        ("A cat sleeps .", "An animal rests ."),
    ]


def test_nli_tsv_and_csv(tmp_path: Path) -> None:
    tsv = write(
        tmp_path / "nli.tsv", 'sentence1\tsentence2\tgold_label\n"Hi" he said .\tHe spoke .\t0\nA\tB\tNeutral\n'
    )
    csv_file = write(tmp_path / "nli.csv", 'premise,hypothesis,label\n"One, two",Three,2\nC,D,-\n')
    nli = read_nli([tsv, csv_file])
    assert nli.premises == ['"Hi" he said .', "A", "One, two"]
    assert nli.labels == [0, 1, 2]
    assert nli.skipped == {"no gold label": 1}
    assert nli.source == f"{tsv}, {csv_file}"


def test_hugging_face_layouts_of_nli_and_positive_pairs(tmp_path: Path) -> None:
    """What sentence-transformers' datasets store: NLI as Parquet with integer labels (0 entailment, 1 neutral,
    2 contradiction, -1 none), positive pairs as anchor/positive (a negative column beside them left unread)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sentadapt.data.positives import is_pair_file, read_positive_pairs

    nli = tmp_path / "nli.parquet"
    pq.write_table(pa.table({"premise": ["a man plays", "a dog runs", "red car", "blue sky"],
                             "hypothesis": ["someone plays", "a cat sleeps", "a car", "green sea"],
                             "label": [0, 2, 0, -1]}), nli)
    read = read_nli([nli])
    assert (read.premises, read.labels, read.skipped) == (["a man plays", "a dog runs", "red car"], [0, 2, 0],
                                                          {"no gold label": 1})
    triplets = write(tmp_path / "triplets.tsv", "anchor\tpositive\tnegative\nthe server is down\tthe server "
                     "is not running\ta cat sleeps\n")
    pairs = tmp_path / "pairs.parquet"
    pq.write_table(pa.table({"anchor": ["dns timeout"], "positive": ["a dns lookup timed out"]}), pairs)
    assert all(is_pair_file(path) for path in (nli, triplets, pairs))
    positives = read_positive_pairs([nli, triplets, pairs], min_score=4.0)
    assert list(zip(positives.first, positives.second)) == [
        ("a man plays", "someone plays"), ("red car", "a car"), ("the server is down", "the server is not running"),
        ("dns timeout", "a dns lookup timed out")]
    assert positives.notes[1:] == [f"{triplets}: 1 sentence pair", f"{pairs}: 1 sentence pair"]


def test_nli_errors(tmp_path: Path) -> None:
    unknown = write(tmp_path / "u.jsonl", '{"premise": "a", "hypothesis": "b", "label": "maybe"}\n')
    with raises_exactly(
        DataError,
        f"{unknown}:1: unknown label 'maybe'; expected one of entailment, neutral, contradiction (or 0, 1, 2)",
    ):
        read_nli([unknown])
    out_of_range = write(
        tmp_path / "r.jsonl",
        '{"premise": "a", "hypothesis": "b", "label": 0}\n{"premise": "a", "hypothesis": "b", "label": 3}\n',
    )
    with raises_exactly(
        DataError,
        f"{out_of_range}:2: unknown label '3'; expected one of entailment, neutral, contradiction (or 0, 1, 2)",
    ):
        read_nli([out_of_range])
    no_label = write(tmp_path / "l.jsonl", '{"premise": "a", "hypothesis": "b"}\n')
    with raises_exactly(
        DataError,
        f"{no_label}:1: missing field 'label' (or 'gold_label', 'entailment_label', 'entailment'); "
        "expected premise, hypothesis and label",
    ):
        read_nli([no_label])
    no_hypothesis = write(tmp_path / "h.jsonl", '\n{"premise": "a", "label": "neutral"}\n')
    with raises_exactly(
        DataError,
        f"{no_hypothesis}:2: missing field 'hypothesis' (or 'sentence2'); expected premise, hypothesis and label",
    ):
        read_nli([no_hypothesis])
    header = write(tmp_path / "h.tsv", "premise\thypo\tlabel\na\tb\t0\n")
    with raises_exactly(
        DataError,
        f"{header}:1: header has no 'hypothesis' (or 'sentence2') column (columns: premise, hypo, label); "
        "expected premise, hypothesis and label columns",
    ):
        read_nli([header])
    txt = write(tmp_path / "snli.txt", "x\n")
    with raises_exactly(DataError,
                        f"{txt}: unknown NLI format '.txt'; use .jsonl, .tsv, .csv or .parquet (optionally .gz)"):
        read_nli([txt])
    only_dash = write(tmp_path / "d.jsonl", '{"premise": "a", "hypothesis": "b", "gold_label": "-"}\n')
    with raises_exactly(
        DataError,
        f"{only_dash}: no labelled pairs (1 record read: 1 no gold label); pass premise/hypothesis/label records",
    ):
        read_nli([only_dash])
    not_text = write(tmp_path / "t.jsonl", '{"premise": ["a"], "hypothesis": "b", "label": 0}\n')
    with raises_exactly(DataError, f"{not_text}:1: 'premise' must be text, found [\"a\"]"):
        read_nli([not_text])
    with raises_exactly(
        ConfigError, "no NLI files given; pass .jsonl/.tsv/.csv/.parquet files with premise, hypothesis and label"
    ):
        read_nli([])
    with raises_exactly(DataError, f"{tmp_path / 'missing.jsonl'}: no such file"):
        read_nli([tmp_path / "missing.jsonl"])


@pytest.mark.shared
@pytest.mark.skipif(not SHARED_NLI.is_dir(), reason="../shared/data/nli not present")
def test_shared_nli_files_read_with_the_readme_counts() -> None:
    # ../shared/data/nli/README.md: SNLI 1.0 dev and test (SentEval copies, "-" rows already removed),
    # JSON Lines with premise / hypothesis / label (strings) / source.
    expected = {
        "allnli.dev.jsonl.gz": {"entailment": 3329, "neutral": 3235, "contradiction": 3278},
        "snli.test.jsonl.gz": {"entailment": 3368, "neutral": 3219, "contradiction": 3237},
    }
    for name, counts in expected.items():
        nli = read_nli([SHARED_NLI / name])
        assert nli.label_counts() == counts
        assert len(nli) == sum(counts.values())
        assert nli.skipped == {}
        assert len(entailment_pairs(nli)) == counts["entailment"]
    dev = read_nli([SHARED_NLI / "allnli.dev.jsonl.gz"])
    assert (dev.premises[1], dev.hypotheses[1], dev.labels[1]) == (
        "Two women are embracing while holding to go packages .",
        "Two woman are holding packages .",
        0,
    )


def test_an_unchanged_corpus_is_counted_once_a_process_and_a_changed_one_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`adapt --recipe auto --dry-run` plans every candidate on the same corpus: one read; an edit is read again."""
    import sentadapt.data.corpus as corpus_module

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the server is down\nthe server is down\nthe backup failed\n\n")
    reads: list[int] = []
    real_scan = corpus_module.scan_corpus
    monkeypatch.setattr(corpus_module, "scan_corpus", lambda *args, **kwargs: reads.append(1) or real_scan(*args,
                                                                                                            **kwargs))
    # a repeat is dropped, a blank line is not a sentence
    assert corpus_module.count_sentences([corpus]) == 2
    assert corpus_module.count_sentences([str(corpus)]) == 2 and len(reads) == 1
    assert corpus_module.count_sentences([corpus], dedup=False) == 3 and len(reads) == 2  # other options: read
    with corpus.open("a") as appended:
        appended.write("a new sentence here\n")
    assert corpus_module.count_sentences([corpus]) == 3 and len(reads) == 3


def test_a_file_of_pairs_to_label_written_into_the_corpus_folder_is_not_corpus(tmp_path: Path) -> None:
    """Issue 82: `pairs DIR --output DIR/to-label.tsv` wrote into the corpus folder, and the next command it
    suggested read that file as corpus ("expected 1 columns like the header, found 3")."""
    from sentadapt.data.corpus import corpus_files
    from sentadapt.data.pair_files import LABEL_FILE_MARK

    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("the printer is jammed\nthe server is down\n")
    (folder / "tickets.tsv").write_text("text\nthe disk is full\n")
    (folder / "to-label.tsv").write_text(f"{LABEL_FILE_MARK}: …\nsentence1\tsentence2\tlabel\na\tb\t\n")
    assert corpus_files([folder]) == [str(folder / "a.txt"), str(folder / "tickets.tsv")]
    assert corpus_files([str(folder / "*.tsv")]) == [str(folder / "tickets.tsv")]
