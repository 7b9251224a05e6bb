"""The end of an optimizer step, queued on the device: clip the gradients, check that the step is finite (the
same answer on every process), then step unless the guard skips it. Nothing is read back to the host, except
for an optimizer without a device-side skip (one read per step; guard.py says why that matters)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from sentadapt.train.guard import StepGuard
from sentadapt.train.optim import skips_on_device


class GuardedUpdate:
    """`update(loss)` after the last micro-batch's backward: returns (gradient norm or None under fp16, 1.0 when the
    step was not finite), both on the device."""

    def __init__(self, accelerator: Any, model: nn.Module, module: nn.Module, optimizer: Any, guard: StepGuard,
                 max_grad_norm: float) -> None:
        self.accelerator, self.model, self.module = accelerator, model, module
        self.optimizer, self.guard, self.max_grad_norm = optimizer, guard, max_grad_norm
        self.on_device_skip = skips_on_device(optimizer.optimizer)

    def __call__(self, loss: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        norm, bad = self._check(loss)
        self._step_unless(self.guard.skip_flag(bad))
        self.optimizer.zero_grad(set_to_none=True)
        return norm, bad

    def _check(self, loss: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        """(gradient norm, 1.0 if the step is not finite), on the device; the flag agreed by every process,
        or one would step while another skips. Clips the gradients when configured."""
        scaler = self.accelerator.scaler
        bad = (~torch.isfinite(loss)).float()
        if scaler is not None:
            # fp16: the grad scaler skips overflowing steps itself (an inf norm is routine there); a step we
            # must skip is handed to it as a non-finite gradient, before clipping unscales and checks them
            bad = self._agreed(bad)
            self._poison_gradients(torch.maximum(bad, self.guard.halted))
            if self.max_grad_norm > 0:
                self.accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            return None, bad
        if self.max_grad_norm > 0:
            norm = self.accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        else:
            norm = gradient_norm(self.module, self.accelerator.device)
        bad = torch.maximum(bad, (~torch.isfinite(norm)).float())
        return norm, self._agreed(bad)

    def _agreed(self, flag: torch.Tensor) -> torch.Tensor:
        """The max of a 0-dim flag over processes: an all-reduce on the device, no host read."""
        if self.accelerator.num_processes == 1:
            return flag
        return (self.accelerator.reduce(flag.reshape(1), reduction="sum") > 0).float().reshape(())

    def _poison_gradients(self, skip: torch.Tensor) -> None:
        for parameter in self.module.parameters():
            if parameter.grad is not None:
                parameter.grad.mul_(torch.where(skip > 0, math.nan, 1.0))
                return

    def _step_unless(self, skip: torch.Tensor) -> None:
        """optimizer.step(), a no-op on the device when `skip` is 1.0 (found_inf, as GradScaler passes it)."""
        if self.accelerator.scaler is not None:
            self.optimizer.step()  # GradScaler sets found_inf itself from the (poisoned) gradients
        elif self.on_device_skip:
            self.optimizer.optimizer.found_inf = skip
            self.optimizer.step()
        elif not skip.item():  # an optimizer without a device-side skip: one read-back per step
            self.optimizer.step()


def gradient_norm(module: nn.Module, device: torch.device) -> torch.Tensor:
    grads = [p.grad.detach() for p in module.parameters() if p.grad is not None]
    if not grads:
        return torch.zeros((), device=device)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))
