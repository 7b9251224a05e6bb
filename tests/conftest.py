"""Offline fixtures: tiny randomly initialised BERTs saved as real model folders, and tiny data files."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

# `make test &` or `nohup make test` starts the suite with SIGINT ignored, and an ignored signal stays ignored across
# exec: every `sentadapt` the tests start would then ignore the Ctrl-C they send (the product rightly keeps an
# inherited SIG_IGN: stopping/process.py). A handler, unlike SIG_IGN, is reset to the default on exec, so with this one
# the children start with SIGINT as a terminal gives it. Each xdist worker loads this file, so each sets it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # unit tests never touch the network
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# no heartbeat line (cli/_common.heartbeat) amid a command's exact stderr; tests that watch it set their own
os.environ["SENTADAPT_HEARTBEAT_S"] = "3600"
# the corpus cache (and CLSR's embedding cache) of a test run lives in its own folder, never the user's: one per
# pytest process (each xdist worker has its own), removed when that process exits
os.environ["SENTADAPT_CACHE"] = tempfile.mkdtemp(prefix="sentadapt-test-cache-")
atexit.register(shutil.rmtree, os.environ["SENTADAPT_CACHE"], ignore_errors=True)

# `pytest -n 2` runs two workers on this project's 2-core machines; each worker's torch would start one intra-op thread
# per core, four busy threads on two cores spinning against each other. One thread per worker (and per process a test
# starts) took the suite from 245 s to 186 s here. The parity tests also run alone with every core (Makefile).
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

# Floating-point tolerances: the rule every test follows.
#
# Two correct CPU kernels do not give the same float32 bits: ATen picks a SIMD path per machine
# (ATEN_CPU_CAPABILITY default | avx2 | avx512), BLAS blocks its dot products by core type, and the
# thread count changes the order of parallel reductions. Each float32 operation rounds with relative
# error up to u = 2^-24 ≈ 6e-8 (machine epsilon 2^-23 ≈ 1.2e-7); a result that goes through k
# dependent operations, or sums n terms in another order, can move by ~k·u, resp. up to n·u relative to
# the terms' scale. A tiny-BERT embedding is ~40 operations deep (2 layers × embedding sum, 4 matmuls of
# 32-37 terms, softmax, 2 LayerNorms) plus pooling: ~40-100 · 6e-8 ≈ 2.4e-6-6e-6 relative in the worst
# case, ~1e-6 typically. Measured here (tiny BERT, 32 sentences): ATEN_CPU_CAPABILITY=default vs avx2
# moves vector elements of scale ~2 by up to 4.8e-7 and cosines by up to 1.8e-7; batch 3 on one thread
# vs batch 32 on two threads by 4.2e-7 and 6e-8.
#
#  * float32 results of DIFFERENT computations (another kernel, batch shape, padding, process count,
#    thread count, reduction order, a float64 reference): compare RELATIVELY with FLOAT32_RTOL = 1e-5,
#    ~80 epsilons, 2-4x the worst case above. Never absolute 1e-6 on a number of size 38 (that is 2e-8
#    relative, below one float32 ulp of 38.18 = 3.8e-6): the original failure, a Pearson x100 of
#    38.180772 vs 38.180775, was 7.6e-8 relative, i.e. one rounding.
#  * Statistics of such results amplify: Pearson moves by ~δcos / std(cos), so with cosines spread by
#    0.01 a 1e-7 cosine change is 1e-5 relative in r; Spearman is exact until two cosines swap order.
#    FLOAT32_RTOL covers the first; the test data keep cosines far from ties (a swap is a real change).
#  * Elementwise vector comparisons: absolute tolerance relative to the vector's scale (unit-norm
#    32-dim vectors, elements ~0.2; raw hidden states ~1): atol 1e-5, plus allclose's rtol 1e-5.
#  * The SAME computation twice on one machine (save → reload → encode, resume vs uninterrupted run in
#    the same process settings, a tensor and its .item()) is deterministic: tight or exact checks stay.
#  * float64 against float64 (scipy, a float64 reference of an equation): 1e-12 relative or 1e-6
#    absolute on O(1) values are both far above float64 rounding (2.2e-16) and stay.
FLOAT32_RTOL = 1e-5

ASSETS = Path(__file__).parent / "assets"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_MODELS = SHARED / "models"
SHARED_STS = SHARED / "data" / "sts"

TINY_SENTENCES = [
    "the server is down",
    "the database backup failed",
    "a man is playing a guitar",
    "a woman is cooking food",
    "the dog is running fast",
    "dns timeout on the cluster",
    "user login failed with a new password",
    "the red car is big",
]


def tiny_vocabulary_size() -> int:
    """The tiny models' vocabulary: tests/assets/vocab.txt's 156 tokens."""
    return sum(1 for _ in (ASSETS / "vocab.txt").open())


def tiny_tokenizer() -> Any:
    """The tiny models' WordPiece tokenizer (tests/assets/vocab.txt), also for models of other families."""
    from transformers import BertTokenizerFast

    vocab = {token: index for index, token in enumerate((ASSETS / "vocab.txt").read_text().split())}
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True)
    assert tokenizer.tokenize("the server") == ["the", "server"], "tiny tokenizer lost its vocabulary"
    return tokenizer


def build_tiny_bert(folder: Path, layers: int = 2, seed: int = 0) -> Path:
    """A 2-layer, 32-dim BERT with a 156-token WordPiece vocabulary, saved as an HF folder."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tiny_vocabulary_size(), hidden_size=32, num_hidden_layers=layers,
        num_attention_heads=2, intermediate_size=37, max_position_embeddings=64, initializer_range=0.2,
    )
    model = BertModel(config, add_pooling_layer=False)
    tokenizer = tiny_tokenizer()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_model_dir_3layers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert-3"), layers=3, seed=1)


@pytest.fixture
def tiny_encoder(tiny_model_dir: Path):
    from sentadapt.model.encoder import Encoder

    return Encoder.load(tiny_model_dir, device="cpu")


@pytest.fixture
def pairs_tsv(tmp_path: Path) -> Path:
    rows = [
        ("the server is down", "the server is not running", 4.5),
        ("the database backup failed", "the backup job failed", 4.0),
        ("a man is playing a guitar", "a man is playing music", 3.5),
        ("a woman is cooking food", "a person is cooking", 3.0),
        ("the dog is running fast", "a cat is running", 2.0),
        ("dns timeout on the cluster", "the red car is big", 0.0),
        ("user login failed", "the password is new", 1.5),
        ("the red car is big", "a big red car", 5.0),
    ]
    path = tmp_path / "pairs.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows))
    return path


@pytest.fixture(autouse=True)
def _fp32_on_every_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ConSERT teacher run's default `mixed_precision: auto` trains in bf16 on a CPU with native bf16 matmuls and
    in fp32 elsewhere. The detection answers "no" in every test, so an in-process run computes the same float32
    losses on every CPU (the golden losses, the parity tests); tests/train/test_precision.py fakes both answers and
    calls the real check. A test that starts sentadapt in a subprocess passes `--mixed-precision` itself.

    Likewise the timing of a training pass (train/pass_costs.py) gives the same figures in every in-process run:
    a pass that costs the 100 tokens the length chunks used before they were timed, bf16 in half fp32's time, so
    `auto` is still bf16 where the detection says native (tests/train/test_pass_costs.py times real passes)."""
    from sentadapt.train import compute, pass_costs

    monkeypatch.setattr(compute, "cpu_multiplies_bf16", lambda: False)
    monkeypatch.setattr(pass_costs, "time_passes", lambda encoder, bf16: [
        (0.0005 if bf16 else 0.001) * (100 + rows * length) for rows, length in pass_costs.SHAPES])


@pytest.fixture(autouse=True)
def _fresh_accelerate_state() -> Iterator[None]:
    """Accelerate keeps one process-wide state (device, mixed precision) that a second Accelerator may not change:
    after an in-process run in fp32, one in bf16 or fp16 would raise. Cleared after each test, so no test depends
    on which ran before it in this process (the order differs under pytest-xdist)."""
    yield
    state = sys.modules.get("accelerate.state")
    if state is not None:  # never imported here: nothing to clear
        state.AcceleratorState._reset_state(reset_partial_state=True)
        state.GradientState._reset_state()


@pytest.fixture(autouse=True)
def _stop_signal_handlers_restored() -> Iterator[None]:
    """A command that ends for a stop signal ignores later ones until its process exits (stopping/process.told); run
    in-process by CliRunner, the process is pytest's, which goes on: each test gets its handlers back."""
    from sentadapt.stopping.process import STOP_SIGNALS

    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        if handler is not None:
            signal.signal(signum, handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` (fp16/bf16 steps, eval dtypes, the fused optimizer) skip where torch sees no CUDA device."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="gpu: needs a CUDA GPU; torch sees none")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def needs_shared() -> pytest.MarkDecorator:
    return pytest.mark.skipif(not SHARED_MODELS.is_dir(), reason="../shared (real models and data) not present")


@pytest.fixture
def long_paths(tiny_model_dir: Path, tiny_model_dir_3layers: Path, tmp_path: Path) -> list[Path]:
    """The two tiny models under paths far longer than an 80-column table's model column."""
    deep = tmp_path / "a-rather-long-folder-name" / "models-of-the-shared-collection"
    deep.mkdir(parents=True)
    targets = [deep / "paraphrase-minilm-l3-v2-adapted-to-it-support", deep / "all-minilm-l6-v2-adapted-to-it"]
    for source, target in zip((tiny_model_dir, tiny_model_dir_3layers), targets):
        target.symlink_to(source)
    return targets


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A 40-line one-sentence-per-line corpus."""
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"the server {i} is down\n" for i in range(40)))
    return path


def run_adapt(*args: str):
    """`sentadapt adapt ARGS` in-process; exceptions that are bugs propagate (not turned into exit codes). The run's
    metrics.json, when there is one, must be strict JSON (no NaN or Infinity: issue 67)."""
    from typer.testing import CliRunner

    from sentadapt.cli import app

    result = CliRunner().invoke(app, ["adapt", *args], catch_exceptions=False)
    flags = list(args)
    for flag in ("--output", "-o"):
        if flag in flags[:-1]:
            metrics = Path(flags[flags.index(flag) + 1]) / "metrics.json"
            if metrics.is_file():
                json.loads(metrics.read_text(encoding="utf-8"), parse_constant=_refuse_non_finite)
    return result


def _refuse_non_finite(constant: str) -> None:
    raise AssertionError(f"metrics.json holds {constant}: not strict JSON")


def run_config(recipe_name: str, model: Path, corpus: Path, output: Path, flags: dict[str, object],
               sets: list[str], dev: str | None = "none"):
    """A RunConfig built as `adapt` builds it: the recipe's paper defaults < `flags` < `--set` values."""
    from sentadapt.config.merging import build_config
    from sentadapt.recipes import RECIPES

    recipe = RECIPES.get(recipe_name)
    return build_config(recipe_name, recipe.spec.settings, recipe.spec.train_defaults, None, flags, sets,
                        base=str(model), corpus=[str(corpus)], output=str(output), dev=dev)


def cpu_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A module's state dict on the CPU, to compare weights across runs: the trainer leaves its model on the
    accelerator's device (cuda on a GPU machine), and torch.equal between devices raises."""
    return {name: tensor.detach().cpu() for name, tensor in module.state_dict().items()}


def run_checked(command: list[str], env: dict[str, str], timeout: float = 600):
    """Run a command (a `sentadapt adapt` subprocess, torchrun); a non-zero exit fails the test with the command's
    stderr, and a hang past `timeout` fails it too, after its whole process group (torchrun's workers) is killed."""
    import signal
    import subprocess

    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{' '.join(command)} did not finish in {timeout} s; stderr:\n{stderr}")
    assert process.returncode == 0, f"{' '.join(command)} exited {process.returncode}; stderr:\n{stderr}"
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def adapt_imports_torch(*args: str) -> tuple[int, bool]:
    """Run `sentadapt adapt ARGS` in a fresh interpreter; its exit code and whether it imported torch (an option
    error, a dry run: what needs no model must not pay torch's import)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom sentadapt.cli import app\n"
        f"r = CliRunner().invoke(app, ['adapt', *{list(args)!r}])\n"
        "print(r.exit_code, 'torch' in sys.modules)"
    )
    exit_code, imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                         check=True).stdout.split()
    return int(exit_code), imported == "True"


def poison(inputs, at_calls: set[int], how: str = "loss") -> None:
    """Make the recipe's loss NaN ("loss"), or its gradient infinite with a finite loss ("gradient"), at the
    given calls of `embed` (1-based): the non-finite paths of the training loop, on demand."""
    original = inputs.recipe.embed
    calls = {"n": 0}

    def embed(encoder, heads, batch, exported):
        calls["n"] += 1
        embedded = original(encoder, heads, batch, exported)
        if calls["n"] in at_calls:
            embedded.terms[0] = poisoned(embedded.terms[0], how)
        return embedded

    inputs.recipe.embed = embed


def poisoned(term, how: str = "loss"):
    """`term` with a NaN value ("loss") or a finite value whose gradient is infinite ("gradient")."""
    import dataclasses

    def loss(cut):
        value = term.loss(cut)
        if how == "loss":
            return value * float("nan")
        value.register_hook(lambda grad: grad + float("inf"))
        return value

    return dataclasses.replace(term, loss=loss)


def count_tensor_calls(monkeypatch: pytest.MonkeyPatch, *names: str) -> dict[str, int]:
    """Count calls of these `torch.Tensor` methods (e.g. "item", "tolist": reads that wait for the device) for the
    rest of the test; the returned dict fills in as they happen."""
    import torch

    calls = dict.fromkeys(names, 0)
    for name in names:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original):
            calls[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


def sts_dev_evaluator(tmp_path: Path, gold: np.ndarray):
    """The evaluator `adapt --dev` builds for a scored pairs file with these gold scores (placeholder texts)."""
    from sentadapt.evaluation.task_types import resolve_dev_set

    path = tmp_path / "dev.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"a{i}\tb{i}\t{g:.4f}\n" for i, g in enumerate(gold)))
    _, make = resolve_dev_set(str(path), None)
    return make()


def noisy_outputs(evaluator, gold: np.ndarray, noise: float, seed: int) -> dict:
    """A model's stored dev outputs: cosines = gold / 5 + seeded normal noise (less noise, higher Spearman)."""
    values = gold / 5 + np.random.default_rng(seed).normal(0, noise, gold.size)
    return {evaluator.tasks[0].name: {"cosine": values.tolist()}}
