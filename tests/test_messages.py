"""What a user reads, checked as issue 57 found it wrong (docs/reliability.md lists each): tables whole at 80
columns, labelled pairs files checked beyond each row, settings that would do nothing refused, lines that say what
happened on short runs and small sizes, flags, the command list, errors that come before the work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sentadapt.errors import ConfigError
from tests.conftest import run_adapt
from tests.run.test_hostile import at_80_columns, run_cli, run_cli_env

BOX = re.compile(r"[│┃┌┐└┘├┤┬┴┼─━╭╮╯╰┏┓┗┛┡┩╇┳┻]")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
INTERVAL = re.compile(r"\[[-+]?\d+\.\d{2}, [-+]?\d+\.\d{2}\]")


def flat(text: str) -> str:
    """Rendered text without its box characters, on one line: a wrapped cell reads as one sentence."""
    return " ".join(BOX.sub(" ", text).split())


def assert_whole_at_80(stdout: str) -> None:
    """Every line fits; every interval is whole (both bounds, the closing bracket); no number ends in …."""
    lines = stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, stdout
    for line in lines:
        assert len(re.findall(r"\[[-+\d]", line)) == len(INTERVAL.findall(line)), line  # not a header's [mean]
    assert re.findall(r"[-+]?\d+\.\d*…|…\d", stdout) == [], stdout


@pytest.mark.parametrize("data", [
    ["--pairs", str(EXAMPLES / "it-support-test.tsv")],
    ["--pairs", str(EXAMPLES / "it-support-pairclass.tsv")],
    ["--rerank", str(EXAMPLES / "it-support-rerank.jsonl")],
    ["--retrieval", str(EXAMPLES / "it-support-retrieval")],
    ["--pairs", str(EXAMPLES / "it-support-test.tsv"), "--dims", "32,16,8", "--quantize", "none,int8,binary"],
    ["--pairs", str(EXAMPLES / "it-support-test.tsv"), "--pairs", str(EXAMPLES / "it-support-pairclass.tsv"),
     "--dims", "32,16", "--quantize", "none,int8"],
], ids=["sts", "pair-classification", "reranking", "retrieval", "sizes", "sizes-of-two-kinds"])
def test_every_eval_table_keeps_every_figure_whole_at_80_columns(
    data: list[str], long_paths: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_80_columns(monkeypatch)
    out = tmp_path / "r.json"
    result = run_cli("eval", *map(str, long_paths), *data, "--json", str(out))
    assert result.exit_code == 0, result.output
    assert_whole_at_80(result.stdout)
    assert "Δ vs firs " not in result.stdout and "Δ vs firs\n" not in result.stdout
    for row in json.loads(out.read_text())[1:]:  # every Δ the JSON holds, as the table rounds it
        for comparison in row["delta_vs_first"]:
            delta = comparison["average"]
            if delta is not None and delta["ci"] is not None:
                shown = f"[{delta['ci'][0]:+.2f}, {delta['ci'][1]:+.2f}]"
                assert shown in result.stdout.replace("\n", " ") or shown.replace("+", "") in result.stdout


# ---------------------------------------------------------------------- labelled pairs files

HEADER = "sentence1\tsentence2\tscore\n"


def scored_file(tmp_path: Path, rows: list[tuple[str, str, str]], header: str = HEADER) -> Path:
    path = tmp_path / "dev.tsv"
    path.write_text(header + "".join("\t".join(row) + "\n" for row in rows))
    return path


def graded_rows(count: int = 40) -> list[tuple[str, str, str]]:
    return [(f"the disk {i} is full", f"volume {i} has no space", f"{(i * 7) % 6:g}") for i in range(count)]


@pytest.mark.parametrize(("change", "message"), [
    (lambda rows: rows.__setitem__(5, (*rows[5][:2], "7.5")),
     "{path}:7: score 7.5 is off this file's scale 0-5, which holds 39 of its 40 scores; fix it, or delete the row"),
    (lambda rows: rows.__setitem__(9, (*rows[9][:2], "-1")),
     "{path}:11: score -1 is off this file's scale 0-5, which holds 39 of its 40 scores; fix it, or delete the row"),
    (lambda rows: rows.append(rows[3]),
     "{path}:42: the pair of line 5 again (in the same order); keep each pair once (a pair counted twice narrows "
     "the confidence interval the decision reads)"),
    (lambda rows: rows.append((rows[3][1], rows[3][0], "0")),
     "{path}:42: the pair of line 5 again (in the other order), with score 0 here and 3 there; keep one row, with "
     "the score you mean"),
], ids=["above-the-scale", "below-the-scale", "repeated", "swapped-with-another-score"])
def test_a_scored_dev_file_with_an_off_scale_score_or_a_repeated_pair_is_one_line(
    change, message: str, tmp_path: Path
) -> None:
    from sentadapt.errors import DataError
    from sentadapt.evaluation.sts import StsEvaluator

    rows = graded_rows()
    change(rows)
    path = scored_file(tmp_path, rows)
    with pytest.raises(DataError) as error:
        StsEvaluator.from_pairs_file(path)
    assert str(error.value) == message.format(path=path)


def test_a_file_on_its_own_wider_scale_is_read(tmp_path: Path) -> None:
    """Spearman reads only the order: a 0-100 file (or 0-10, 0-1) is fine as a whole; the rule is the file's own
    scale, not 0-5."""
    from sentadapt.evaluation.sts import StsEvaluator

    rows = [(a, b, f"{float(score) * 20:g}") for a, b, score in graded_rows()]
    assert len(StsEvaluator.from_pairs_file(scored_file(tmp_path, rows)).tasks[0].gold) == 40


def test_a_pair_labelled_both_1_and_0_is_one_line(tmp_path: Path) -> None:
    from sentadapt.data.pair_files import read_labelled_pairs
    from sentadapt.errors import DataError

    rows = [(f"reset password {i}", f"password reset {i}", str(i % 2)) for i in range(10)]
    rows.append((rows[2][1], rows[2][0], "1"))
    path = scored_file(tmp_path, rows, header="sentence1\tsentence2\tlabel\n")
    with pytest.raises(DataError) as error:
        read_labelled_pairs(path)
    assert str(error.value) == (f"{path}:12: the pair of line 4 again (in the other order), with label 1 here and 0 "
                                "there; keep one row, with the label you mean")


def test_a_header_only_pairs_file_says_it_has_no_rows(tiny_model_dir: Path, tmp_path: Path) -> None:
    path = scored_file(tmp_path, [])
    result = run_cli("eval", str(tiny_model_dir), "--pairs", str(path))
    assert result.stderr.strip() == f"Error: {path}: a header but no sentence pairs below it; add one row per pair"


def test_a_folder_that_is_no_beir_collection_says_what_to_pass(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "labels"
    folder.mkdir()
    result = run_cli("eval", str(tiny_model_dir), "--pairs", str(folder))
    assert result.stderr.strip() == (f"Error: {folder}: is a folder, and not a retrieval collection (a BEIR folder: "
                                     "corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv); pass a labelled pairs file "
                                     "(.tsv/.csv/.jsonl/.parquet) or such a folder")


# ---------------------------------------------------------------------- settings that would do nothing


@pytest.mark.parametrize("setting", ["teacher_blend=auto", "distill_neighbours=4", "distill_batches=neighbours",
                                     "teacher_check=off"])
def test_a_teachers_setting_without_a_teacher_is_refused(setting: str, tiny_model_dir: Path, corpus: Path,
                                                         tmp_path: Path) -> None:
    name, value = setting.split("=")
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--set", setting, "--dry-run")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: {name}: acts on a teacher's distillation, and this run has no teacher; give --teacher MODEL (or a "
        f"vectors file), or drop --set {name}={value}")


def test_blend_auto_with_vectors_that_miss_dev_sentences_says_why_not_no_dev_set(
    tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    texts = [line.strip() for line in corpus.read_text().splitlines() if line.strip()]
    vectors = tmp_path / "teacher.jsonl"
    vectors.write_text("".join(json.dumps({"text": text, "embedding": [1.0, float(i % 5), 0.5 * i]}) + "\n"
                               for i, text in enumerate(dict.fromkeys(texts))))
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--teacher",
                       str(vectors), "--dev", str(pairs_tsv), "--set", "teacher_blend=auto", "--max-steps", "2",
                       "--batch-size", "8", "--max-length", "16")
    assert result.exit_code == 0, result.output
    assert ("teacher_blend auto: the teacher could not be scored on the dev set (its vectors file lacks dev "
            "sentences, above), so no blend can be weighed; the teacher alone is the target (α 1)") in result.stderr
    assert "no dev set" not in result.stderr


@pytest.mark.parametrize(("setting", "accepted"), [
    ("mask_neighbours=on", False), ("distill_neighbour_share=0.5", False), ("teacher_evidence=dev", False),
    ("teacher_risk=0.4", False), ("agreement_holdout=500", False),
    ("mask_neighbours=off", True), ("teacher_evidence=off", True), ("distill_neighbour_share=1", True),
])
def test_an_option_the_studies_rejected_is_gone_but_its_neutral_value_still_reads(
    setting: str, accepted: bool, tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    """Issue 59 removed five options; a saved run (or a script) holding the value that changed nothing still works."""
    name = setting.split("=")[0]
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--set", setting, "--dry-run")
    if accepted:
        assert result.exit_code == 0, result.output
        assert name not in result.stdout  # not a field of the config any more
        return
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: --set {name}: {name} was removed (studies measured it and did not adopt it: docs/teacher.md, \"What "
        "was tried\"); drop it (a run trained with it resumes only with the sentadapt that trained it)")


def test_a_saved_run_with_a_removed_option_at_its_neutral_value_resumes(tmp_path: Path) -> None:
    from sentadapt.config.merging import load_run_config
    from sentadapt.recipes import RECIPES

    saved = tmp_path / "config.yaml"
    saved.write_text("recipe: consert\nbase: b\ncorpus: [c]\noutput: o\ntrain:\n  teacher_evidence: 'off'\n"
                     "  agreement_holdout: 1000\n  mask_neighbours: false\n  teacher_risk: null\n")
    config = load_run_config(saved, {name: RECIPES.get(name).spec.settings for name in RECIPES})
    assert config.recipe == "consert"
    saved.write_text(saved.read_text().replace("mask_neighbours: false", "mask_neighbours: true"))
    with pytest.raises(ConfigError) as error:
        load_run_config(saved, {name: RECIPES.get(name).spec.settings for name in RECIPES})
    assert str(error.value).startswith(f"{saved}: train: mask_neighbours: mask_neighbours was removed")


# ---------------------------------------------------------------------- lines that say what happened


def test_a_run_shorter_than_log_every_reads_its_one_logged_step_as_such(
    tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"), "--dev",
                       str(pairs_tsv), "--set", "distill=1", "--max-steps", "1", "--batch-size", "2",
                       "--max-length", "16")
    assert result.exit_code == 0, result.output
    summary = flat(result.stdout)
    assert "at the one logged step (the run is shorter than log_every)" in summary
    assert "first 10 %" not in summary
    assert "0.05 of a pass over 40 examples" in summary  # 1 step × 2 sentences / 40
    assert "0.0 passes" not in summary


def test_passes_keep_two_significant_digits_below_a_tenth() -> None:
    from sentadapt.run.summary import _passes

    assert [_passes(value) for value in (0.016, 0.094, 0.1, 2.44)] == [
        "0.016 of a pass", "0.094 of a pass", "0.1 passes", "2.4 passes"]


def test_resume_does_not_call_a_data_dir_from_the_environment_ignored(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    first = run_cli_env({}, "adapt", str(corpus), "--base", str(tiny_model_dir), "--output", str(run),
                        "--max-steps", "4", "--batch-size", "8", "--max-length", "16", "--dev", "none",
                        "--set", "checkpoint_every=2")
    assert first.exit_code == 0, first.output
    (run / "metrics.json").unlink()  # as if it had stopped after its last checkpoint
    resumed = run_cli_env({"SENTADAPT_DATA_DIR": str(tmp_path)}, "adapt", "--resume", "--output", str(run))
    assert resumed.exit_code == 0, resumed.output
    assert "ignoring" not in resumed.stderr
    (run / "metrics.json").unlink()
    typed = run_cli_env({}, "adapt", "--resume", "--output", str(run), "--data-dir", str(tmp_path))
    assert "ignoring --data-dir" in typed.stderr  # one the user typed is still named


# ---------------------------------------------------------------------- errors before the work


def test_eval_checks_every_models_sizes_before_encoding_the_first(
    tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    from tests.conftest import build_tiny_bert

    narrow = build_tiny_bert(tmp_path / "narrow")
    config = json.loads((narrow / "config.json").read_text())
    width = config["hidden_size"]
    result = run_cli("eval", str(tiny_model_dir), str(narrow), "--pairs", str(pairs_tsv), "--dims", str(width + 8))
    assert result.exit_code == 2
    assert "pooling" not in result.stderr  # the line each model prints once encoded: none was
    assert result.stderr.strip() == (f"Error: --dims: {width + 8} is above {tiny_model_dir}'s embedding width "
                                     f"{width}; list sizes up to {width}")


def test_calibration_given_a_folder_says_it_is_a_folder(tiny_model_dir: Path, pairs_tsv: Path,
                                                        tmp_path: Path) -> None:
    result = run_cli("eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--quantize", "int8", "--calibration",
                     str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"Error: --calibration {tmp_path}: is a directory; give a text file of sentences, "
                                     "one per line")


# ---------------------------------------------------------------------- flags, help, the command list


def test_a_flag_takes_true_or_false_and_never_becomes_the_corpus(tiny_model_dir: Path, corpus: Path,
                                                                tmp_path: Path) -> None:
    base = [str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run")]
    for spelled in (["--dry-run=true"], ["--dry-run", "true"], ["--dry-run=yes"]):
        result = run_adapt(*base, *spelled)
        assert result.exit_code == 0, result.output
        assert "nothing loaded (--dry-run)" in result.stderr
    off = run_adapt(*base, "--dry-run=false", "--max-steps", "1", "--batch-size", "4", "--dev", "none")
    assert off.exit_code == 0, off.output
    assert "nothing loaded (--dry-run)" not in off.stderr and (tmp_path / "run" / "metrics.json").is_file()
    bad = run_cli("adapt", *base, "--dry-run=maybe")
    assert bad.exit_code == 2
    assert "a flag takes no value ('maybe'); write --dry-run to turn it on, or leave it out" in " ".join(
        bad.output.replace("│", " ").split())


def test_flags_show_no_type_in_help_and_the_command_list_gives_one_sentence_each(monkeypatch: pytest.MonkeyPatch
                                                                                 ) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    eval_help = run_cli("eval", "--help").stdout
    assert "<bool>" not in eval_help and "--subsets" in eval_help
    listing = run_cli("--help").stdout
    commands = listing[listing.index("Commands"):]
    pairs_line = flat(commands)
    assert ("pairs Propose N sentence pairs from your corpus for you to label (1/0 or a score): near-duplicates, "
            "borderline and unrelated pairs alike, so the dev set can tell a better model from a worse one. decide"
            ) in pairs_line
    assert "Then pass the labelled" not in commands  # the first sentence only, not the paragraph's hard breaks


def test_pairs_help_names_the_default_base_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from sentadapt.model.resolve import DEFAULT_BASE_MODEL

    monkeypatch.setenv("COLUMNS", "80")
    text = " ".join(run_cli("pairs", "--help").stdout.split())
    assert f"The default base model is {DEFAULT_BASE_MODEL}" in text


def test_a_delta_prints_as_the_tables_print_it() -> None:
    from sentadapt.evaluation.evaluator import Delta

    assert str(Delta(0.5234, (-0.1049, 1.2))) == "+0.52 [-0.10, +1.20]"
    assert str(Delta(1.5, (0.2, 2.9))) == "+1.50 [+0.20, +2.90] *"
    assert str(Delta(-0.25, None)) == "-0.25"


def test_matryoshka_sizes_below_the_width_say_the_whole_vector_is_not_trained(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    result = run_adapt(str(corpus), "--base", str(tiny_model_dir), "--output", str(tmp_path / "run"),
                       "--matryoshka", "8", "--max-steps", "1", "--batch-size", "4", "--max-length", "16",
                       "--dev", "none")
    assert result.exit_code == 0, result.output
    width = json.loads((tiny_model_dir / "config.json").read_text())["hidden_size"]
    assert (f"--matryoshka 8: the loss weighs these sizes only, so the model's whole {width}-dimensional vectors are "
            f"not trained as such; list {width} first (--matryoshka {width},8) to keep them") in result.stderr
