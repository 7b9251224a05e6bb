"""Each step's numbers stay on the device; the host reads them back in batches and acts on them.

Why: `.item()` (or `bool(tensor)`, `float(tensor)`) makes the host wait until the GPU has finished
everything queued so far. One such read per step keeps the GPU idle while Python prepares the next
step (the first GPU run measured median utilisation ≈ 15 %). So a step queues its work and moves on:

- `StepGuard.skip_flag` decides *on the device* whether the step's update is applied: a non-finite
  loss or gradient norm sets `optimizer.found_inf`, which the fused AdamW kernel (and our LARS) honour
  by leaving weights, moments and step counts untouched. The rule of `on_nan` runs there too: `stop`
  (or `skip` past `max_nan_skips`) latches `halted`, and every later update is skipped as well.
- `StepRecords` keeps each step's loss, its parts and the guard's verdict as one small device vector;
  `read_back` copies the batch in one transfer (one sync per `log_every` steps, and before every
  evaluation, checkpoint and the end of training), then the host replays the same rule to report
  skipped steps and to stop at the step that failed.

The guarantee (docs/internals.md): the weights the run stops with are exactly those after the last
good step, as before; what moves is *when* the host notices, at most `log_every` steps later. Those
later steps' updates were skipped on the device, so they changed nothing.

The end of an optimizer step (`GuardedUpdate`), queued on the device the same way: clip the gradients, check that
the step is finite (the same answer on every process), then step unless the guard skips it. Nothing is read back to
the host, except for an optimizer without a device-side skip (one read per step)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sentadapt.train.optim import skips_on_device

# columns of a step's record vector, before the loss's parts
LOSS, NORM, BAD = 0, 1, 2
FIXED_COLUMNS = 3


@dataclass
class ReadStep:
    """One step as the host sees it after a read-back."""

    step: int
    loss: float
    parts: dict[str, float]
    bad: bool  # the step (on some process) had a non-finite loss or gradient norm: its update was skipped
    norm: float  # the gradient norm (NaN where not measured)

    def failure(self) -> tuple[str, float]:
        """What was not finite, for the message: the loss first, else the gradient norm."""
        if not math.isfinite(self.loss):
            return "loss", self.loss
        if not math.isfinite(self.norm):
            return "the gradient norm", self.norm
        return "the loss or gradient norm on another process", math.nan


class StepGuard:
    """The on-device half of `on_nan`: which updates to skip, with no host read."""

    def __init__(self, on_nan: str, max_nan_skips: int, skips_so_far: int, device: torch.device) -> None:
        self.on_nan, self.max_nan_skips = on_nan, max_nan_skips
        self.skips = torch.full((), float(skips_so_far), device=device)
        self.halted = torch.zeros((), device=device)  # 1.0 once a step must stop the run

    def skip_flag(self, bad: torch.Tensor) -> torch.Tensor:
        """`bad`: 1.0 when this step is not finite (agreed over processes). Returns 1.0 = skip the update."""
        if self.on_nan == "skip":
            self.skips = self.skips + bad
            stops = bad * (self.skips > self.max_nan_skips).float()
        else:
            stops = bad
        self.halted = torch.maximum(self.halted, stops)
        return torch.maximum(bad, self.halted)


class StepRecords:
    """Per-step device vectors [loss, gradient norm, bad, *parts] since the last read-back."""

    def __init__(self) -> None:
        self._steps: list[int] = []
        self._rows: list[torch.Tensor] = []
        self._part_names: list[str] | None = None

    def __len__(self) -> int:
        return len(self._steps)

    def add(self, step: int, loss: torch.Tensor, norm: torch.Tensor | None, bad: torch.Tensor,
            parts: dict[str, torch.Tensor]) -> None:
        if self._part_names is None:
            self._part_names = list(parts)
        nan = torch.full((), math.nan, device=loss.device)
        values = [loss, nan if norm is None else norm, bad, *(parts[name] for name in self._part_names)]
        self._rows.append(torch.stack([value.detach().float().reshape(()).to(loss.device) for value in values]))
        self._steps.append(step)

    def read_back(self) -> list[ReadStep]:
        """Every pending step, in order, in one device → host copy; the records are emptied."""
        if not self._steps:
            return []
        rows = torch.stack(self._rows).tolist()
        names = self._part_names or []
        read = [ReadStep(step, row[LOSS], dict(zip(names, row[FIXED_COLUMNS:])), row[BAD] > 0, row[NORM])
                for step, row in zip(self._steps, rows)]
        self._steps, self._rows = [], []
        return read


class NanRule:
    """The host's half of `on_nan`, replayed on the steps read back: a bad step within `max_nan_skips` is counted
    and reported (its update was already skipped on the device); any other bad step stops the run."""

    def __init__(self, on_nan: str, max_nan_skips: int, report: Callable[[str], None]) -> None:
        self.on_nan, self.max_nan_skips, self.report = on_nan, max_nan_skips, report

    def carries_on(self, read: ReadStep, state: Any) -> bool:
        """False: the run must stop at `read.step`. A skipped step is counted in `state.nan_skips` (TrainState)."""
        if not read.bad:
            return True
        if not (self.on_nan == "skip" and state.nan_skips < self.max_nan_skips):
            return False
        state.nan_skips += 1
        what, value = read.failure()
        self.report(f"step {read.step}: {what} is {value}; step skipped ({state.nan_skips}/{self.max_nan_skips})")
        return True

    def stop_message(self, read: ReadStep, checkpoint: Path) -> str:
        what, value = read.failure()
        skipped = f"{self.max_nan_skips} skipped step" + ("" if self.max_nan_skips == 1 else "s")
        limit = f" after {skipped} (max_nan_skips)" if self.on_nan == "skip" else ""
        return (f"{what} is {value} at step {read.step}; stopped{limit}. The last good weights are in {checkpoint}. "
                "Try a lower --lr, a higher temperature, or --mixed-precision no")


# --------------------------------------------------------------------------------- the update, guarded


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
