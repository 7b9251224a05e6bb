"""What bench_gpu.py measures besides time: the card's matmul peak, useful-token FLOPs and MFU, GPU
utilisation and memory sampled with nvidia-smi, and sentadapt's rate read off its train.log as it grows.

Imported by bench.bench_gpu and bench.bare_loop.

FLOPs of one training example (a sentence of n real, non-padding tokens after truncation), for an encoder of
L layers, width H and N non-embedding parameters (the transformer layers: embeddings are looked up, not
multiplied), counting matmuls only (Kaplan et al. 2020: 2N per token forward, 4N backward):

    per forward + backward pass:  6·N·n + 12·L·H·n²   (the second term: the n×n attention scores and their
                                                        weighted sum, 2·2·n²·H per layer forward, ×3 with backward)
    per forward-only pass:        2·N·n +  4·L·H·n²

ConSERT, the bare loop and the SimCSE peer run two forward + backward passes per sentence (two views);
SG-OPT runs one forward + backward of the tuned copy and one no-grad forward of the frozen guide (its
projection head and regulariser are left out, so its MFU is a lower bound). Averaged over the corpus, a
sentence costs passes × (6·N·E[n] + 12·L·H·E[n²]). Padding tokens are computed by the GPU but not counted:
this is the *useful* MFU. BERT-base: N = 12 × 7,087,872 = 85.05M; at n = 16 one view costs 8.2 GFLOP.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


# ---------------------------------------------------------------------- TF32


def set_tf32(enabled: bool) -> None:
    """TF32 matmuls on or off. torch >= 2.9 has a new API, and mixing it with the legacy one makes later reads
    raise, so this uses the new one when it exists (as transformers' Trainer does) and the legacy one otherwise."""
    matmul = torch.backends.cuda.matmul
    if _has_new_precision_api():
        matmul.fp32_precision = "tf32" if enabled else "ieee"
    else:
        matmul.allow_tf32 = enabled


def tf32_state() -> str:
    """How float32 matmuls run now on CUDA: 'tf32' or 'ieee' (full fp32); read so that it never raises."""
    matmul = torch.backends.cuda.matmul
    if _has_new_precision_api():
        precision = matmul.fp32_precision
        if precision == "none":  # inherits the global setting (the default: ieee)
            precision = torch.backends.fp32_precision
        return "tf32" if precision == "tf32" else "ieee"
    return "tf32" if matmul.allow_tf32 else "ieee"


def _has_new_precision_api() -> bool:
    return hasattr(torch.backends, "fp32_precision")


# ---------------------------------------------------------------------- peak and MFU


def matmul_peak_flops(device: str, precision: str, size: int = 8192, repeats: int = 10, batch: int = 5) -> float:
    """Best measured FLOP/s of size × size matmuls (2·size³ FLOPs each) in `precision` (fp32 = TF32 off) on
    `device`: random data (zeros run faster on some cards), warm-up first, `batch` products between two
    synchronisations so the launch and the sync cost little."""
    previous = tf32_state()
    set_tf32(precision == "tf32")
    try:
        a = torch.randn(size, size, device=device, dtype=DTYPES[precision])
        b = torch.randn(size, size, device=device, dtype=DTYPES[precision])
        a @ b  # cuBLAS picks its kernel on the first call
        best = float("inf")
        for _ in range(repeats):
            _synchronize(device)
            started = time.perf_counter()
            for _ in range(batch):
                a @ b
            _synchronize(device)
            best = min(best, (time.perf_counter() - started) / batch)
    finally:
        set_tf32(previous == "tf32")
    return 2 * size**3 / best


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@dataclass(frozen=True)
class EncoderShape:
    """What the FLOP count needs of the encoder: non-embedding parameters, layers and width."""

    parameters: int  # N: the transformer layers' parameters
    layers: int
    hidden: int

    @classmethod
    def of_bert(cls, model: Any) -> EncoderShape:
        parameters = sum(p.numel() for p in model.encoder.parameters())
        return cls(parameters, model.config.num_hidden_layers, model.config.hidden_size)


@dataclass(frozen=True)
class TokenStats:
    """Real tokens per sentence over the corpus after truncation: E[n] and E[n²] (attention is quadratic)."""

    mean: float
    mean_square: float

    @classmethod
    def of(cls, lengths: list[int]) -> TokenStats:
        return cls(sum(lengths) / len(lengths), sum(n * n for n in lengths) / len(lengths))


def flops_per_example(shape: EncoderShape, tokens: TokenStats, train_passes: int, forward_passes: int = 0) -> float:
    """Useful FLOPs of one example (module docstring): train_passes forward + backward, forward_passes no-grad."""
    linear = 2 * shape.parameters * tokens.mean  # per forward pass
    attention = 4 * shape.layers * shape.hidden * tokens.mean_square
    return (train_passes * 3 + forward_passes) * (linear + attention)


def mfu(examples_per_s: float, example_flops: float, peak_flops: float) -> float:
    return examples_per_s * example_flops / peak_flops


# ---------------------------------------------------------------------- nvidia-smi sampling


def parse_smi_line(line: str) -> tuple[float, float] | None:
    """'37, 1234' (utilization.gpu %, memory.used MiB; csv, noheader, nounits) → (37.0, 1234.0); None for
    anything else ('[N/A]', a warning line)."""
    fields = [part.strip() for part in line.split(",")]
    if len(fields) != 2:
        return None
    try:
        return float(fields[0]), float(fields[1])
    except ValueError:
        return None


@dataclass(frozen=True)
class Sample:
    at: float  # time.time() when the line arrived
    utilisation: float  # % of the last period during which a kernel was running
    memory_mb: float  # used on the card, all processes, CUDA context and allocator cache included


def in_window(samples: list[Sample], start: float, end: float) -> list[Sample]:
    return [sample for sample in samples if start <= sample.at <= end]


def median_utilisation(samples: list[Sample], start: float, end: float) -> float | None:
    chosen = in_window(samples, start, end)
    return statistics.median(sample.utilisation for sample in chosen) if chosen else None


def smi_query(executable: str, gpu: str | None) -> list[str]:
    return [executable, "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits",
            *(["-i", gpu] if gpu else [])]


def smi_gpu_id(uuid: str) -> str | None:
    """How nvidia-smi should name the card torch uses: its UUID (CUDA_VISIBLE_DEVICES cannot mislead it), else
    index 0 when nvidia-smi does not know that UUID; None without nvidia-smi."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return None
    candidate = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    answer = subprocess.run(smi_query(executable, candidate), capture_output=True, text=True)
    return candidate if uuid and answer.returncode == 0 and parse_smi_line(answer.stdout) else "0"


class GpuSampler:
    """`nvidia-smi --query-gpu=utilization.gpu,memory.used -lms 500` in the background, each line stamped on
    arrival. Without nvidia-smi (a CPU run) it collects nothing and says why in `problem`."""

    def __init__(self, gpu: str | None, period_ms: int = 500) -> None:
        self.gpu, self.period_ms = gpu, period_ms
        self.samples: list[Sample] = []
        self.problem: str | None = None
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> GpuSampler:
        executable = shutil.which("nvidia-smi")
        if executable is None:
            self.problem = "nvidia-smi not found"
            return self
        command = [*smi_query(executable, self.gpu), "-lms", str(self.period_ms)]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            parsed = parse_smi_line(line)
            if parsed is not None:
                self.samples.append(Sample(time.time(), *parsed))

    def __exit__(self, *exc: object) -> None:
        if self._process is None:
            return
        self._process.terminate()
        _, errors = self._process.communicate(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=10)
        if not self.samples:
            self.problem = f"nvidia-smi gave no samples: {errors.strip()[:200] or 'no output'}"


# ---------------------------------------------------------------------- train.log as it grows


@dataclass(frozen=True)
class LoggedStep:
    at: float  # time.time() when the line appeared
    step: int
    examples_per_s: float  # the figure sentadapt itself wrote


class TrainLogWatcher:
    """Polls a run's train.log every 20 ms and stamps each new training line with its arrival time: a line is
    written after its step's loss was read back from the GPU, so its arrival marks the end of that step."""

    def __init__(self, path: Path, period_s: float = 0.02) -> None:
        self.path, self.period_s = path, period_s
        self.steps: list[LoggedStep] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._consumed = 0
        self._partial = b""

    def __enter__(self) -> TrainLogWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.read_new()  # lines written between the last poll and the end

    def _poll(self) -> None:
        while not self._stop.wait(self.period_s):
            self.read_new()

    def read_new(self) -> None:
        """Take the lines completed since the last call (an unfinished last line waits for the next one)."""
        if not self.path.is_file():
            return
        now = time.time()
        with self.path.open("rb") as handle:
            handle.seek(self._consumed)
            data = handle.read()
        self._consumed += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "examples_per_s" in record:
                self.steps.append(LoggedStep(now, int(record["step"]), float(record["examples_per_s"])))


@dataclass
class Window:
    """The timed part of a run: from the end of the warm-up steps to the end of the last step."""

    start: float  # time.time()
    end: float
    steps: int  # optimizer steps inside it
    examples_per_s: float
    extra: dict[str, Any] = field(default_factory=dict)


def steady_window(steps: list[LoggedStep], warmup_steps: int, examples_per_step: int) -> Window | None:
    """The rate between the first logged step at or after the warm-up and the last logged step; None when the
    log has fewer than two such lines."""
    after = sorted((s for s in steps if s.step >= warmup_steps), key=lambda s: s.step)
    if len(after) < 2 or after[-1].at <= after[0].at:
        return None
    first, last = after[0], after[-1]
    count = last.step - first.step
    return Window(first.at, last.at, count, count * examples_per_step / (last.at - first.at))
