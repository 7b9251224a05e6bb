"""The bare PyTorch loop sentadapt's trainer is measured against (issue 21): unsupervised SimCSE-style
contrastive training written the way a careful engineer would in ~50 lines, with no framework around it.

Two dropout views of each sentence through the same encoder, mean pooling, InfoNCE over the in-batch
negatives (τ = 0.05), AdamW (fused on CUDA, foreach elsewhere), gradient clipping at 1.0 as sentadapt does,
bf16 autocast or fp16 autocast + GradScaler (the fused AdamW takes the scaler's inf check on the device),
TF32 matmuls unless the precision is strict fp32. The corpus is tokenized once before the loop; each step
slices a random batch, trims it to its longest sentence and copies it from pinned memory without waiting.
Nothing reads a value back from the GPU inside the loop: the host only queues work.

    python -m bench.bench_gpu --only 'bare-*'    # run through the GPU benchmark, which starts it as a worker
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from bench.gpu_measure import set_tf32, tf32_state

AUTOCAST = {"fp16": torch.float16, "bf16": torch.bfloat16}  # fp32 and tf32: no autocast


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


def train_bare(model_dir: str, sentences: list[str], *, steps: int, batch_size: int, max_length: int,
               precision: str, warmup_steps: int, compile_model: bool = False, lr: float = 2e-5,
               temperature: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """`steps` optimizer steps; the clock runs from the end of step `warmup_steps` to the end of the last."""
    from transformers import AutoModel, AutoTokenizer

    if not 0 <= warmup_steps < steps:
        raise ValueError(f"warmup_steps {warmup_steps} must be below steps {steps}: nothing would be timed")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(seed)
    set_tf32(precision != "fp32")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    encoded = tokenizer(sentences, padding="max_length", truncation=True, max_length=max_length,
                        return_tensors="pt")
    ids, mask = encoded["input_ids"], encoded["attention_mask"]
    lengths = mask.sum(1)
    model = AutoModel.from_pretrained(model_dir).to(device).train()  # train(): dropout makes the two views
    encoder = torch.compile(model) if compile_model else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, fused=cuda, foreach=not cuda)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    order = torch.cat([torch.randperm(len(sentences)) for _ in range(-(-steps * batch_size // len(sentences)))])
    labels = torch.arange(batch_size, device=device)
    clock = StepClock(cuda)
    for step in range(steps):
        if step == warmup_steps:
            clock.start()
        rows = order[step * batch_size:(step + 1) * batch_size]
        longest = int(lengths[rows].max())  # a CPU tensor: no GPU round-trip
        batch = {"input_ids": ids[rows, :longest], "attention_mask": mask[rows, :longest]}
        if cuda:
            batch = {key: value.pin_memory().to(device, non_blocking=True) for key, value in batch.items()}
        with torch.autocast(device.type, dtype=AUTOCAST.get(precision), enabled=precision in AUTOCAST):
            views = [mean_pool(encoder(**batch).last_hidden_state, batch["attention_mask"]) for _ in range(2)]
            first, second = (F.normalize(view.float(), dim=-1) for view in views)
            loss = F.cross_entropy(first @ second.T / temperature, labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    clock.stop()
    timed_steps = steps - warmup_steps
    return {"seconds": clock.seconds, "timed_steps": timed_steps,
            "examples_per_s": timed_steps * batch_size / clock.seconds, "window": [clock.wall_start, clock.wall_end],
            "final_loss": float(loss.detach()), "tf32": tf32_state()}


class StepClock:
    """Host clock around queued GPU work: synchronise at both ends, or it would time the queueing."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.started = self.seconds = self.wall_start = self.wall_end = 0.0

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def start(self) -> None:
        self._sync()
        self.started, self.wall_start = time.perf_counter(), time.time()

    def stop(self) -> None:
        self._sync()
        self.seconds, self.wall_end = time.perf_counter() - self.started, time.time()
