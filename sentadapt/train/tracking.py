"""Where a run's progress goes: the Reporter (the terminal, rendered by the CLI), train.log (JSON lines),
metrics.json (the run record) and, with `--report-to`, Accelerate's experiment trackers.

The loop calls these; it never formats output itself.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from sentadapt.config.schema import REPORT_TO
from sentadapt.decision.rule import decision_of
from sentadapt.storage.durable import write_text_atomically
from sentadapt.train.pass_costs import Arithmetic


class Reporter(Protocol):
    """How the loop tells the outside world what happens (the CLI renders it with rich)."""

    def message(self, text: str) -> None: ...
    def start(self, total_steps: int, start_step: int) -> None: ...
    # every step, with what the host knows without waiting for the device
    def advance(self, step: int, lr: float, examples_per_s: float) -> None: ...
    # each step's loss and its parts, read back from the device in batches (every `log_every` steps)
    def losses(self, step: int, loss: float, parts: dict[str, float]) -> None: ...
    def evaluation(self, step: int, score: float, best: float, improved: bool) -> None: ...
    def finish(self) -> None: ...


class SilentReporter:
    def message(self, text: str) -> None: ...
    def start(self, total_steps: int, start_step: int) -> None: ...
    def advance(self, step: int, lr: float, examples_per_s: float) -> None: ...
    def losses(self, step: int, loss: float, parts: dict[str, float]) -> None: ...
    def evaluation(self, step: int, score: float, best: float, improved: bool) -> None: ...
    def finish(self) -> None: ...


class NoteReporter(SilentReporter):
    """The loop's messages and dev evaluations as one-line notes (the API's `note` callback); no live line."""

    def __init__(self, note: Callable[[str], None]) -> None:
        self.note = note

    def message(self, text: str) -> None:
        self.note(text)

    def evaluation(self, step: int, score: float, best: float, improved: bool) -> None:
        self.note(f"step {step}: dev {score:.2f} (best {best:.2f})" + (" — saved" if improved else ""))


END_SHARE = 0.1  # the share of the steps at each end that a term's start and end are averaged over


class TrainLog:
    """`train.log`: one JSON object per line (loss and its parts, lr, dev scores), each with its step."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def records(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def ends(self, key: str, share: float = END_SHARE) -> tuple[float, float] | None:
        """The mean of `key` over the logged steps in the first and in the last `share` of the steps trained: a
        term's start and end that one noisy batch does not decide (with 10 %, 300 steps logged every 10 give 3
        values at each end). None when no step logged it."""
        logged = [(int(r["step"]), float(r[key])) for r in self.records() if key in r and "loss" in r]
        if not logged:
            return None
        last_step = logged[-1][0]
        window = max(1, math.ceil(share * last_step))
        first = [value for step, value in logged if step <= window] or [logged[0][1]]
        last = [value for step, value in logged if step > last_step - window] or [logged[-1][1]]
        return sum(first) / len(first), sum(last) / len(last)

    def count(self, key: str) -> int:
        """How many logged steps hold `key`."""
        return sum(1 for record in self.records() if key in record and "loss" in record)

    def trim_after(self, step: int) -> None:
        """Drop lines for steps after `step` (a resumed run trains, and logs, them again); atomic rewrite."""
        if not self.path.is_file():
            return
        kept = [line for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True)
                if _logged_step(line) <= step]
        write_text_atomically(self.path, "".join(kept))


# --report-to: name → (module that must be importable, the pip extra that installs it)
TRACKERS = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow")}
PROJECT = "sentadapt"  # wandb project, MLflow experiment (the run's name is its output folder's)


def resolve_trackers(report_to: str) -> list[str]:
    """The Accelerate trackers `--report-to` asks for. `all` means every installed one (as in Accelerate and
    the HF Trainer); a tracker asked for by name that is not installed is a one-line error naming the extra."""
    import importlib.util

    from sentadapt.errors import ConfigError

    def installed(name: str) -> bool:
        return importlib.util.find_spec(TRACKERS[name][0]) is not None

    if report_to not in REPORT_TO:
        raise ConfigError(f"--report-to: unknown value '{report_to}'; valid: {', '.join(REPORT_TO)}")
    if report_to == "none":
        return []
    if report_to == "all":
        found = [name for name in TRACKERS if installed(name)]
        if not found:
            raise ConfigError("--report-to all: no tracker is installed; install one with: pip install "
                              "'sentadapt[tensorboard]' (or [wandb], [mlflow])")
        return found
    if not installed(report_to):
        raise ConfigError(f"--report-to {report_to}: the {TRACKERS[report_to][0]} package is not installed; "
                          f"install it with: pip install 'sentadapt[{TRACKERS[report_to][1]}]'")
    return [report_to]


def tracker_init_kwargs(run_name: str) -> dict[str, dict[str, Any]]:
    """Name the run after its output folder in every tracker (TensorBoard: its folder is inside the run)."""
    return {"wandb": {"name": run_name}, "mlflow": {"run_name": run_name}}


def hyperparameters(config: dict[str, Any], prefix: str = "") -> dict[str, bool | int | float | str]:
    """The run config flattened to the scalar values trackers accept (`train.lr`, `recipe_args.temperature`)."""
    flat: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(hyperparameters(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:
            flat[name] = "none" if value is None else str(value)  # lists (corpus files), tuples
    return flat


def tracker_values(record: dict[str, Any]) -> dict[str, float]:
    """A train.log record as tracker scalars: `train/loss`, `train/<part>`, `train/lr`, `train/examples_per_s`,
    or `dev/score`."""
    if "dev" in record:
        return {"dev/score": float(record["dev"])}
    return {f"train/{key}": float(value) for key, value in record.items()
            if key != "step" and isinstance(value, (int, float))}


def final_values(metrics: dict[str, Any]) -> dict[str, float | str]:
    """The end of the run for the trackers: base and best dev score, the change, and the decision
    (use-adapted | keep-base | unknown) with its reason (decision/rule.py)."""
    decision = decision_of(metrics)
    values: dict[str, float | str] = {"final/decision": decision.decision or "unknown",
                                      "final/verdict": decision.reason,
                                      "final/decision_rule": decision.rule or "strict",
                                      "final/published_step": metrics["published_step"]}
    for key in ("base_score", "best_score", "dev_change"):
        if metrics.get(key) is not None:
            values[f"final/{key}"] = float(metrics[key])
    if metrics.get("improved") is not None:
        values["final/improved"] = float(metrics["improved"])
    if decision.risk is not None:  # the risk rule's estimate that the adapted model is no better
        values["final/decision_risk"] = float(decision.risk)
    return values


class Trackers:
    """The run's `--report-to` trackers, through its Accelerator (they write on the main process only)."""

    def __init__(self, accelerator: Any, names: list[str], run_name: str) -> None:
        self.accelerator, self.names, self.run_name = accelerator, names, run_name

    def start(self, config: dict[str, bool | int | float | str]) -> None:
        if self.names:
            self.accelerator.init_trackers(PROJECT, config=config, init_kwargs=tracker_init_kwargs(self.run_name))

    def log(self, values: dict[str, Any], step: int) -> None:
        if self.names:
            self.accelerator.log(values, step=step)

    def finish(self) -> None:
        # not accelerator.end_training(): it also destroys the process group a next stage still needs
        for tracker in self.accelerator.trackers:
            tracker.finish()
        self.accelerator.trackers = []


class RunRecords:
    """Where a run's numbers go, on the main process: train.log lines, also sent to the --report-to trackers;
    each step read back from the device also goes to the Reporter (every process: other ranks' are silent)."""

    def __init__(self, train_log: TrainLog, trackers: Trackers, reporter: Reporter, log_every: int,
                 is_main: bool) -> None:
        self.train_log, self.trackers, self.reporter = train_log, trackers, reporter
        self.log_every, self.is_main = log_every, is_main

    def log(self, record: dict[str, Any]) -> None:
        """A train.log line, also sent to the trackers."""
        if self.is_main:
            self.train_log.append(record)
            self.trackers.log(tracker_values(record), int(record["step"]))

    def step(self, read: Any, state: Any, lr: float, examples_per_s: float) -> None:
        """One step read back (guard.ReadStep): its losses reported, the distillation term kept for the summary
        (TrainState), and a train.log line every `log_every` steps and at step 1."""
        self.reporter.losses(read.step, read.loss, read.parts)
        if "distill" in read.parts:
            if state.distill_first is None:
                state.distill_first = read.parts["distill"]
            state.distill_last = read.parts["distill"]
        if read.step % self.log_every == 0 or read.step == 1:
            self.log({"step": read.step, "loss": read.loss, **read.parts, "lr": lr, "examples_per_s": examples_per_s})


class Throughput:
    """Examples per second since the last read-back (the host's clock: it never waits for the device)."""

    def __init__(self) -> None:
        self.started, self.examples = time.perf_counter(), 0

    def add(self, examples: int) -> None:
        self.examples += examples

    def rate(self) -> float:
        return self.examples / max(time.perf_counter() - self.started, 1e-9)

    def restart(self) -> None:
        self.started, self.examples = time.perf_counter(), 0


def describe_run(accelerator: Any, train_config: Any, arithmetic: Arithmetic) -> dict[str, Any]:
    """Where and how a run trained (an Accelerator, a TrainConfig and pass_costs' Arithmetic), for metrics.json and
    the summary."""
    import torch.distributed as dist

    initialized = dist.is_available() and dist.is_initialized()
    return run_environment(
        processes=accelerator.num_processes, device=accelerator.device,
        distributed_type=str(accelerator.distributed_type.value), backend=dist.get_backend() if initialized else None,
        mixed_precision=str(accelerator.mixed_precision), batch_size=train_config.batch_size,
        grad_accum=train_config.grad_accum, seed=train_config.seed, tf32=tf32_applies(accelerator.device,
                                                                                      train_config.tf32),
        precision_reason=arithmetic.reason or None, pass_cost=arithmetic.pass_cost)


def tf32_applies(device: Any, wanted: bool) -> bool | None:
    """Whether fp32 matmuls run on TF32 tensor cores: None where the device has none (CPU, pre-Ampere GPUs)."""
    import torch

    if getattr(device, "type", None) != "cuda" or torch.cuda.get_device_capability(device) < (8, 0):
        return None
    return wanted


def run_environment(*, processes: int, device: Any, distributed_type: str, backend: str | None,
                    mixed_precision: str, batch_size: int, grad_accum: int, seed: int, tf32: bool | None = None,
                    precision_reason: str | None = None, pass_cost: int | None = None) -> dict[str, Any]:
    """The run record's `environment`: two runs that trained differently have different records."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    import sentadapt

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    device_name = str(device)
    if getattr(device, "type", None) == "cuda":
        device_name += f" ({torch.cuda.get_device_name(device)})"
    return {
        "processes": processes,
        "device": device_name,
        "distributed": distributed_type,  # accelerate's DistributedType: NO, MULTI_CPU, MULTI_GPU, ...
        "backend": backend,  # torch.distributed backend (gloo, nccl), None for one process
        "mixed_precision": mixed_precision,
        "tf32": tf32,  # fp32 matmuls on TF32 tensor cores (None: not a device that has them)
        "precision_reason": precision_reason,  # why `auto` chose it, or why nothing was timed (None: given)
        "pass_cost": pass_cost,  # tokens one more CPU pass costs: the length chunks' plan (None: nothing chunked)
        "per_process_batch": batch_size // processes,
        "global_batch": batch_size,  # sentences per forward over all processes: the in-batch negatives
        "grad_accum": grad_accum,
        "examples_per_step": batch_size * grad_accum,
        "seed": seed,
        "versions": {"sentadapt": sentadapt.__version__, "torch": torch.__version__,
                     "transformers": installed("transformers"), "accelerate": installed("accelerate")},
    }


def _logged_step(line: str) -> float:
    """The step of a train.log line; a line cut short by a crash counts as past every checkpoint."""
    try:
        return float(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return math.inf
