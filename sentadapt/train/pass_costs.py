"""What a training pass costs on the CPU a run trains on, timed there: `--mixed-precision auto`'s choice and the
length chunks' cost of one more pass (issue 84; the rule, written before its runs: docs/teacher.md, "What this CPU
decides").

Both were fixed from one Intel machine's timings (bf16 wherever the CPU multiplies it natively; a pass costs
PASS_OVERHEAD_TOKENS), and an AVX-512 BF16 CPU without AMX then trained slower in fp32 than before the chunks (issue
84). So a run on a CPU, in one process, times the student's pass on a few shapes and decides from those, once per CPU,
torch and model (the times are kept in the cache). Several processes time nothing: each would time its own and might
choose another precision than its neighbours.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sentadapt.options import PASS_OVERHEAD_TOKENS
from sentadapt.storage.cache_folder import cache_dir
from sentadapt.storage.durable import write_json_file
from sentadapt.train import compute
from sentadapt.train.compute import AUTO, resolve_mixed_precision

# rows × tokens: from a teacher run's smallest length chunks to half the one padded pass they replace, so the fitted
# line spans both ends of the choice it decides (docs/teacher.md, the second amendment)
SHAPES = ((8, 16), (32, 16), (8, 48), (32, 48), (64, 48))
TIMING_ROUNDS = 2  # each shape's time is the faster of this many (time_passes says why)
BF16_AT_MOST = 0.9  # bf16 rounds every matmul's inputs: worth it only past the ~5 % two timings of a pass differ by
MAX_PASS_COST = 10_000  # tokens: more than any preset's batch pads, so such a CPU keeps one padded pass
# Variables that change which kernels run, or on how many threads: a timing holds for one setting of them.
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
                    "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# A model's size as config.json spells it: BERT-likes', DistilBERT's, T5's names (a name a model lacks is left out)
ARCHITECTURE = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "dim",
                "n_layers", "n_heads", "hidden_dim", "d_model", "num_layers", "d_ff")
PRECISION_NAMES = {"no": "fp32", "bf16": "bf16"}


@dataclass(frozen=True)
class Arithmetic:
    """What a run's steps compute in: `precision` as accelerate takes it (no | fp16 | bf16), `pass_cost` the tokens
    one more CPU pass costs (length_chunks.plan_chunks' overhead; None where no pass is chunked: on a GPU, with the
    encoder frozen) and `reason`, why, in words for the summary."""

    precision: str
    pass_cost: int | None
    reason: str


def choose_arithmetic(option: str, encoder: Any, on_gpu: bool, processes: int,
                      message: Callable[[str], None]) -> Arithmetic:
    """The precision and pass cost of a run whose `--mixed-precision` is `option`, by the rule above."""
    precision = resolve_mixed_precision(option, on_gpu)  # refuses fp16 on a CPU
    if on_gpu:
        return Arithmetic(precision, None, "auto: fp32 on a GPU" if option == AUTO else "")
    if not any(parameter.requires_grad for parameter in encoder.backbone.parameters()):
        return Arithmetic(precision, None, "")
    if processes > 1:
        return Arithmetic(precision, PASS_OVERHEAD_TOKENS, "several processes time nothing")
    native = compute.cpu_multiplies_bf16()
    timings = _timings(encoder, precisions_to_time(option, native), message)
    return arithmetic_from_timings(option, native, timings)


def set_up_arithmetic(option: str, encoder: Any, message: Callable[[str], None]) -> Arithmetic:
    """choose_arithmetic for this process's run (its device; the processes torchrun or accelerate launch started),
    the pass cost handed to the encoder's length chunks. Before the Accelerator, which takes the precision."""
    import torch

    arithmetic = choose_arithmetic(option, encoder, torch.cuda.is_available(), int(os.environ.get("WORLD_SIZE", "1")),
                                   message)
    if arithmetic.pass_cost is not None:
        encoder.cost_passes_at(arithmetic.pass_cost)
    return arithmetic


def precisions_to_time(option: str, native: bool) -> list[str]:
    """fp32 and bf16 for `auto` where the CPU multiplies bf16 natively (emulated bf16 is not worth timing), else the
    one precision the run trains in (its pass cost)."""
    return ["no", "bf16"] if option == AUTO and native else [resolve_mixed_precision(option, on_gpu=False)]


def arithmetic_from_timings(option: str, native: bool, timings: Mapping[str, list[float]]) -> Arithmetic:
    """The rule on a CPU, from the timings of precisions_to_time: `auto` is bf16 where its passes take at most
    BF16_AT_MOST of fp32's; the pass cost is fitted on the chosen precision's timings."""
    if option != AUTO:
        precision, reason = option, ""
    elif not native:
        precision, reason = "no", "auto: this CPU has no native bf16 matmuls"
    else:
        ratio = sum(timings["bf16"]) / sum(timings["no"])
        precision = "bf16" if ratio <= BF16_AT_MOST else "no"
        needs = "" if precision == "bf16" else f", above the {BF16_AT_MOST}× bf16 needs"
        reason = f"auto: bf16's passes took {ratio:.2f}× fp32's time on this CPU{needs}"
    return Arithmetic(precision, fitted_pass_cost(timings[precision]), reason)


def fitted_pass_cost(seconds: list[float]) -> int:
    """a / b of the least-squares line seconds = a + b · tokens through the timings of SHAPES, in tokens, clamped to
    0..MAX_PASS_COST (noise can tilt the line below zero; a flat one means a pass costs more than any padding)."""
    tokens = [rows * length for rows, length in SHAPES]
    mean_tokens, mean_seconds = sum(tokens) / len(tokens), sum(seconds) / len(seconds)
    spread = sum((count - mean_tokens) ** 2 for count in tokens)
    slope = sum((count - mean_tokens) * (took - mean_seconds) for count, took in zip(tokens, seconds, strict=True))
    slope /= spread
    intercept = mean_seconds - slope * mean_tokens
    if slope <= 0:
        return MAX_PASS_COST
    return int(min(max(round(intercept / slope), 0), MAX_PASS_COST))


# ------------------------------------------------------------------------------------------ timing, cached


def machine_key(architecture: Mapping[str, Any]) -> dict[str, Any]:
    """What a timing holds for: this CPU, the CPUs this process may use, torch's version, the kernel variables set,
    the model's architecture (config.json's ARCHITECTURE fields). Read without torch, so `--dry-run` finds it."""
    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_model(), "cpus": cpus, "torch": torch_version,
            "kernels": {name: os.environ[name] for name in KERNEL_VARIABLES if name in os.environ},
            "model": {name: architecture[name] for name in ARCHITECTURE if name in architecture}}


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (Linux), else the platform's machine name."""
    named = _cpuinfo().get("model name")
    if named:
        return named
    import platform

    return platform.processor() or platform.machine()


@functools.cache
def _cpuinfo() -> dict[str, str]:
    """/proc/cpuinfo's fields of the first CPU ({} where there is none): read once a process, for the key and for
    the dry run's look at the flags."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def timings_file(key: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / "pass-costs" / f"pass-{digest}.json"


def cached_timings(key: Mapping[str, Any]) -> dict[str, Any]:
    """The cache's record for `key` ({"key", "seconds": {precision: [s per shape]}, "timed"}), or {} if none."""
    try:
        record = json.loads(timings_file(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    fits = isinstance(record, dict) and record.get("key") == key and record.get("shapes") == [list(s) for s in SHAPES]
    return record if fits else {}


def _timings(encoder: Any, precisions: list[str], message: Callable[[str], None]) -> dict[str, list[float]]:
    key = machine_key(encoder.backbone.config.to_dict())
    record = cached_timings(key)
    seconds: dict[str, list[float]] = dict(record.get("seconds", {}))
    missing = [precision for precision in precisions if precision not in seconds]
    if not missing:
        return seconds
    names = " and ".join(PRECISION_NAMES[precision] for precision in missing)
    message(f"timing the training pass on this CPU in {names} (once per CPU, torch and model; kept in the cache)")
    for precision in missing:
        seconds[precision] = time_passes(encoder, bf16=precision == "bf16")
    from sentadapt.data.cache_contents import HOLDS  # imports torch: only here, where the run has it already

    timed = " and ".join(PRECISION_NAMES[precision] for precision in seconds)
    holds = (f"{timed} training passes of a {encoder.num_layers}-layer {encoder.hidden_size}-wide "
             f"{key['model'].get('model_type')} on {key['cpu']} (torch {key['torch']})")
    with contextlib.suppress(OSError):  # a cache that cannot be written costs the next run the same timing
        write_json_file(timings_file(key), {"key": key, "shapes": [list(s) for s in SHAPES], "seconds": seconds,
                                            "timed": date.today().isoformat(), HOLDS: holds})
    return seconds


def time_passes(encoder: Any, bf16: bool) -> list[float]:
    """Seconds of the encoder's training pass (forward + backward, its dropout off, one padded pass of random token
    ids) at each of SHAPES: the faster of two rounds over them, after one warm-up pass; the gradients are dropped
    after. The faster of two, because a pass's fixed cost is a small share of a pass for noise to swamp: one round's
    fitted cost proved too noisy on a shared machine (bench/README.md, issue 84)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    vocabulary = int(encoder.backbone.config.vocab_size)
    batches = [torch.randint(vocabulary // 4, vocabulary, (rows, min(length, encoder.position_limit)),
                             generator=generator) for rows, length in SHAPES]
    rounds: list[list[float]] = []
    with encoder.dropout(False), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        encoder(batches[0], torch.ones_like(batches[0]), whole_batch=True).sum().backward()  # the warm-up
        for _ in range(TIMING_ROUNDS):
            rounds.append([])
            for ids in batches:
                started = time.perf_counter()
                encoder(ids, torch.ones_like(ids), whole_batch=True).sum().backward()
                rounds[-1].append(time.perf_counter() - started)
    encoder.zero_grad(set_to_none=True)
    return [min(times) for times in zip(*rounds, strict=True)]


# ------------------------------------------------------------------------------------------ --dry-run


def planned_arithmetic(option: str, architecture: Mapping[str, Any] | None) -> str:
    """What `adapt --dry-run` says of a CPU run's arithmetic, without torch: the choice the cache already holds for
    this CPU and model, or what the run will time first. Empty where nothing is timed (a GPU visible, several
    processes, fp16, which a CPU run refuses)."""
    if option == "fp16" or int(os.environ.get("WORLD_SIZE", "1")) > 1 or _gpu_visible():
        return ""
    native = _cpu_flags_name_bf16()
    wanted = precisions_to_time(option, native)
    record = cached_timings(machine_key(architecture)) if architecture else {}
    seconds = record.get("seconds", {})
    if all(precision in seconds for precision in wanted):
        arithmetic = arithmetic_from_timings(option, native, seconds)
        reason = f" ({arithmetic.reason})" if arithmetic.reason else ""
        return (f"arithmetic: {PRECISION_NAMES[arithmetic.precision]}{reason}, length chunks where they save over "
                f"{arithmetic.pass_cost} tokens (this CPU's timing of {record.get('timed', '?')}, in the cache)")
    names = " and ".join(PRECISION_NAMES[precision] for precision in wanted)
    each = " each" if len(wanted) > 1 else ""
    passes = TIMING_ROUNDS * len(SHAPES) + 1
    return (f"arithmetic: the run first times its training pass on this CPU in {names} ({passes} passes"
            f"{each}, kept in the cache)" + (f", then trains in bf16 where it takes ≤ {BF16_AT_MOST}× fp32's time"
                                             if each else ""))


def _gpu_visible() -> bool:
    """An NVIDIA GPU this process may use, as the driver lists them (torch is not imported by a dry run)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def _cpu_flags_name_bf16() -> bool:
    """Whether /proc/cpuinfo's flags name native bf16 matmuls (AVX-512 BF16 or AMX tiles): what
    compute.cpu_multiplies_bf16 asks PyTorch, read without it."""
    flags = _cpuinfo().get("flags", "").split()
    return "avx512_bf16" in flags or "amx_tile" in flags
