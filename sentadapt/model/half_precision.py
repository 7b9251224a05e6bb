"""Half-precision encoding: which dtypes `--dtype` takes, and the backbone cast to one of them once (a copy: the
encoder's own float32 weights are never changed). Why a cast copy rather than autocast: Encoder._embed."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch
from torch import nn

from sentadapt.model.compiling import release

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FP16_ON_CPU = "--dtype fp16 needs a CUDA GPU (on the CPU fp16 is slower than fp32); use --dtype bf16 or fp32 on the CPU"


def check_dtype(dtype: str, device_type: str) -> None:
    """An encode dtype that exists and suits the device: fp16 only on CUDA. bf16 casts the same way on every
    device (measured on a CPU with AVX-512 BF16, torch 2.13, L3 model: bf16 weights encode 1.9x faster than
    fp32, fp16 weights 2.4x slower)."""
    from sentadapt.errors import ConfigError

    if dtype not in DTYPES:
        raise ConfigError(f"--dtype: '{dtype}' is not one of {', '.join(DTYPES)}")
    if dtype == "fp16" and device_type == "cpu":
        raise ConfigError(FP16_ON_CPU)


def cast_copy(module: nn.Module, dtype: torch.dtype) -> nn.Module:
    """A deep copy of `module` in eval mode whose floating-point parameters and buffers are `dtype`.

    deepcopy's memo maps each original tensor straight to its cast, so the full-precision weights are
    never duplicated on the way (peak memory: the original plus the cast). Tied weights stay tied;
    gradients are off; the original is not touched.
    """
    with torch.inference_mode(False), torch.no_grad():
        memo: dict[int, Any] = {}
        for tensor in chain(module.parameters(), module.buffers()):
            if tensor.is_floating_point():
                cast = tensor.detach().to(dtype)
                memo[id(tensor)] = nn.Parameter(cast, requires_grad=False) if isinstance(tensor, nn.Parameter) else cast
        copied = copy.deepcopy(module, memo).eval()
    release(copied)  # a compiled layer's callable is bound to the original layer (compiling.release)
    return copied


@dataclass
class CastCopy:
    """The backbone cast to `dtype`, with what it was made from: a changed weight makes it stale."""

    dtype: str
    source: int  # id() of the backbone it copies
    versions: tuple[int, ...]  # the source tensors' version counters (an in-place update bumps them)
    module: nn.Module


def weight_versions(module: nn.Module) -> tuple[int, ...]:
    return tuple(tensor._version for tensor in chain(module.parameters(), module.buffers()))
