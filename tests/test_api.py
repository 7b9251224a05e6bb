"""The public Python API (sentadapt.api, `from sentadapt import ...`): the same numbers, files and one-line errors
as the CLI, imported lazily, and the README's example run on the tiny models."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sentadapt
from sentadapt import api
from sentadapt.cli import app
from sentadapt.errors import ConfigError, DataError, ExportError, ModelError, SentadaptError
from tests.conftest import TINY_SENTENCES

runner = CliRunner()
README = Path(__file__).resolve().parents[1] / "README.md"


def _cli(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def _without_seconds(value: Any) -> Any:
    """A JSON document without its timings (the only values two identical runs may differ in)."""
    if isinstance(value, dict):
        return {key: _without_seconds(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, list):
        return [_without_seconds(item) for item in value]
    return value


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TINY_SENTENCES) + "\n")
    return path


# ------------------------------------------------------------------------------------------------- evaluate


def test_evaluate_gives_exactly_the_numbers_of_eval_json(tiny_model_dir: Path, tiny_model_dir_3layers: Path,
                                                         pairs_tsv: Path, tmp_path: Path) -> None:
    models = [str(tiny_model_dir), str(tiny_model_dir_3layers)]
    cli_json = tmp_path / "cli.json"
    result = _cli("eval", *models, "--pairs", str(pairs_tsv), "--bootstrap", "200", "--json", str(cli_json))
    assert result.exit_code == 0, result.output

    notes: list[str] = []
    bars: list[tuple[str, int]] = []

    def progress(description: str, total: int):
        from contextlib import nullcontext

        bars.append((description, total))
        return nullcontext(lambda _n: None)

    evaluated = sentadapt.evaluate(models, pairs=[pairs_tsv], bootstrap=200, progress=progress, note=notes.append)
    assert isinstance(evaluated, api.EvalResult)
    from_cli = json.loads(cli_json.read_text())
    assert _without_seconds(json.loads(json.dumps(evaluated.to_json()))) == _without_seconds(from_cli)  # exactly
    # the objects behind the document: a report per model and data set, the paired Δ of the second model
    spearman = evaluated.reports[1][0].tasks[0].metrics["spearman"]
    assert spearman == from_cli[1]["reports"][0]["tasks"]["pairs.tsv"]["spearman"]
    delta = evaluated.comparisons[1][0]
    assert evaluated.comparisons[0][0] is None and delta is not None and delta.average is not None
    assert delta.average.value == from_cli[1]["delta_vs_first"][0]["average"]["delta"]
    # progress and notes as the CLI shows them
    assert bars == [(f"encoding {model}", len(evaluated.evaluators[0].sentences)) for model in models]
    assert notes[0].startswith(f"{tiny_model_dir}: pooling mean (from default), max_length")
    assert len(notes) == 2  # one per model; the tables' notes are the CLI's rendering


def test_evaluate_writes_the_json_the_cli_writes(tiny_model_dir: Path, pairs_tsv: Path, tmp_path: Path) -> None:
    out = tmp_path / "nested" / "api.json"
    notes: list[str] = []
    evaluated = api.evaluate(str(tiny_model_dir), pairs=[str(pairs_tsv)], bootstrap=0, json_out=out,
                             note=notes.append)
    assert notes[-1] == f"wrote {out}"
    assert json.loads(out.read_text()) == json.loads(json.dumps(evaluated.to_json()))
    assert evaluated.models == [str(tiny_model_dir)] and evaluated.reports[0][0].average_interval is None


# --------------------------------------------------------------------------------------------------- export


def test_export_writes_the_folder_the_cli_writes(tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    import torch
    from sentence_transformers import SentenceTransformer

    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(TINY_SENTENCES) + "\n")
    cli_out, api_out = tmp_path / "cli" / "model", tmp_path / "api" / "model"  # the card is titled by the folder
    result = _cli("export", str(tiny_model_dir), str(cli_out), "--normalize", "--sentences", str(sentences))
    assert result.exit_code == 0, result.output

    exported = sentadapt.export(tiny_model_dir, api_out, normalize=True, sentences=sentences)
    assert isinstance(exported, api.ExportResult)
    assert exported.output == api_out and exported.format == "sentence-transformers"
    assert exported.checks and exported.checks[0].sentences == len(TINY_SENTENCES)
    files = sorted(str(p.relative_to(cli_out)) for p in cli_out.rglob("*") if p.is_file())
    assert exported.files == files
    for name in files:  # weights, configs, tokenizer, card and manifest of SHA-256 sums
        assert (api_out / name).read_bytes() == (cli_out / name).read_bytes(), name
    vectors = [SentenceTransformer(str(folder), device="cpu").encode(TINY_SENTENCES, convert_to_tensor=True)
               for folder in (cli_out, api_out)]
    assert torch.equal(vectors[0], vectors[1])


def test_export_takes_sentences_as_a_list(tiny_model_dir: Path, tmp_path: Path) -> None:
    exported = api.export(str(tiny_model_dir), tmp_path / "hf", format="hf", sentences=TINY_SENTENCES[:3])
    assert exported.checks[0].sentences == 3 and (tmp_path / "hf" / "config.json").is_file()


# ------------------------------------------------------------------------------------------ diagnose, pairs


def test_diagnose_gives_the_figures_of_diagnose_json(tiny_model_dir: Path, tiny_corpus: Path, pairs_tsv: Path,
                                                     tmp_path: Path) -> None:
    cli_json = tmp_path / "cli.json"
    options = ["--corpus", str(tiny_corpus), "--pairs", str(pairs_tsv), "--max-k", "3"]
    result = _cli("diagnose", str(tiny_model_dir), *options, "--json", str(cli_json))
    assert result.exit_code == 0, result.output

    diagnosed = sentadapt.diagnose(tiny_model_dir, corpus=tiny_corpus, pairs=pairs_tsv, max_k=3)
    assert isinstance(diagnosed, api.DiagnoseResult)
    assert _without_seconds(json.loads(json.dumps(diagnosed.to_json()))) == _without_seconds(
        json.loads(cli_json.read_text()))
    assert set(diagnosed.diagnoses[0].verdicts()) == set(diagnosed.inputs.reports)
    narrowed = api.diagnose(tiny_model_dir, corpus=tiny_corpus, report=["spectrum", "anisotropy"])
    assert narrowed.inputs.reports == ["anisotropy", "spectrum"]


def test_propose_pairs_writes_the_file_pairs_writes(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentadapt.pairs.labelling import propose_pairs

    assert sentadapt.propose_pairs is propose_pairs  # the library call of `sentadapt pairs`, public as is
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{subject} {state}\n" for subject in ("the server", "the database", "a disk")
                              for state in ("is down", "failed", "is slow", "has a dns timeout")))
    cli_out, api_out = tmp_path / "cli.tsv", tmp_path / "api.tsv"
    result = _cli("pairs", str(corpus), "--base", str(tiny_model_dir), "-n", "4", "-o", str(cli_out),
                  "--device", "cpu")
    assert result.exit_code == 0, result.output
    proposed = sentadapt.propose_pairs([corpus], str(tiny_model_dir), 4, api_out, device="cpu")
    assert isinstance(proposed, api.ProposedPairs) and len(proposed) == 4
    # the same file, but for its own path in the header's `adapt ... --dev FILE`
    # (and the run folder named after it, runs/api or runs/cli)
    assert (api_out.read_text().replace(str(api_out), "FILE").replace("runs/api", "runs/FILE")
            == cli_out.read_text().replace(str(cli_out), "FILE").replace("runs/cli", "runs/FILE"))


# --------------------------------------------------------------------------------------------------- errors


def _bad_calls(model: str, pairs: str, corpus: str, output: str) -> list[tuple[Any, dict[str, Any], list[str]]]:
    """(API call, its keywords, the same request on the command line)."""
    return [
        (api.evaluate, {"models": [model], "pairs": [pairs], "dtype": "int4"},
         ["eval", model, "--pairs", pairs, "--dtype", "int4"]),
        (api.evaluate, {"models": [model], "pairs": [pairs], "split": "train"},
         ["eval", model, "--pairs", pairs, "--split", "train"]),
        (api.evaluate, {"models": [model], "pairs": [pairs], "task": "retrieval"},
         ["eval", model, "--pairs", pairs, "--task", "retrieval"]),
        (api.evaluate, {"models": [model], "sts": "stbs", "data_dir": corpus.rsplit("/", 1)[0]},
         ["eval", model, "--sts", "stbs", "--data-dir", corpus.rsplit("/", 1)[0]]),
        (api.evaluate, {"models": ["./missing-model"], "pairs": [pairs]},
         ["eval", "./missing-model", "--pairs", pairs]),
        (api.evaluate, {"models": [model], "pairs": [pairs + ".missing"]},
         ["eval", model, "--pairs", pairs + ".missing"]),
        (api.export, {"source": model, "output": output, "format": "onnnx"}, ["export", model, output, "-f", "onnnx"]),
        (api.export, {"source": model, "output": output, "quantize": "int8"},
         ["export", model, output, "--quantize", "int8"]),
        (api.export, {"source": model, "output": model}, ["export", model, model]),
        (api.export, {"source": model, "output": output, "sentences": corpus + ".missing"},
         ["export", model, output, "--sentences", corpus + ".missing"]),
        (api.diagnose, {"model": model, "report": "topkk"}, ["diagnose", model, "--report", "topkk"]),
        (api.diagnose, {"model": model, "corpus": "missing.txt"}, ["diagnose", model, "--corpus", "missing.txt"]),
        (api.diagnose, {"model": model, "corpus": corpus, "sample": 1},
         ["diagnose", model, "--corpus", corpus, "--sample", "1"]),
        (api.propose_pairs, {"corpus": [corpus], "model": model, "n": 0, "output": output + ".tsv"},
         ["pairs", corpus, "--base", model, "-n", "0", "-o", output + ".tsv"]),
    ]


def test_a_bad_argument_raises_the_typed_error_with_the_line_the_cli_prints(
    tiny_model_dir: Path, pairs_tsv: Path, tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SENTADAPT_DATA_DIR", raising=False)
    cases = _bad_calls(str(tiny_model_dir), str(pairs_tsv), str(tiny_corpus), str(tmp_path / "out"))
    kinds = set()
    for call, keywords, argv in cases:
        with pytest.raises(SentadaptError) as raised:
            call(**keywords)
        result = runner.invoke(app, argv)
        line = f"Error: {raised.value}"
        assert "\n" not in str(raised.value), argv
        assert result.stderr.strip() == line, argv
        assert result.exit_code == raised.value.exit_code, argv
        kinds.add(type(raised.value))
    assert kinds == {ConfigError, DataError, ModelError, ExportError}
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("call", "keywords", "argv"), [
    (api.evaluate, {"batch_size": 0}, ["eval", "M", "--batch-size", "0"]),
    (api.evaluate, {"max_length": 4}, ["eval", "M", "--max-length", "4"]),
    (api.evaluate, {"bootstrap": -1}, ["eval", "M", "--bootstrap", "-1"]),
    (api.diagnose, {"max_k": 0}, ["diagnose", "M", "--max-k", "0"]),
])
def test_ranges_typer_checks_are_checked_with_its_message(call: Any, keywords: dict[str, Any], argv: list[str],
                                                          tiny_model_dir: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        call(str(tiny_model_dir), **keywords)
    result = runner.invoke(app, [str(tiny_model_dir) if arg == "M" else arg for arg in argv])
    assert result.exit_code == 2
    boxed = [line.strip("│ ") for line in result.stderr.splitlines() if line.startswith("│")]
    assert str(raised.value) == " ".join(boxed)  # typer's usage error, inside its box (wrapped at the width)


# ------------------------------------------------------------------------------------------- lazy, public


def test_import_sentadapt_is_light_and_the_calls_load_on_first_use() -> None:
    code = (
        "import sys, inspect, sentadapt\n"
        "light = 'torch' not in sys.modules and 'sentadapt.api' not in sys.modules\n"
        "evaluate = sentadapt.evaluate\n"
        "from sentadapt import diagnose, export, propose_pairs\n"
        "import sentadapt.api as api\n"
        "print(light, 'torch' in sys.modules, evaluate is api.evaluate, diagnose is api.diagnose,\n"
        "      propose_pairs is api.propose_pairs, export is api.export, inspect.isfunction(export))\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["True", "False", "True", "True", "True", "True", "True"]


def test_every_public_name_is_a_sentadapt_attribute() -> None:
    for name in api.__all__:
        assert getattr(sentadapt, name) is not None
    assert set(api.__all__) <= set(dir(sentadapt))
    with pytest.raises(AttributeError):
        _ = sentadapt.no_such_call
    # `sentadapt.export` is the function, also once the package that holds it (sentadapt.exporting) is imported
    importlib.import_module("sentadapt.exporting.request")
    assert inspect.isfunction(sentadapt.export) and sentadapt.export is api.export
    assert sentadapt.exporting.request.FORMATS[0] == "sentence-transformers"


# ----------------------------------------------------------------------------------------- README example


def _readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert blocks, "README's Python API section lost its example"
    return blocks[0]


def test_readme_python_api_example_runs_on_the_tiny_models(
    tiny_model_dir: Path, corpus: Path, pairs_tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("sentence_transformers")
    code = _readme_example()
    substitutions = {  # what the example names → the tiny stand-ins (each must still be in the example)
        '"out/': f'"{tmp_path}/out/',
        '"sentence-transformers/all-MiniLM-L6-v2"': f'"{tiny_model_dir}"',
        '"runs/demo"': f'"{tmp_path}/runs/demo"',
        '"examples/it-support-corpus.txt"': f'"{corpus}"',
        '"examples/it-support-dev.tsv"': f'"{pairs_tsv}"',
        '"examples/it-support-test.tsv"': f'"{pairs_tsv}"',
        "batch_size=32, max_steps=30, eval_every=10": "batch_size=8, max_steps=2, eval_every=2, max_length=16",
    }
    for old, new in substitutions.items():
        assert old in code, f"README example no longer uses {old}"
        code = code.replace(old, new)
    exec(compile(code, "README.md (Python API)", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith(("use-adapted by the risk rule: ", "keep-base by the risk rule: "))
    assert "\nSpearman " in printed and "Δ " in printed and "files; min cosine" in printed
    assert json.loads((tmp_path / "runs" / "demo" / "metrics.json").read_text())["steps"] == 2
    assert (tmp_path / "out" / "demo" / "modules.json").is_file()
    assert json.loads((tmp_path / "out" / "demo-test.json").read_text())[1]["delta_vs_first"]
