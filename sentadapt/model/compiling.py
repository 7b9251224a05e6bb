"""`compile`: torch.compile of the encoder's transformer layers for training (regional compilation).

Why: at the batch sizes contrastive training uses (64-128 sentences of ≤ 64 tokens) a step on an H100 is bound by
kernel launches, not arithmetic (bench/README.md: 36 % GPU utilisation in bf16 at batch 96). Each BERT layer runs
~40 small kernels forward (casts, bias, dropout, residual, LayerNorm, GELU, the attention's mask) and twice that
backward; inductor fuses the pointwise ones into a few Triton kernels, and `graphs` (mode "reduce-overhead") also
replays each layer as one CUDA graph.

Why the layers and not the whole model: they are the repeated block, so one compilation serves all L of them
(inductor sees the same code and the weights as inputs), which makes compiling ~L× cheaper than a whole-model
graph, and ConSERT's embedding-layer augmentations (a forward hook added per step) stay outside the compiled
region, where they cause no recompilation.

Only training runs compiled code: every encode (dev scoring, eval, the teacher's table) runs eagerly
(`eager_only`), since its exact padded lengths would each compile a new graph for one use; and when the run ends
the layers are returned to plain modules (`release`), so a deep copy (a cast copy for `--dtype bf16`) never
shares the compiled callable of the original layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch import nn

from sentadapt.errors import ConfigError

# Steps after which `graphs` has paid for its warm-up on a GPU (H200, ConSERT at batch 96, bench/README.md): bf16
# saves 96/2,183 − 96/4,812 = 24 ms a step for 14 s more warm-up (≈ 600 steps); TF32 saves 96/2,925 − 96/4,307 =
# 10.5 ms for 23 s (≈ 2,200 steps). A run this long without it gets a hint.
COMPILE_PAYS_STEPS = 2_500
# the setting's values → torch.compile's mode (None: not compiled)
MODES: dict[str, str | None] = {"off": None, "on": "default", "graphs": "reduce-overhead"}
# Compiled graphs kept per layer code: training meets at most max_length / pad_multiple padded lengths (64 / 8 = 8
# on a GPU), each once per (train mode, grad mode) pair it runs under; 64 leaves room for longer max lengths before
# torch falls back to eager code with a warning (its default limit is 8).
RECOMPILE_LIMIT = 64


def repeated_layers(backbone: nn.Module) -> nn.ModuleList | None:
    """The backbone's stack of transformer layers: its largest ModuleList whose children are all one class (BERT's
    `encoder.layer`, DistilBERT's `transformer.layer`, MPNet's `encoder.layer`); None when it has none."""
    stacks = [module for module in backbone.modules() if isinstance(module, nn.ModuleList) and len(module) > 1
              and len({type(child) for child in module}) == 1]
    return max(stacks, key=len, default=None)


def compile_layers(backbone: nn.Module, setting: str, backend: str = "inductor") -> int:
    """Compile each layer of the stack in place (`nn.Module.compile`: the state dict keeps its keys, so checkpoints
    and the saved model are unchanged); returns how many were compiled (0 for `off`). `backend` other than
    inductor is for tests: "aot_eager" captures the same graphs, forward and backward, without generating code."""
    mode = MODES[setting]
    if mode is None:
        return 0
    layers = repeated_layers(backbone)
    if layers is None:
        raise ConfigError(f"compile: {type(backbone).__name__} has no stack of repeated layers to compile; use "
                          "--set compile=off")
    _raise_recompile_limit()
    options: dict[str, Any] = {"mode": mode} if backend == "inductor" else {}  # modes are inductor's
    for layer in layers:
        layer.compile(backend=backend, dynamic=None, **options)  # dynamic None: static first, then one dynamic graph
    return len(layers)


def release(backbone: nn.Module) -> None:
    """The layers back to plain modules: `nn.Module.compile` keeps the compiled callable, bound to the original
    layer, in `_compiled_call_impl`; a deep copy would carry it over and run the original's weights."""
    for module in backbone.modules():
        if getattr(module, "_compiled_call_impl", None) is not None:
            module._compiled_call_impl = None


def eager_only() -> Any:
    """A context in which compiled modules run their eager code (torch ≥ 2.6: `torch.compiler.set_stance`)."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    return set_stance("force_eager") if set_stance is not None else nullcontext()


def step_marker(setting: str, device_type: str) -> Callable[[], None]:
    """What the loop calls before each micro-batch's forward pass: under `graphs` on a GPU, torch's mark that a new
    iteration begins, so the CUDA graphs' output buffers of the last one may be reused (without it, torch cannot
    tell a new step from a second forward pass in the same one); a no-op otherwise."""
    if MODES[setting] == "reduce-overhead" and device_type == "cuda":
        return torch.compiler.cudagraph_mark_step_begin
    return lambda: None


@contextmanager
def compiled_training(backbone: nn.Module, setting: str, note: Callable[[str], None],
                      device_type: str, steps: int = 0) -> Iterator[int]:
    """Compiled layers for the block's duration (yields how many, and says so through `note`); plain modules again
    after it, also on errors. Only on a CUDA device: elsewhere the same training runs uncompiled, with a note (the
    gain is fewer kernel launches, which a CPU step is not bound by; and inductor's CPU code needs a C++ compiler
    and, measured with torch 2.13, fails to build under ATEN_CPU_CAPABILITY=default)."""
    if MODES[setting] is not None and device_type != "cuda":
        note(f"compile: {setting} applies on a CUDA GPU; this {device_type} run trains uncompiled")
        yield 0
        return
    if MODES[setting] is None and device_type == "cuda" and steps >= COMPILE_PAYS_STEPS:
        note(f"hint: {steps:,} steps on a GPU are enough for --set compile=graphs to pay for its ~25 s of "
             "compiling (measured up to 1.6× faster steps: bench/README.md)")
    try:
        compiled = compile_layers(backbone, setting)
        if compiled:
            note(f"compile: {compiled} transformer layers (torch.compile, mode {MODES[setting]}); the first steps "
                 "compile, and under graphs each padded length is recorded once")
        yield compiled
    finally:
        release(backbone)


def _raise_recompile_limit() -> None:
    import torch._dynamo  # the config module is loaded with it

    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), RECOMPILE_LIMIT))
