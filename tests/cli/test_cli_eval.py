from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.evaluation.sts import StsEvaluator
from sentadapt.model.encoder import Encoder
from tests.conftest import FLOAT32_RTOL

runner = CliRunner()


def _run(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parity
def test_eval_pairs_prints_the_evaluator_score_and_writes_json(
    tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    result = _run("eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--json", str(out))
    assert result.exit_code == 0, result.output
    expected = StsEvaluator.from_pairs_file(pairs_tsv)(Encoder.load(tiny_model_dir, device="cpu"))
    spearman = expected.tasks[0].metrics["spearman"]
    assert f"{spearman:.2f}" in result.stdout
    payload = json.loads(out.read_text())
    assert payload[0]["reports"][0]["tasks"]["pairs.tsv"]["spearman"] == pytest.approx(spearman, rel=FLOAT32_RTOL)
    assert payload[0]["reports"][0]["pooling"] == "mean"


def test_eval_two_models_shows_delta(tiny_model_dir: Path, tiny_model_dir_3layers: Path, pairs_tsv: Path) -> None:
    result = _run("eval", str(tiny_model_dir), str(tiny_model_dir_3layers), "--pairs", str(pairs_tsv))
    assert result.exit_code == 0, result.output
    assert "Δ" in result.stdout


def test_eval_sts_from_a_data_dir(tiny_model_dir: Path, tmp_path: Path) -> None:
    rows = [("a man is playing", "a man plays", 4.6), ("the dog", "a cat", 1.0), ("server down", "dns failed", 0.4)]
    for task in ("stsb", "sickr"):
        (tmp_path / f"{task}.test.jsonl").write_text("".join(
            json.dumps({"sentence1": a, "sentence2": b, "score": max(s, 1.0), "subset": task}) + "\n"
            for a, b, s in rows
        ))
    result = _run("eval", str(tiny_model_dir), "--sts", "stsb,sickr", "--data-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "STS-B" in result.stdout and "SICK-R" in result.stdout and "avg" in result.stdout
    assert "(SentEval pairs)" in result.stdout  # the data line, under its table


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["./missing-model"], 1, "Error: ./missing-model: no such model folder"),
        (["no-such-model"], 1, "Error: model 'no-such-model' is not a local folder and the Hugging Face Hub is "
         "unreachable (offline); pass a local model folder (Hugging Face or sentence-transformers format)"),
        (["all-MiniLM-L6-v2-typo"], 1, "Error: model 'all-MiniLM-L6-v2-typo' is not a local folder"),
    ],
)
def test_eval_model_errors(args: list[str], code: int, message: str, pairs_tsv: Path) -> None:
    result = _run("eval", *args, "--pairs", str(pairs_tsv))
    assert result.exit_code == code
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.output


def test_eval_unknown_task(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _run("eval", str(tiny_model_dir), "--sts", "stbs", "--data-dir", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "Error: --sts: Unknown task 'stbs'. Did you mean: stsb, sts16, sts15? "
        "Available: all, sickr, sts12, sts13, sts14, sts15, sts16, stsb"
    )


def test_eval_missing_data_file_names_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    result = _run("eval", str(tiny_model_dir), "--sts", "stsb", "--data-dir", str(tmp_path))
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: {tmp_path}/stsb.test.jsonl: missing; the data directory needs stsb.test.jsonl "
        "(JSON Lines: sentence1, sentence2, score)"
    )


def test_eval_offline_without_data_dir(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SENTADAPT_DATA_DIR", raising=False)
    result = _run("eval", str(tiny_model_dir), "--sts", "stsb")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: no STS data for stsb: pass --data-dir DIR (or set $SENTADAPT_DATA_DIR) with files such as "
        "stsb.test.jsonl; the Hugging Face Hub (mteb/stsbenchmark-sts) is unreachable"
    )


def test_eval_bad_dtype(tiny_model_dir: Path, pairs_tsv: Path) -> None:
    result = _run("eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--dtype", "int4")
    assert result.exit_code == 2
    assert result.stderr.strip() == "Error: --dtype: 'int4' is not one of fp32, bf16, fp16"


def test_cli_import_does_not_import_torch() -> None:
    code = "import sys, sentadapt.cli; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_cli_import_leaves_the_library_calls_and_numpy_unloaded() -> None:
    """Every command's start-up (`--help`, and the seconds in which a Ctrl-C lands before anything ran) imports the
    command line only: importing the library calls there (sentadapt.api, numpy) took `eval --help` from 0.38 s to
    0.60 s on this project's machine."""
    code = "import sys, sentadapt.cli; print(sorted({'numpy', 'sentadapt.api'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_version() -> None:
    result = _run("--version")
    assert result.exit_code == 0 and result.stdout.startswith("sentadapt ")


def test_cache_embeddings_stores_then_reuses_the_same_vectors(tiny_model_dir: Path, pairs_tsv: Path,
                                                              tmp_path: Path) -> None:
    """--cache-embeddings: the first run stores the model's vectors, the second reads them back (same scores)."""
    first_json, second_json = tmp_path / "first.json", tmp_path / "second.json"
    first = _run("eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--cache-embeddings",
                 "--bootstrap", "0", "--json", str(first_json))
    assert first.exit_code == 0, first.output
    assert "vectors stored in" in first.output
    second = _run("eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--cache-embeddings",
                  "--bootstrap", "0", "--json", str(second_json))
    assert second.exit_code == 0, second.output
    assert "vectors reused from" in second.output
    scores = [json.loads(path.read_text())[0]["reports"][0]["tasks"]["pairs.tsv"]["spearman"]
              for path in (first_json, second_json)]
    assert scores[0] == scores[1]  # the same vectors read back: bit-identical


def test_the_footnotes_are_on_stdout_with_the_table(tiny_model_dir: Path, pairs_tsv: Path) -> None:
    """`eval ... > scores.txt` keeps what the table's numbers mean: the data line and the CI legend."""
    result = runner.invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    out = "".join(result.stdout.split())  # wrapped at the terminal's width: a long path may fold anywhere
    assert "".join(f"data: {pairs_tsv} — protocol: Spearman×100 of cosine".split()) in out
    assert "[low,high]:95%percentilebootstrapCI(1000resamples" in out
    assert "data:" not in result.stderr and "[low, high]" not in result.stderr



def test_the_legend_explains_the_deltas_only_where_a_row_has_one(tiny_model_dir: Path, tiny_model_dir_3layers: Path,
                                                                  pairs_tsv: Path) -> None:
    alone = runner.invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(pairs_tsv), "--device", "cpu"])
    assert alone.exit_code == 0, alone.output
    assert "Δ" not in alone.stdout and "*" not in alone.stdout  # one model: no Δ column, nothing about Δs
    for models in ([tiny_model_dir, tiny_model_dir_3layers], [tiny_model_dir]):
        sized = ["--dims", "32,16"] if len(models) == 1 else []  # a smaller size is a row against the whole vector
        result = runner.invoke(app, ["eval", *map(str, models), "--pairs", str(pairs_tsv), "--device", "cpu", *sized])
        assert result.exit_code == 0, result.output
        assert "* = the Δ's CI excludes 0" in " ".join(result.stdout.split()), models


def test_a_long_model_path_is_shown_by_its_folders_own_name() -> None:
    from sentadapt.text_tables import short_names

    assert short_names(["/work/shared/models/paraphrase-minilm-l3-v2", "runs/d"]) == {
        "/work/shared/models/paraphrase-minilm-l3-v2": "paraphrase-minilm-l3-v2", "runs/d": "runs/d"}
    # the same folder name twice: as many components as tell them apart
    assert short_names(["/data/experiments/one/model-final", "/data/experiments/two/model-final"]) == {
        "/data/experiments/one/model-final": "one/model-final", "/data/experiments/two/model-final": "two/model-final"}


def test_three_models_and_every_task_type_fit_80_columns_whole(tiny_model_dir: Path,
                                                                tiny_model_dir_3layers: Path, tmp_path: Path) -> None:
    """Issue 82: at 80 columns a third model's Δ column was cut (`[77.33, 95`) and the metric column shrank to
    nothing; a table whose models do not fit is now drawn as several, the first model in each."""
    import os
    import shutil

    third = tmp_path / "a-third-model-with-a-rather-long-folder-name"
    shutil.copytree(tiny_model_dir, third)
    examples = Path(__file__).parent.parent.parent / "examples"
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    result = subprocess.run(
        [sys.executable, "-m", "sentadapt", "eval", str(tiny_model_dir), str(tiny_model_dir_3layers), str(third),
         "--pairs", str(examples / "it-support-test.tsv"), "--pairs", str(examples / "it-support-pairclass.tsv"),
         "--rerank", str(examples / "it-support-rerank.jsonl"), "--retrieval", str(examples / "it-support-retrieval"),
         "--device", "cpu", "--bootstrap", "200"],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert all(line.count("[") == line.count("]") for line in lines)  # every interval whole
    # each title on one line: a table narrower than its title is drawn as wide as it (it wrapped "… of⏎3")
    assert sum(line.startswith("┏") for line in lines) == 8 and sum("models 1, 3 of 3" in line for line in lines) == 4
    assert sum(line.lstrip("│┃ ").startswith(("spearman", "ap ", "map ")) for line in lines) == 6  # labels shown
    # every metric's name whole (retrieval's recall@100 read `recall@1…` when the Δ kept room for a * no row had)
    assert sum(line.lstrip("│ ").startswith("recall@100 ") for line in lines) == 2


def test_eval_dims_at_80_columns_shortens_each_model_name_by_one_rule_never_mid_word(
        tiny_model_dir: Path, tiny_model_dir_3layers: Path, pairs_tsv: Path, tmp_path: Path) -> None:
    """Issue 82: `eval --dims` broke a model's name mid-word ("paraphrase-m" over "inilm-l3-v2"); a name is now
    shortened by `shorten_name` to the room left and drawn on one line (the lines above the table name it whole)."""
    import os
    import shutil

    from sentadapt.text_tables import shorten_name

    long_names = [tmp_path / "paraphrase-minilm-l3-v2", tmp_path / "all-minilm-l6-v2-domain"]
    shutil.copytree(tiny_model_dir, long_names[0])
    shutil.copytree(tiny_model_dir_3layers, long_names[1])
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    result = subprocess.run([sys.executable, "-m", "sentadapt", "eval", *map(str, long_names), str(tiny_model_dir),
                             "--pairs", str(pairs_tsv), "--dims", "16", "--device", "cpu", "--bootstrap", "200"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    shown = [line.split("│")[1].strip() for line in lines if line.startswith("│") and line.split("│")[1].strip()]
    assert len(shown) == 3, shown  # one line per model: no name continues on the next line
    assert shown[:2] == [shorten_name(path.name, len(shown[0])) for path in long_names]
    assert all("…" in name for name in shown[:2])


def test_two_labelled_pairs_are_said_to_be_too_few_for_their_interval(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Issue 82: a 2-pair `eval` printed `100.00 [100.00, 100.00]` as if it were certain."""
    two = tmp_path / "two.tsv"
    two.write_text("sentence1\tsentence2\tscore\nthe server is down\tthe server is not running\t4.5\n"
                   "dns timeout on the cluster\tthe red car is big\t0.0\n")
    result = runner.invoke(app, ["eval", str(tiny_model_dir), "--pairs", str(two), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    said = (f"{two}: 2 labelled pairs, too few for its intervals or a decision to mean much (at least 30; 100 or "
            "more from your domain to decide on: sentadapt pairs)")
    assert "".join(said.split()) in "".join(result.stdout.split())  # the path may wrap anywhere
