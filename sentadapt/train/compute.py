"""Where a run computes and in what arithmetic: accelerate's side of it, before the Trainer's Accelerator.

The processes of a run (torchrun / accelerate launch set RANK and WORLD_SIZE): which one this is (rank 0 writes
the run directory and talks to the user), the device it trains on, the processes together for the work they share
before the loop starts (a teacher's or the base's table of every example, each encoding its share once), and the
process group released when the command ends.

The arithmetic a training step runs in: mixed precision (`mixed_precision`) and TF32 matmuls (`tf32`).

`mixed_precision: auto` (the default of a ConSERT teacher run: ConsertRecipe.spec.teacher_defaults) is bf16 autocast
on a CPU whose cores multiply bf16 natively (AVX-512 BF16 or AMX) where its training pass times faster than fp32's
(train/pass_costs.py), fp32 elsewhere — on a CPU without them bf16 is emulated and slower than fp32 — and fp32 (TF32
matmuls where `tf32` allows) on a GPU, where the step is bound by kernel launches more than by arithmetic at the
batches a run uses (bench/README.md). On the suite it kept every
pairing × domain's raw Δ within 0.1 (research/findings.md, "A faster teacher run"); its speed: bench/README.md. The
weights and the optimizer stay fp32 (autocast casts each matmul's inputs), and dev scoring and every encode run in
fp32 whatever training uses. Imports no torch at its top: run/ reads the ranks before the CLI has loaded it."""

from __future__ import annotations

import os
import sys
from typing import Any

from sentadapt.errors import ConfigError

# ---------------------------------------------------------------------- the processes and their device


def training_processes() -> Any:
    """The processes of this run (torchrun / accelerate launch set WORLD_SIZE), which build the teacher's table
    together: each encodes its share, once (embedding_cache._table_together). accelerate's process state is made
    here, before the Trainer's Accelerator, which reuses it."""
    from sentadapt.model.embedding_cache import Processes

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Processes()
    import torch
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return Processes(state.process_index, state.num_processes, state.wait_for_everyone)


def is_main_process() -> bool:
    # accelerate launch / torchrun set RANK; only rank 0 writes the run directory and talks to the user
    return int(os.environ.get("RANK", "0")) == 0


def release_processes() -> None:
    """Destroy the process group that torchrun / accelerate launch set up, when the process is about to end: a
    gloo or NCCL group left to the interpreter's exit can abort the process there ("terminate called without an
    active exception"), after the work is done. Not inside a run: --recipe auto and later stages reuse the group.
    Imports nothing: a command that failed before torch was imported (a bad option) does not import it here, and
    one stopped by Ctrl-C while torch was being imported does not import it again from a half-made module."""
    dist = sys.modules.get("torch.distributed")
    is_available = getattr(dist, "is_available", None)
    is_initialized = getattr(dist, "is_initialized", None)
    if is_available is None or is_initialized is None:  # not imported, or its import was cut short
        return
    if is_available() and is_initialized():
        dist.destroy_process_group()  # type: ignore[union-attr]


def training_device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


# ---------------------------------------------------------------------------- the arithmetic of a step


AUTO = "auto"


def cpu_multiplies_bf16() -> bool:
    """Whether this CPU has native bf16 matrix instructions (AVX-512 BF16 or AMX tiles), as PyTorch reads them
    from cpuinfo; False when this PyTorch cannot tell."""
    import torch

    checks = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
    return any(check is not None and bool(check()) for check in checks)


def resolve_mixed_precision(option: str, on_gpu: bool) -> str:
    """The precision accelerate is given before any timing: `auto` → bf16 on a CPU that multiplies bf16 natively,
    else no (train/pass_costs.py times the CPU's passes where it can, several processes take this); an explicit
    no | fp16 | bf16 as given (fp16 only on a GPU)."""
    if option == "fp16" and not on_gpu:
        raise ConfigError("mixed_precision: fp16 needs a CUDA GPU (accelerate would silently train in fp32 on CPU); "
                          "use --mixed-precision bf16 on CPU")
    if option != AUTO:
        return option
    return "bf16" if not on_gpu and cpu_multiplies_bf16() else "no"


def hand_back_an_earlier_precision(precision: str) -> None:
    """Let this process's next Accelerator train in `precision` after an earlier run in another one.

    accelerate keeps one mixed precision per process (AcceleratorState) and refuses an Accelerator that asks for
    another. A process that trains several runs one after the other — `--recipe auto`'s candidates with a teacher:
    ConSERT in bf16 where the CPU multiplies it natively, SG-OPT in fp32 — clears that state between them (through
    accelerate's own `_reset_state`; it offers no public way). The distributed state (PartialState: device, process
    group) is kept, so every rank of a multi-process run does the same and stays in its group. Nothing happens when
    no earlier run set a precision, or it is this one."""
    from accelerate.state import AcceleratorState, GradientState

    earlier = AcceleratorState._shared_state.get("_mixed_precision")
    if earlier is not None and earlier != precision:
        AcceleratorState._reset_state(reset_partial_state=False)
        GradientState._reset_state()


def use_tf32(enabled: bool) -> None:
    """fp32 matmuls and convolutions on TF32 tensor cores (Ampere and newer; no effect elsewhere). A process-wide
    PyTorch setting: `adapt` owns its process; the value a run used is in metrics.json's environment."""
    import torch

    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
