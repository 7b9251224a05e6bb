"""The shared training loop with ConSERT on tiny random BERTs: loss goes down, resume is exact, outputs reload."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sentadapt.config.schema import TrainConfig
from sentadapt.run.execute import train_stage, write_config
from sentadapt.run.inputs import build_inputs
from sentadapt.storage.run_folder import list_checkpoints
from sentadapt.train.loop import SilentReporter, Trainer, TrainingDiverged, TrainingInterrupted
from tests.conftest import FLOAT32_RTOL, count_tensor_calls, poison, run_checked, run_config

WORDS = [
    "the", "a", "man", "woman", "dog", "cat", "car", "server", "database", "disk", "network", "error",
    "failed", "job", "backup", "restart", "deploy", "playing", "guitar", "music", "food", "cooking",
    "running", "fast", "slow", "red", "blue", "green", "big", "small", "new", "old", "service", "request",
    "timeout", "latency", "memory", "cpu", "cluster", "node", "pod", "user", "login", "password", "cert",
    "dns",
]


@pytest.fixture(scope="module")
def toy_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(0)
    lines = {" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(200)}
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(sorted(lines)) + "\n")
    return path


def make_config(model: Path, corpus: Path, output: Path, dev: str | None = "none", sets: tuple[str, ...] = (),
                **train: object):
    flags = {"batch_size": 16, "max_length": 16, "lr": 3e-3, "max_steps": 12, "eval_every": 0,
             "checkpoint_every": 0, "log_every": 1, **train}
    return run_config("consert", model, corpus, output, flags, list(sets), dev)


class Recorder(SilentReporter):
    def __init__(self, stop_at: int | None = None) -> None:
        self.losses_by_step: dict[int, float] = {}
        self.stop_at = stop_at

    def advance(self, step: int, lr: float, examples_per_s: float) -> None:
        if step == self.stop_at:
            signal.raise_signal(signal.SIGINT)  # a Ctrl-C: the loop stops at this step's boundary

    def losses(self, step: int, loss: float, parts: dict[str, float]) -> None:  # type: ignore[override]
        self.losses_by_step[step] = loss


def train(config, reporter=None, resume: bool = False):
    if not resume:
        write_config(config)  # as the lifecycle does before training: what `--resume` reads back
    return train_stage(Trainer(build_inputs(config, lambda _t: None), reporter), resume)


def test_a_few_steps_lower_the_loss(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    recorder = Recorder()
    train(make_config(tiny_model_dir, toy_corpus, tmp_path / "run", max_steps=30), recorder)
    first = sum(recorder.losses_by_step[s] for s in range(1, 6)) / 5
    last = sum(recorder.losses_by_step[s] for s in range(26, 31)) / 5
    assert last < first * 0.9, (first, last)


def test_fixed_seed_gives_a_fixed_first_loss(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        recorder = Recorder()
        train(make_config(tiny_model_dir, toy_corpus, tmp_path / name, max_steps=3), recorder)
        runs.append(recorder.losses_by_step)
    assert runs[0] == runs[1]
    assert all(torch.isfinite(torch.tensor(v)) for v in runs[0].values())


def test_resume_reproduces_the_uninterrupted_trajectory(tiny_model_dir: Path, toy_corpus: Path,
                                                        tmp_path: Path) -> None:
    straight = Recorder()
    train(make_config(tiny_model_dir, toy_corpus, tmp_path / "straight", max_steps=12), straight)

    config = make_config(tiny_model_dir, toy_corpus, tmp_path / "resumed", max_steps=12)
    with pytest.raises(TrainingInterrupted) as interrupted:
        train(config, Recorder(stop_at=5))
    assert "resume with: sentadapt adapt --resume --output" in str(interrupted.value)
    assert interrupted.value.exit_code == 130
    assert [p.name for p in list_checkpoints(tmp_path / "resumed" / "checkpoints")] == ["step-0000005"]
    resumed = Recorder()
    train(config, resumed, resume=True)
    assert sorted(resumed.losses_by_step) == list(range(6, 13))
    for step in range(6, 13):
        assert resumed.losses_by_step[step] == pytest.approx(straight.losses_by_step[step], abs=1e-6), step


def test_corrupted_checkpoint_falls_back_to_the_previous(tiny_model_dir: Path, toy_corpus: Path,
                                                         tmp_path: Path) -> None:
    config = make_config(tiny_model_dir, toy_corpus, tmp_path / "run", max_steps=6, checkpoint_every=2,
                         keep_checkpoints=3)
    with pytest.raises(TrainingInterrupted):
        train(config, Recorder(stop_at=5))  # checkpoints at 2, 4 and 5 (interrupt)
    newest = tmp_path / "run" / "checkpoints" / "step-0000005" / "model.safetensors"
    newest.write_bytes(newest.read_bytes()[:100])  # truncated
    messages: list[str] = []
    recorder = Recorder()
    recorder.message = messages.append  # type: ignore[method-assign]
    train(config, recorder, resume=True)
    assert messages[0] == f"skipping checkpoint: {newest}: checksum mismatch (truncated or corrupted)"
    assert sorted(recorder.losses_by_step) == [5, 6]


def test_dev_selection_writes_a_model_that_scores_the_same_everywhere(
    tiny_model_dir_3layers: Path, toy_corpus: Path, pairs_tsv: Path, tmp_path: Path
) -> None:
    from sentadapt.evaluation.sts import StsEvaluator
    from sentadapt.model.encoder import Encoder

    output = tmp_path / "run"
    result = train(make_config(tiny_model_dir_3layers, toy_corpus, output, dev=str(pairs_tsv), max_steps=6,
                               eval_every=2))
    metrics = json.loads((output / "metrics.json").read_text())
    assert [h["step"] for h in metrics["history"]] == [0, 2, 4, 6]
    assert metrics["best_score"] == max(h["dev"] for h in metrics["history"][1:])
    assert metrics["published_step"] == result.state.best_step and metrics["pooling"] == "last2avg"
    encoder = Encoder.load(output, device="cpu")
    assert encoder.pooling_name == "last2avg"
    score = StsEvaluator.from_pairs_file(pairs_tsv)(encoder).average
    assert score == pytest.approx(metrics["best_score"], abs=1e-4)
    st = pytest.importorskip("sentence_transformers")
    sentences = ["the server is down", "a man is playing a guitar", "dns timeout on the cluster"]
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(sentences, convert_to_tensor=True).cpu()
    assert torch.nn.functional.cosine_similarity(encoder.encode(sentences), theirs).min() >= 0.9999
    assert not (output / "best").exists() and (output / "config.yaml").is_file()


@pytest.mark.parametrize("log_every", [1, 10])
def test_non_finite_loss_stops_with_the_step_and_keeps_weights(tiny_model_dir: Path, toy_corpus: Path,
                                                               tmp_path: Path, log_every: int) -> None:
    """log_every 10: the loop only reads step 3's loss back after step 6, and still stops with step 2's weights."""
    config = make_config(tiny_model_dir, toy_corpus, tmp_path / "run", max_steps=6, log_every=log_every)
    inputs = build_inputs(config, lambda _t: None)
    poison(inputs, {3})
    (tmp_path / "run").mkdir()
    with pytest.raises(TrainingDiverged) as error:
        Trainer(inputs).run()
    checkpoint = tmp_path / "run" / "checkpoints" / "step-0000002"
    assert str(error.value) == (
        f"loss is nan at step 3; stopped. The last good weights are in {checkpoint}. "
        "Try a lower --lr, a higher temperature, or --mixed-precision no"
    )
    from safetensors.torch import load_file

    assert all(torch.isfinite(t).all() for t in load_file(str(checkpoint / "model.safetensors")).values())


def test_a_late_read_back_leaves_the_same_checkpoint_as_an_immediate_one(tiny_model_dir: Path, toy_corpus: Path,
                                                                          tmp_path: Path) -> None:
    """Step 3's NaN seen at once (log_every 1) or after step 6 (log_every 10): steps 3-6 were skipped on the device,
    so both runs leave step 2's weights and optimizer moments, bit for bit (same process, same kernels)."""
    from safetensors.torch import load_file

    saved = {}
    for log_every in (1, 10):
        output = tmp_path / f"run-{log_every}"
        inputs = build_inputs(make_config(tiny_model_dir, toy_corpus, output, max_steps=6, log_every=log_every),
                              lambda _t: None)
        poison(inputs, {3})
        output.mkdir()
        with pytest.raises(TrainingDiverged):
            Trainer(inputs).run()
        checkpoint = output / "checkpoints" / "step-0000002"
        optimizer = torch.load(checkpoint / "optimizer.pt", weights_only=True)
        schedule = torch.load(checkpoint / "scheduler.pt", weights_only=True)
        saved[log_every] = (load_file(str(checkpoint / "model.safetensors")), optimizer["state"],
                            json.loads((checkpoint / "trainer_state.json").read_text())["step"],
                            (schedule["last_epoch"], schedule["_last_lr"],
                             [group["lr"] for group in optimizer["param_groups"]]))
    (weights, moments, step, lrs), (late_weights, late_moments, late_step, late_lrs) = saved[1], saved[10]
    assert step == late_step == 2
    assert lrs == late_lrs and lrs[0] == 2
    assert weights.keys() == late_weights.keys()
    assert all(torch.equal(weights[name], late_weights[name]) for name in weights)
    for index, state in moments.items():
        assert all(torch.equal(value, late_moments[index][key]) for key, value in state.items()), index


def test_corpus_smaller_than_a_batch(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentadapt.errors import ConfigError

    corpus = tmp_path / "small.txt"
    corpus.write_text("one line\nanother line\n")
    with pytest.raises(ConfigError, match=r"^the corpus has 2 examples, fewer than one step of batch_size 16"):
        train(make_config(tiny_model_dir, corpus, tmp_path / "run"))


def test_train_config_ranges() -> None:
    from sentadapt.errors import ConfigError

    with pytest.raises(ConfigError) as error:
        TrainConfig(batch_size=1).validate()
    assert str(error.value) == ("batch_size: 1 is out of range; valid: [2, inf] (contrastive training needs at "
                                "least 2 sentences per batch for in-batch negatives)")


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo")
def test_two_processes_match_one_process_on_the_same_global_batch(tiny_model_dir: Path, toy_corpus: Path,
                                                                   tmp_path: Path) -> None:
    """Deterministic views (none, none) so only the gather and the gradient scaling can make a difference."""
    common = [str(toy_corpus), "--base", str(tiny_model_dir), "--batch-size", "16", "--max-steps", "3",
              "--max-length", "16", "--lr", "1e-3", "--eval-every", "0", "--checkpoint-every", "0",
              "--dev", "none", "--set", "views=none,none", "--set", "log_every=1"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    single = tmp_path / "single"
    run_checked([sys.executable, "-m", "sentadapt", "adapt", *common, "--output", str(single)], env)
    double = tmp_path / "double"
    torchrun = Path(sys.executable).parent / "torchrun"  # docs/usage.md's command for N CPU processes
    # --standalone: a free port chosen by the OS (a fixed or pid-derived one collides with other sessions)
    run_checked([str(torchrun), "--standalone", "--local-addr", "127.0.0.1", "--nproc_per_node", "2",
                 "-m", "sentadapt", "adapt", *common, "--output", str(double)], env)

    def losses(run: Path) -> list[float]:
        records = [json.loads(line) for line in (run / "train.log").read_text().splitlines()]
        return [r["loss"] for r in records if "loss" in r]

    assert len(losses(single)) == 3
    assert losses(double) == pytest.approx(losses(single), rel=FLOAT32_RTOL)
    # the run record tells the two apart: process count, backend, per-process share of the global batch
    recorded = {run.name: json.loads((run / "metrics.json").read_text())["environment"] for run in (single, double)}
    assert [(e["processes"], e["distributed"], e["backend"], e["per_process_batch"], e["global_batch"])
            for e in recorded.values()] == [(1, "NO", None, 16, 16), (2, "MULTI_CPU", "gloo", 8, 16)]
    import accelerate
    import transformers

    import sentadapt

    assert recorded["double"]["versions"] == {"sentadapt": sentadapt.__version__, "torch": torch.__version__,
                                              "transformers": transformers.__version__,
                                              "accelerate": accelerate.__version__}
    assert (recorded["double"]["mixed_precision"], recorded["double"]["seed"]) == ("no", 42)


def test_bf16_mixed_precision_trains_on_cpu(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    """A subprocess: accelerate's state is a per-process singleton, fixed by the first Accelerator."""
    output = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "sentadapt", "adapt", str(toy_corpus), "--base", str(tiny_model_dir),
                    "--output", str(output), "--batch-size", "16", "--max-steps", "3", "--max-length", "16",
                    "--mixed-precision", "bf16", "--dev", "none", "--set", "log_every=1"],
                   check=True, capture_output=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    losses = [json.loads(line)["loss"] for line in (output / "train.log").read_text().splitlines()]
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(v)) for v in losses)
    from sentadapt.model.encoder import Encoder

    reloaded = Encoder.load(output, device="cpu")  # saved weights stay float32
    assert next(reloaded.backbone.parameters()).dtype == torch.float32


def test_resume_of_a_finished_run_is_refused(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    from sentadapt.errors import ConfigError

    config = make_config(tiny_model_dir, toy_corpus, tmp_path / "run", max_steps=2, checkpoint_every=1)
    train(config)
    with pytest.raises(ConfigError, match=r"is a finished run \(metrics.json is written\); nothing to resume"):
        train(config, resume=True)


def test_fp16_without_cuda_is_refused(tiny_model_dir: Path, toy_corpus: Path, tmp_path: Path) -> None:
    from sentadapt.errors import ConfigError

    if torch.cuda.is_available():
        pytest.skip("fp16 is valid on this machine")
    with pytest.raises(ConfigError, match=r"^mixed_precision: fp16 needs a CUDA GPU"):
        train(make_config(tiny_model_dir, toy_corpus, tmp_path / "run", mixed_precision="fp16"))


def test_atomic_folder_write_keeps_the_previous_version_on_failure(tmp_path: Path) -> None:
    from sentadapt.storage.durable import atomic_folder, verify_folder

    target = tmp_path / "best"
    with atomic_folder(target) as folder:
        (folder / "weights").write_text("good")
    with pytest.raises(KeyboardInterrupt), atomic_folder(target) as folder:
        (folder / "weights").write_text("half")
        raise KeyboardInterrupt
    assert (target / "weights").read_text() == "good"
    verify_folder(target)
    assert [p.name for p in tmp_path.iterdir()] == ["best"]  # no temporary folders left behind


@pytest.mark.parametrize(("recipe", "steps", "logged"), [("consert", 50, [1, 10, 20, 30, 40, 50]),
                                                         ("sg-opt", 20, [1, 10, 20])])  # SG-OPT's steps cost more
def test_a_step_reads_nothing_back_from_the_device(recipe: str, steps: int, logged: list[int], tiny_model_dir: Path,
                                                  toy_corpus: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`.item()` waits for the device: the loop reads the step records back once per log_every (and step 1),
    so 50 steps at the default log_every make 6 read-backs (`tolist`) and no per-step `.item()`: the fused
    AdamW keeps its step counts on the device, the finite check and the on_nan rule run there too."""
    calls = count_tensor_calls(monkeypatch, "item", "tolist")
    flags = {"batch_size": 8, "max_length": 16, "max_steps": steps, "eval_every": 0, "checkpoint_every": 0,
             "log_every": TrainConfig().records.log_every}
    config = run_config(recipe, tiny_model_dir, toy_corpus, tmp_path / "run", flags, [], "none")
    inputs = build_inputs(config, lambda _t: None)
    (tmp_path / "run").mkdir()
    Trainer(inputs).run()
    assert TrainConfig().records.log_every == 10
    assert calls["item"] <= 2 * steps, calls  # the acceptance bound: at most 2 per step on average
    assert calls == {"item": 0, "tolist": len(logged)}, calls  # one read-back per logged step
    lines = (tmp_path / "run" / "train.log").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == logged


def test_lars_skips_on_the_device_when_found_inf_is_set() -> None:
    """found_inf = 1 leaves weights and momentum as they were, NaN gradients included; 0 steps normally."""
    from sentadapt.train.optim import LARS, skips_on_device

    weight = torch.nn.Parameter(torch.ones(2, 2))
    optimizer = LARS([{"params": [weight], "weight_decay": 1e-4}], lr=0.5)
    assert skips_on_device(optimizer)
    weight.grad = torch.full((2, 2), 0.5)
    optimizer.step()
    before, momentum = weight.detach().clone(), optimizer.state[weight]["momentum_buffer"].clone()
    weight.grad = torch.tensor([[math.nan, 1.0], [1.0, 1.0]])
    optimizer.found_inf = torch.ones(())
    optimizer.step()
    assert torch.equal(weight.detach(), before) and torch.equal(optimizer.state[weight]["momentum_buffer"], momentum)
    weight.grad = torch.full((2, 2), 0.5)
    optimizer.found_inf = torch.zeros(())
    optimizer.step()
    reference = LARS([{"params": [reference_weight := torch.nn.Parameter(torch.ones(2, 2))], "weight_decay": 1e-4}],
                     lr=0.5)
    for _ in range(2):
        reference_weight.grad = torch.full((2, 2), 0.5)
        reference.step()
    assert torch.allclose(weight.detach(), reference_weight.detach(), rtol=FLOAT32_RTOL)


def test_adamw_is_fused_where_pytorch_has_the_kernel() -> None:
    from sentadapt.train.optim import build_optimizer, skips_on_device

    optimizer = build_optimizer("adamw", [{"params": [torch.nn.Parameter(torch.ones(3))], "weight_decay": 0.0}],
                                1e-3, (0.9, 0.999), 1e-6)
    assert optimizer.defaults["fused"] and skips_on_device(optimizer)


def test_prefetcher_builds_ahead_in_order_and_stops_at_the_end() -> None:
    from sentadapt.train.feed import BatchPrefetcher

    built: list[int] = []

    def build(index: int) -> dict[str, torch.Tensor]:
        built.append(index)
        return {"input_ids": torch.full((2, 3), index)}

    with BatchPrefetcher(build, torch.device("cpu"), first_index=4, end_index=7) as batches:
        assert batches.get(4)["input_ids"][0, 0].item() == 4
        assert batches.get(5)["input_ids"][0, 0].item() == 5
        assert batches.get(2)["input_ids"][0, 0].item() == 2  # out of order: built on demand, still right
        assert batches.get(3)["input_ids"][0, 0].item() == 3
        assert batches.get(6)["input_ids"][0, 0].item() == 6
    assert max(built) == 6  # nothing at or past end_index
    assert built[:2] == [4, 5]  # in the order the loop asks for them


@pytest.mark.parametrize(("sets", "passes"), [
    ((), 1),  # the paper's views (shuffle, feature cutoff): both in one pass, the backbone without its dropout
    # one view with the model's dropout, one without, and the clean pass of distillation: three modes in a step
    (("views=encoder-dropout,shuffle", "distill=1"), 3),
], ids=["paper-views", "mixed-dropout-and-distill"])
def test_gradient_checkpointing_gives_the_same_losses_and_weights(tiny_model_dir: Path, toy_corpus: Path,
                                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   sets: tuple[str, ...], passes: int) -> None:
    """Recomputing each layer in backward changes memory, not numbers: the same losses and weights after 4 steps
    of ConSERT, whose passes switch the backbone's dropout on and off within a step. Tolerance:
    float32 relative rounding (the recomputed forward runs the same kernels, so it is usually bit-exact)."""
    from safetensors.torch import load_file

    from sentadapt.model.encoder import Encoder

    recomputed = []  # one entry per checkpointed layer call in the run that enables it
    enable = Encoder.enable_gradient_checkpointing

    def recording_enable(encoder: Encoder) -> None:
        enable(encoder)
        for module in encoder.backbone.modules():
            if getattr(module, "gradient_checkpointing", False) is True:
                checkpoint = module._gradient_checkpointing_func
                module._gradient_checkpointing_func = lambda *a, _c=checkpoint, **k: recomputed.append(1) or _c(*a, **k)

    monkeypatch.setattr(Encoder, "enable_gradient_checkpointing", recording_enable)
    runs = {}
    for name, on in (("plain", False), ("checkpointed", True)):
        recorder = Recorder()
        train(make_config(tiny_model_dir, toy_corpus, tmp_path / name, sets=sets, max_steps=4,
                          gradient_checkpointing=on), recorder)
        runs[name] = recorder.losses_by_step, load_file(str(tmp_path / name / "model.safetensors"))
    (plain_losses, plain_weights), (checked_losses, checked_weights) = runs["plain"], runs["checkpointed"]
    assert list(plain_losses) == [1, 2, 3, 4]
    for step, loss in plain_losses.items():
        assert checked_losses[step] == pytest.approx(loss, rel=FLOAT32_RTOL), step
    for key, value in plain_weights.items():
        torch.testing.assert_close(checked_weights[key], value, rtol=FLOAT32_RTOL, atol=1e-6, msg=key)
    # the layers checkpoint in every pass, dropout on or off (2 layers × passes × 4 steps; transformers skips a
    # layer in eval mode silently), and each is recomputed in the modes of its forward (else other values)
    assert len(recomputed) == 2 * passes * 4


def test_gradient_checkpointing_on_a_backbone_without_support_is_refused_in_one_line(tiny_model_dir: Path) -> None:
    from sentadapt.errors import ConfigError
    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(tiny_model_dir, device="cpu")
    encoder.backbone.supports_gradient_checkpointing = False  # what a model class without support declares
    with pytest.raises(ConfigError, match=r"^gradient_checkpointing: bert models do not support it in "
                                          r"transformers; train without --grad-checkpointing$"):
        encoder.enable_gradient_checkpointing()
