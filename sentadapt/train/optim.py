"""Optimizers and learning-rate schedules the loop can use (chosen by `optimizer` and `schedule`).

Skipping a step without asking the host: the loop sets `optimizer.found_inf` (a 0-dim float tensor on the
device, 1.0 = skip) before `step()`. PyTorch's fused AdamW reads it in the kernel (the protocol its
GradScaler uses) and leaves weights, moments and step counts untouched; LARS below honours it the same
way. So a non-finite step costs no `.item()`, and the weights stay the last good ones. `skips_on_device`
says whether the optimizer built here can do that (the loop falls back to one read-back per step if not).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch


class LARS(torch.optim.Optimizer):
    """SGD with momentum and a layer-wise trust ratio (You et al. 2017), as SimCLR trains its heads.

    Each parameter's step is scaled by trust_coefficient × ‖w‖ / ‖g + λw‖, so layers of different scale
    move at comparable relative speed and very large learning rates (CLSR's 0.5) stay stable. Groups
    with `adapt=False` (biases, LayerNorm) get plain momentum SGD without weight decay, as in SimCLR.
    """

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust_coefficient: float = 0.001, eps: float = 1e-8) -> None:
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay,
                    "trust_coefficient": trust_coefficient, "eps": eps, "adapt": True}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = closure() if closure is not None else None
        skip = getattr(self, "found_inf", None)  # 1.0: leave every weight and buffer as it is (no host sync)
        for group in self.param_groups:
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                update = parameter.grad
                if group["adapt"]:
                    if group["weight_decay"]:
                        update = update.add(parameter, alpha=group["weight_decay"])
                    weight_norm, update_norm = parameter.norm(), update.norm()
                    trust = group["trust_coefficient"] * weight_norm / (update_norm + group["eps"])
                    # a zero weight or gradient norm (fresh bias, dead unit) falls back to a plain step
                    update = update * torch.where((weight_norm > 0) & (update_norm > 0), trust, 1.0)
                state = self.state[parameter]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(parameter)
                buffer = state["momentum_buffer"]
                if skip is None:
                    buffer.mul_(group["momentum"]).add_(update)
                    parameter.add_(buffer, alpha=-group["lr"])
                else:  # where(), not arithmetic: 0 × NaN would still be NaN
                    skipped = skip.to(parameter.device) > 0
                    buffer.copy_(torch.where(skipped, buffer, buffer * group["momentum"] + update))
                    parameter.sub_(torch.where(skipped, 0.0, buffer * group["lr"]))
        return loss


def build_optimizer(name: str, groups: list[dict[str, Any]], lr: float, betas: tuple[float, float], eps: float,
                    ) -> torch.optim.Optimizer:
    """AdamW is the fused kernel wherever PyTorch has one (CUDA, CPU, MPS, XPU): one launch for every
    parameter, and no per-parameter `.item()` of the step count, which the single-tensor and foreach
    paths do (≈ 200 host round-trips per BERT-base step). Elsewhere: foreach."""
    if name == "lars":
        lars_groups = [{**group, "adapt": group["weight_decay"] > 0} for group in groups]
        return LARS(lars_groups, lr=lr)
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except RuntimeError:  # parameters on a device (or of a dtype) without a fused kernel
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=True)


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """True when `optimizer.found_inf` makes `step()` a no-op without a host read (see the module docstring)."""
    return isinstance(optimizer, LARS) or bool(optimizer.defaults.get("fused"))


def lr_multiplier(schedule: str, total_steps: int, warmup_ratio: float) -> Callable[[int], float]:
    """Linear warm-up over warmup_ratio × total steps, then linear or cosine decay to 0."""
    warmup = int(total_steps * warmup_ratio)

    def multiplier(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
        return max(0.0, 1.0 - progress)

    return multiplier


def rewind_schedule(scheduler: Any, optimizer: torch.optim.Optimizer, multiplier: Callable[[int], float],
                    step: int) -> None:
    """The schedule and learning rate of `step` (a run that stops at a bad step goes back to its last good one;
    the weights and the optimizer's moments and step counts already are there: the later updates were skipped)."""
    scheduler.last_epoch = step
    for group, base_lr in zip(optimizer.param_groups, scheduler.base_lrs):
        group["lr"] = base_lr * multiplier(step)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]  # what get_last_lr reads
