"""Where a run's progress goes: the Reporter (the terminal, rendered by the CLI) and train.log (JSON lines).

The loop calls these; it never formats output itself.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Protocol


class Reporter(Protocol):
    """How the loop tells the outside world what happens (the CLI renders it with rich)."""

    def message(self, text: str) -> None: ...
    def start(self, total_steps: int, start_step: int) -> None: ...
    def step(self, step: int, loss: float, parts: dict[str, float], lr: float, examples_per_s: float) -> None: ...
    def evaluation(self, step: int, score: float, best: float, improved: bool) -> None: ...
    def finish(self) -> None: ...


class SilentReporter:
    def message(self, text: str) -> None: ...
    def start(self, total_steps: int, start_step: int) -> None: ...
    def step(self, step: int, loss: float, parts: dict[str, float], lr: float, examples_per_s: float) -> None: ...
    def evaluation(self, step: int, score: float, best: float, improved: bool) -> None: ...
    def finish(self) -> None: ...


class TrainLog:
    """`train.log`: one JSON object per line (loss and its parts, lr, dev scores), each with its step."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def trim_after(self, step: int) -> None:
        """Drop lines for steps after `step` (a resumed run trains, and logs, them again); atomic rewrite."""
        if not self.path.is_file():
            return
        kept = [line for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True)
                if _logged_step(line) <= step]
        tmp = self.path.with_name(f".tmp-{self.path.name}")
        with tmp.open("w", encoding="utf-8") as handle:
            handle.writelines(kept)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)


def describe_run(*, processes: int, device: Any, distributed_type: str, backend: str | None, mixed_precision: str,
                 batch_size: int, grad_accum: int, seed: int) -> dict[str, Any]:
    """Where and how a run trained, for metrics.json and the summary: two runs that differ here differ."""
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
        "per_process_batch": batch_size // processes,
        "global_batch": batch_size,  # sentences per forward over all processes: the in-batch negatives
        "grad_accum": grad_accum,
        "examples_per_step": batch_size * grad_accum,
        "seed": seed,
        "versions": {"sentadapt": sentadapt.__version__, "torch": torch.__version__,
                     "transformers": installed("transformers"), "accelerate": installed("accelerate")},
    }


def write_run_record(output: Path, metrics: dict[str, Any]) -> None:
    """metrics.json, atomically: its presence marks a finished run (`--resume` refuses, `--resume auto` stops)."""
    tmp = output / ".tmp-metrics.json"
    tmp.write_text(json.dumps(metrics, indent=2) + "\n")
    os.replace(tmp, output / "metrics.json")


def _logged_step(line: str) -> float:
    """The step of a train.log line; a line cut short by a crash counts as past every checkpoint."""
    try:
        return float(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return math.inf
