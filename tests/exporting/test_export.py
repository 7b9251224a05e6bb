"""`sentadapt export`: every format reproduces sentadapt's vectors, for a model from each recipe."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from sentadapt.cli import app
from sentadapt.errors import ExportError
from sentadapt.exporting import ExportRequest, export_model
from sentadapt.model.encoder import Encoder
from sentadapt.storage.durable import atomic_folder
from tests.conftest import (
    FLOAT32_RTOL,
    SHARED_MODELS,
    SHARED_STS,
    TINY_SENTENCES,
    build_tiny_bert,
    needs_shared,
    run_adapt,
)

st = pytest.importorskip("sentence_transformers")

runner = CliRunner()
WORDS = sorted({word for sentence in TINY_SENTENCES for word in sentence.split()})
# 100 sentences of 3–8 in-vocabulary words (the tiny models have 64 positions)
SENTENCES = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 6)) for i in range(100)]
EXPECTED_MODULES = {
    "consert": ["Transformer", "WeightedLayerPooling", "Pooling"],  # last2avg
    "sg-opt": ["Transformer", "Pooling"],  # cls; the projection head is training-only
    "clsr": ["Transformer", "Pooling", "Dense", "Dense"],  # frozen encoder + the MLP; projection dropped
}


def _pairs_file(folder: Path) -> Path:
    path = folder / "pairs.tsv"
    rows = [f"{a}\t{b}\t{(i % 5) + 1}" for i, (a, b) in enumerate(zip(TINY_SENTENCES, TINY_SENTENCES[1:] * 2))]
    path.write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny run per recipe, a few steps each (consert keeps two checkpoints)."""
    root = tmp_path_factory.mktemp("export-runs")
    model = build_tiny_bert(root / "tiny", layers=3)
    corpus = root / "corpus.txt"
    corpus.write_text("".join(f"{s} {i}\n" for i, s in enumerate(SENTENCES[:40])))
    pairs = _pairs_file(root)
    common = ["--base", str(model), "--batch-size", "8", "--max-length", "16", "--set", "log_every=1"]
    arguments = {
        "consert": [str(corpus), "--dev", str(pairs), "--max-steps", "4", "--eval-every", "2",
                    "--checkpoint-every", "2"],
        "sg-opt": [str(corpus), "--recipe", "sg-opt", "--dev", "none", "--max-steps", "2", "--set", "head_hidden=16"],
        "clsr": [str(pairs), "--recipe", "clsr", "--dev", "none", "--max-steps", "2", "--lr", "1e-2",
                 "--set", "optimizer=adamw", "--set", "min_score=1"],
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SENTADAPT_CACHE", str(root / "cache"))
        for recipe, args in arguments.items():
            result = run_adapt(*args, *common, "--output", str(root / recipe))
            assert result.exit_code == 0, result.output
    return {recipe: root / recipe for recipe in arguments}


def _export(source: Path, output: Path, *args: str, count: int = 100):
    sentences = output.parent / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES[:count]) + "\n")
    return runner.invoke(app, ["export", str(source), str(output), "--sentences", str(sentences), *args],
                         catch_exceptions=False)


@pytest.fixture(scope="module")
def st_exports(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each run exported once to the sentence-transformers format (consert with --normalize)."""
    root = tmp_path_factory.mktemp("st-exports")
    outputs = {}
    for recipe, run in runs.items():
        result = _export(run, root / recipe, *(["--normalize"] if recipe == "consert" else []))
        assert result.exit_code == 0, result.output
        assert "verified: SentenceTransformer(OUT) on 100 sentences: min cosine" in result.stdout
        outputs[recipe] = root / recipe
    return outputs


def _cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a, b.float().cpu(), dim=-1)


@pytest.mark.parity
@pytest.mark.parametrize("recipe", ["consert", "sg-opt", "clsr"])
def test_sentence_transformers_export_gives_our_vectors(runs: dict[str, Path], st_exports: dict[str, Path],
                                                        recipe: str) -> None:
    output = st_exports[recipe]
    modules = json.loads((output / "modules.json").read_text())
    expected = EXPECTED_MODULES[recipe] + (["Normalize"] if recipe == "consert" else [])
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == expected
    config = json.loads((output / "config_sentence_transformers.json").read_text())
    assert config["similarity_fn_name"] == "cosine"
    ours = Encoder.load(runs[recipe], device="cpu").encode(SENTENCES)
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    assert _cosines(ours, theirs).min() >= 0.9999
    card = (output / "README.md").read_text()
    assert f"recipe **{recipe}**" in card and "SentenceTransformer(\"PATH\")" in card and "```yaml" in card
    assert not any("projection" in path.name or "classifier" in path.name for path in output.rglob("*"))


def test_clsr_export_carries_the_trained_mlp(runs: dict[str, Path], st_exports: dict[str, Path]) -> None:
    for folder in ("2_Dense", "3_Dense"):
        exported = load_file(str(st_exports["clsr"] / folder / "model.safetensors"))
        published = load_file(str(runs["clsr"] / folder / "model.safetensors"))
        assert torch.equal(exported["linear.weight"], published["linear.weight"])


def test_layer_weights_are_saved_as_a_parameter(runs: dict[str, Path], tmp_path: Path) -> None:
    """Without the saved weights sentence-transformers would fall back to all-ones over layers 2..3 anyway;
    firstlast (layers 1 and 3 of 3) is where a missing weight vector would change the vectors."""
    output = tmp_path / "out"
    assert _export(runs["consert"], output, "--pooling", "firstlast", count=10).exit_code == 0
    weights = load_file(str(output / "1_WeightedLayerPooling" / "model.safetensors"))["layer_weights"]
    assert weights.tolist() == [1.0, 0.0, 1.0]
    ours = Encoder.load(runs["consert"], pooling="firstlast", device="cpu").encode(SENTENCES)
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    assert _cosines(ours, theirs).min() >= 0.9999


def test_checkpoint_export_takes_the_checkpoints_encoder_weights(runs: dict[str, Path], tmp_path: Path) -> None:
    run = runs["consert"]
    output = tmp_path / "out"
    result = _export(run, output, "--checkpoint", "last", "--format", "hf", count=10)
    assert result.exit_code == 0, result.output
    assert "checkpoint step-0000004" in result.stdout
    checkpoint = load_file(str(run / "checkpoints" / "step-0000004" / "model.safetensors"))
    exported = load_file(str(output / "model.safetensors"))
    assert exported and all(torch.equal(t, checkpoint[f"encoder.backbone.{n}"]) for n, t in exported.items())
    base = load_file(str(run.parent / "tiny" / "model.safetensors"))
    word_embeddings = "embeddings.word_embeddings.weight"
    assert not torch.equal(exported[word_embeddings], base[word_embeddings])  # trained weights, not the base's


@pytest.mark.parity
def test_eval_of_the_export_equals_eval_of_the_source(runs: dict[str, Path], st_exports: dict[str, Path],
                                                       tmp_path: Path, pairs_tsv: Path) -> None:
    scores = []
    for index, model in enumerate((runs["consert"], st_exports["consert"])):
        report = tmp_path / f"{index}.json"
        result = runner.invoke(app, ["eval", str(model), "--pairs", str(pairs_tsv), "--json", str(report)],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        tasks = json.loads(report.read_text())[0]["reports"][0]["tasks"]
        scores.append([(name, task["spearman"], task["pearson"]) for name, task in tasks.items()])
    assert scores[0][0][0] == scores[1][0][0]
    # normalisation never changes a cosine beyond float32 rounding (Pearson x100 ~38: see FLOAT32_RTOL)
    assert scores[0][0][1:] == pytest.approx(scores[1][0][1:], rel=FLOAT32_RTOL)


@pytest.mark.parity
def test_onnx_export_matches_torch_and_reports_int8_drift(runs: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from sentadapt.exporting.onnx import onnx_encode, session

    output = tmp_path / "onnx"
    result = _export(runs["clsr"], output, "--format", "onnx", "--quantize", "int8", "--normalize")
    assert result.exit_code == 0, result.output
    assert "verified: onnxruntime fp32 vs torch on 100 sentences" in result.stdout
    assert "verified: onnxruntime int8 vs torch (drift) on 100 sentences" in result.stdout
    assert "(reported, not bounded)" in result.stdout
    description = json.loads((output / "sentadapt_onnx.json").read_text())
    assert description["files"] == {"fp32": "model.onnx", "int8": "model_int8.onnx"}
    encoder = Encoder.load(runs["clsr"], device="cpu")
    encoder.configure(normalize=True)
    reference = encoder.encode(SENTENCES)
    onnx_vectors = onnx_encode(session(output / "model.onnx"), encoder, SENTENCES)
    assert (onnx_vectors - reference).abs().max() <= 1e-4
    assert onnx_vectors.norm(dim=-1).sub(1).abs().max() < 1e-5  # Normalize is inside the graph
    int8 = onnx_encode(session(output / "model_int8.onnx"), encoder, SENTENCES)
    assert _cosines(reference, int8).min() > 0.9  # drift, but the same model


def test_hf_export_reloads_with_automodel(runs: dict[str, Path], tmp_path: Path) -> None:
    from transformers import AutoModel, AutoTokenizer

    output = tmp_path / "hf"
    result = _export(runs["sg-opt"], output, "--format", "hf", "--dtype", "fp16")
    assert result.exit_code == 0, result.output
    assert not (output / "modules.json").exists()
    model = AutoModel.from_pretrained(str(output)).float().eval()
    tokenizer = AutoTokenizer.from_pretrained(str(output))
    assert next(iter(load_file(str(output / "model.safetensors")).values())).dtype == torch.float16
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        cls_vectors = model(**batch).last_hidden_state[:, 0]  # the card's pooling for SG-OPT: cls
    ours = Encoder.load(runs["sg-opt"], device="cpu").encode(SENTENCES)
    assert _cosines(ours, cls_vectors).min() >= 0.999  # fp16 weights
    assert "`cls`: the first token ([CLS]) vector" in (output / "README.md").read_text()


def test_every_exported_file_is_readable_by_others_as_a_plain_write_makes_it(runs: dict[str, Path],
                                                                            tmp_path: Path) -> None:
    """sentence-transformers writes its weights through a private temporary file (0600): a shared model would have
    one file the others cannot read."""
    import os
    import stat

    umask = os.umask(0o022)
    try:
        output = export_model(ExportRequest(str(runs["sg-opt"]), tmp_path / "ship"), sentences=SENTENCES[:4]).output
    finally:
        os.umask(umask)
    modes = {str(path.relative_to(output)): stat.S_IMODE(path.stat().st_mode) for path in output.rglob("*")}
    assert modes["model.safetensors"] == 0o644
    assert {mode for name, mode in modes.items() if (output / name).is_file()} == {0o644}
    assert {mode for name, mode in modes.items() if (output / name).is_dir()} == {0o755}


def test_failed_verification_leaves_the_previous_output(runs: dict[str, Path], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep.txt").write_text("previous export")
    # an earlier export, keep.txt one of its files: --overwrite may replace it
    digest = hashlib.sha256(b"previous export").hexdigest()
    (output / "manifest.json").write_text(f'{{"files": {{"keep.txt": "{digest}"}}, "format": "hf"}}')
    monkeypatch.setattr("sentadapt.exporting.st.COSINE_LIMIT", 1.5)  # unreachable: the check must fail
    with pytest.raises(ExportError, match="verification failed: SentenceTransformer"):
        export_model(ExportRequest(str(runs["sg-opt"]), output, overwrite=True), sentences=SENTENCES[:4])
    assert sorted(p.name for p in output.iterdir()) == ["keep.txt", "manifest.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


# ---------------------------------------------------------------------- errors, one line each

def _error(*args: str) -> tuple[int, str]:
    """The exit code and the error line; progress notes may precede it, the error itself is one line."""
    result = runner.invoke(app, ["export", *args], catch_exceptions=False)
    errors = [line for line in result.stderr.strip().splitlines() if not line.startswith("loading ")]
    assert len(errors) == 1, result.stderr
    return result.exit_code, errors[0]


def test_error_messages(runs: dict[str, Path], tmp_path: Path, tiny_model_dir: Path) -> None:
    run, out = str(runs["consert"]), str(tmp_path / "out")
    assert _error(run, out, "--format", "onx") == (
        2, "Error: Unknown format 'onx'. Did you mean: onnx? Available: hf, onnx, sentence-transformers")
    assert _error(run, out, "--quantize", "int8") == (2, "Error: --quantize int8 applies to --format onnx only")
    assert _error(run, out, "--format", "onnx", "--dtype", "fp16") == (
        2, "Error: --dtype fp16 applies to the sentence-transformers and hf formats; for a smaller ONNX model use "
           "--quantize int8")
    assert _error(run, out, "--checkpoint", "newest") == (
        2, "Error: --checkpoint: 'newest' is not best | last | a step number")
    missing = tmp_path / "nope"
    assert _error(str(missing), out) == (1, f"Error: {missing}: no such model folder")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert _error(run, str(tmp_path / "full")) == (1, f"Error: {tmp_path / 'full'}: not empty; pass --overwrite to "
                                                      "replace it")
    assert _error(run, run, "--overwrite") == (1, f"Error: {run}: would replace the source {run}; choose another "
                                                  "output")
    assert _error(run, out, "--checkpoint", "3") == (
        1, f"Error: --checkpoint 3: no such checkpoint in {runs['consert'] / 'checkpoints'}; available: 2, 4")
    assert _error(str(tiny_model_dir), out, "--checkpoint", "last") == (
        2, f"Error: --checkpoint last: {tiny_model_dir} is not a run directory (no config.yaml); only runs have "
           "checkpoints")
    assert _error(str(runs["clsr"]), out, "--format", "hf") == (
        1, f"Error: {runs['clsr']}: has a Dense head (2 layers, e.g. CLSR's MLP) that the hf format cannot hold; use "
           "--format sentence-transformers or --format onnx")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("export_format", "module", "extra"), [
    ("sentence-transformers", "sentence_transformers", "export"), ("onnx", "onnxruntime", "onnx")])
def test_missing_optional_extra(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                export_format: str, module: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    assert _error(str(tiny_model_dir), str(tmp_path / "out"), "--format", export_format) == (
        1, f"Error: --format {export_format} needs the package '{module}', which is not installed: "
           f"pip install 'sentadapt[{extra}]'")


# ---------------------------------------------------------------------- a real model


@pytest.mark.shared
@needs_shared()
def test_real_model_exports_to_every_format(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    # the 3-layer copy: the same BERT architecture and export paths as the 6-layer one at about half the ONNX
    # export time (the slowest part); 32 real sentences of mixed lengths are enough for every check below
    model = SHARED_MODELS / "paraphrase-minilm-l3-v2"
    sentences = [json.loads(line)["sentence1"] for line in (SHARED_STS / "stsb.test.jsonl").open()][:32]
    checks = {}
    for export_format, extra in (("sentence-transformers", {}), ("hf", {}), ("onnx", {"quantize": "int8"})):
        result = export_model(ExportRequest(str(model), tmp_path / export_format, export_format, **extra),
                              sentences=sentences)
        checks.update({check.label: check for check in result.checks})
    assert checks["SentenceTransformer(OUT)"].min_cosine >= 0.9999
    assert checks["AutoModel(OUT) + pooling from the card"].min_cosine >= 0.9999
    assert checks["onnxruntime fp32 vs torch"].max_abs <= 1e-4
    assert checks["onnxruntime int8 vs torch (drift)"].min_cosine > 0.9
    assert "licence of the base model" in (tmp_path / "hf" / "README.md").read_text()  # this copy has no README
    ours = Encoder.load(model, device="cpu").encode(sentences)
    theirs = st.SentenceTransformer(str(tmp_path / "sentence-transformers"), device="cpu").encode(
        sentences, convert_to_tensor=True)
    assert _cosines(ours, theirs).min() >= 0.9999


# ---------------------------------------------------------------------- unfinished runs

def _unfinished_copy(run: Path, target: Path, with_best: bool = False) -> Path:
    """What an interrupted `adapt` leaves: config.yaml, train.log and checkpoints/ — no published model,
    no metrics.json; best/ only when a dev evaluation had saved one before the interruption."""
    target.mkdir()
    for name in ("config.yaml", "train.log"):
        shutil.copy(run / name, target / name)
    shutil.copytree(run / "checkpoints", target / "checkpoints")
    if with_best:
        with atomic_folder(target / "best", {"step": 4}) as folder:
            Encoder.load(run, device="cpu").save(folder)
    return target


def test_unfinished_run_without_a_model_says_which_checkpoints_exist(runs: dict[str, Path], tmp_path: Path) -> None:
    run = _unfinished_copy(runs["consert"], tmp_path / "run")
    assert _error(str(run), str(tmp_path / "out")) == (
        1, f"Error: {run}: the run did not finish, so it has no published model; its checkpoints: steps 2, 4; export "
           f"the last one with --checkpoint last (step 4) or another with --checkpoint STEP, or finish the run: "
           f"sentadapt adapt --resume --output {run}")
    shutil.rmtree(run / "checkpoints")
    assert _error(str(run), str(tmp_path / "out"), "--checkpoint", "last") == (
        1, f"Error: {run}: the run did not finish and saved neither a model nor a checkpoint; nothing to export — run "
           "it again (sentadapt adapt ... --overwrite)")
    assert not (tmp_path / "out").exists()


def test_unfinished_run_exports_its_last_checkpoint_with_the_layout_it_trained(runs: dict[str, Path],
                                                                                tmp_path: Path) -> None:
    """No published model and no best/ to copy the layout from: it is rebuilt from config.yaml (ConSERT:
    last2avg, i.e. WeightedLayerPooling) and gives what exporting the same checkpoint of the finished run gives."""
    finished = runs["consert"]
    run = _unfinished_copy(finished, tmp_path / "run")
    result = _export(run, tmp_path / "from-unfinished", "--checkpoint", "last", count=10)
    assert result.exit_code == 0, result.output
    base = finished.parent / "tiny"
    assert f"{run}: no published model, no best/; rebuilding the model layout from config.yaml (consert on " \
           f"{base})" in result.stderr.splitlines()
    assert "checkpoint step-0000004" in result.stdout
    reference = _export(finished, tmp_path / "from-finished", "--checkpoint", "last", count=10)
    assert reference.exit_code == 0, reference.output
    ours, theirs = tmp_path / "from-unfinished", tmp_path / "from-finished"
    assert [m["type"] for m in json.loads((ours / "modules.json").read_text())] == [
        m["type"] for m in json.loads((theirs / "modules.json").read_text())]
    for weights in ("model.safetensors", "1_WeightedLayerPooling/model.safetensors"):
        mine, reference_weights = load_file(str(ours / weights)), load_file(str(theirs / weights))
        assert mine.keys() == reference_weights.keys()
        assert all(torch.equal(mine[name], reference_weights[name]) for name in mine)


def test_unfinished_run_with_a_best_model_exports_it_and_names_the_checkpoints(runs: dict[str, Path],
                                                                               tmp_path: Path) -> None:
    run = _unfinished_copy(runs["consert"], tmp_path / "run", with_best=True)
    result = _export(run, tmp_path / "out", "--format", "hf", count=10)
    assert result.exit_code == 0, result.output
    assert (f"{run}: the run did not finish; exporting its best model so far (best/, step 4); its checkpoints "
            "(steps 2, 4) export with --checkpoint last or --checkpoint STEP") in result.stderr.splitlines()
    assert f"run {run} (best/ (the run did not finish), step 4)" in result.stdout


def test_sentences_file_is_read_like_every_text_file(tmp_path: Path) -> None:
    """--sentences goes through data/textfile.py: gzip, a BOM and CRLF are read; UTF-16 and a missing file are one
    line naming the option."""
    import gzip

    from sentadapt.errors import DataError
    from sentadapt.exporting import read_sentences

    packed = tmp_path / "sentences.txt.gz"
    packed.write_bytes(gzip.compress("\ufeffthe first one\r\n\r\n  the second  \r\n".encode()))
    assert read_sentences(packed) == ["the first one", "the second"]
    wide = tmp_path / "wide.txt"
    wide.write_text("a sentence\n", encoding="utf-16")
    for path, message in [(wide, "is UTF-16 text"), (tmp_path / "missing.txt", "no such file")]:
        with pytest.raises(DataError, match=f"^--sentences {path}: {message}"):
            read_sentences(path)
    (tmp_path / "blank.txt").write_text("\n \n")
    with pytest.raises(DataError, match="no sentences"):
        read_sentences(tmp_path / "blank.txt")


def test_exporting_a_keep_base_run_says_so(runs: dict[str, Path], tmp_path: Path) -> None:
    """The model card said it; the command's own output now does too."""
    import yaml

    run = tmp_path / "run"
    shutil.copytree(runs["consert"], run)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics.update(decision="keep-base", decision_reason="within noise on pairs.tsv (Δ +0.10 [-0.50, +0.70])")
    (run / "metrics.json").write_text(json.dumps(metrics))
    result = _export(run, tmp_path / "out")
    assert result.exit_code == 0, result.output
    base = yaml.safe_load((run / "config.yaml").read_text())["base"]
    assert (f"{run}: this run decided keep-base (within noise on pairs.tsv (Δ +0.10 [-0.50, +0.70])); exporting "
            f"what it trained anyway — by its dev set, the base model {base} is at least as good") in result.stderr
    kept = json.loads((runs["consert"] / "metrics.json").read_text())["decision"]
    plain = _export(runs["consert"], tmp_path / "plain")
    assert ("this run decided keep-base" in plain.stderr) == (kept == "keep-base")


def test_the_result_says_what_the_command_printed(runs: dict[str, Path], tmp_path: Path) -> None:
    """Issue 69: what a command prints is its result's (`ExportResult.lines()`): a notebook gets the same lines."""
    from sentadapt import export

    printed = _export(runs["sg-opt"], tmp_path / "cli", count=20)
    assert printed.exit_code == 0, printed.output
    result = export(runs["sg-opt"], tmp_path / "api", sentences=tmp_path / "sentences.txt")
    lines = result.lines()
    assert lines[0].startswith(f"wrote {tmp_path / 'api'} (sentence-transformers, fp32): ")
    # the size in powers of 1024, as the free-space check and `cache info` count it (and `du -h`)
    size = sum((tmp_path / "api" / name).stat().st_size for name in result.files)
    assert f" {len(result.files)} files, {size / 1024:.1f} KB; " in lines[0] and 1024 < size < 1024 ** 2
    assert [line.replace(str(tmp_path / "api"), "OUT") for line in lines[1:]] == [
        line.replace(str(tmp_path / "cli"), "OUT") for line in printed.stdout.splitlines()[1:]]
    assert len(lines) == 1 + len(result.checks) and lines[1].startswith("verified: SentenceTransformer(OUT) on 20 ")
