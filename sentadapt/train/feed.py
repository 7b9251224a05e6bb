"""What each step is fed: the run's micro-batches on the host, and the next one built while the device computes this
one.

Micro-batch i of the whole run is a pure function of i (the seed, the epoch and this process's shard), so a resumed
run sees exactly the batches it would have seen (`MicroBatches`). So one worker thread can build index i+1 (Arrow
gather, padding; pinned when the target is a CUDA device) while the main thread queues step i on the GPU
(`BatchPrefetcher`). The copy to the device is `non_blocking`: from pinned memory it runs on the copy engine, and the
caching host allocator keeps the pinned block alive until it is done. Only the worker thread calls `build`, so
whatever state `build` keeps needs no lock."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from sentadapt.data.batching import (
    RowPairs,
    TokenizedExamples,
    plan_epoch,
    plan_neighbour_epoch,
    shard,
    teacher_neighbours,
)
from sentadapt.storage.memory import release_freed_memory
from sentadapt.train.distill import Distillation

# ----------------------------------------------------------------------------------- the micro-batches


class MicroBatches:
    """`micro_batches(index)`: the collated micro-batch number `index` for process `rank` of `world`. Called from the
    prefetch thread only: the epoch plan it caches is that thread's."""

    def __init__(self, examples: TokenizedExamples | RowPairs, train_config: Any, pad_id: int, pad_multiple: int,
                 neighbours: np.ndarray | None, distillation: Distillation | None, rank: int, world: int) -> None:
        self.examples, self.train_config, self.pad_id, self.pad_multiple = examples, train_config, pad_id, pad_multiple
        self.neighbours, self.distillation = neighbours, distillation
        self.rank, self.world = rank, world
        self.lengths = examples.lengths()
        self.plans: dict[int, np.ndarray] = {}  # the current epoch's batch plan only

    def __call__(self, index: int) -> dict[str, torch.Tensor]:
        cfg = self.train_config
        epoch, position = divmod(index, len(self.lengths) // cfg.batch_size)
        if epoch not in self.plans:
            self.plans.clear()
            self.plans[epoch] = plan_epoch(self.lengths, cfg.batch_size, cfg.seed, epoch, cfg.length_grouping) \
                if self.neighbours is None else plan_neighbour_epoch(self.neighbours, cfg.batch_size, cfg.seed, epoch)
        planned = self.plans[epoch][position]  # the global batch: what the recipe's gathered views hold, in order
        indices = shard(planned, self.rank, self.world)
        batch = self.examples.collate(indices, self.pad_id, self.pad_multiple)  # type: ignore[arg-type]
        if self.distillation is not None:  # a teacher's rows of these examples travel with the batch
            batch.update(self.distillation.batch_fields(indices))
        return batch


def pad_multiple(train_config: Any, device: torch.device) -> int:
    """`pad_multiple`, its 0 resolved for the device: 8 on a GPU, 1 on the CPU (TrainConfig says why)."""
    return train_config.pad_multiple or (8 if device.type == "cuda" else 1)


def neighbour_batches(teacher_vectors: Any | None, train_config: Any, report: Callable[[str], None],
                      ) -> np.ndarray | None:
    """Each example's nearest examples under the teacher, when the teacher composes the batches (else None)."""
    if teacher_vectors is None or train_config.distillation.distill_batches != "neighbours":
        return None
    started = time.perf_counter()
    neighbours = teacher_neighbours(teacher_vectors, train_config.distillation.distill_neighbours, train_config.seed)
    release_freed_memory()  # the search's blocks of table rows and cosines, freed: not kept for training
    report(f"neighbour batches: each example's {neighbours.shape[1]} nearest under the teacher, "
           f"found in {time.perf_counter() - started:.1f} s")
    return neighbours


# ------------------------------------------------------------------------------ the next one, prepared


Batch = dict[str, torch.Tensor]


class BatchPrefetcher:
    def __init__(self, build: Callable[[int], Batch], device: torch.device, first_index: int, end_index: int,
                 ) -> None:
        self._build = build
        self._end = end_index  # nothing is built from here on (the run's last micro-batch is end_index - 1)
        self._device = device
        self._pin = device.type == "cuda"
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sentadapt-batches")
        self._index = first_index
        self._pending: Future[Batch] | None = self._submit(first_index)

    def _submit(self, index: int) -> Future[Batch] | None:
        return self._pool.submit(self._on_host, index) if index < self._end else None

    def _on_host(self, index: int) -> Batch:
        batch = self._build(index)
        return {key: value.pin_memory() for key, value in batch.items()} if self._pin else batch

    def get(self, index: int) -> Batch:
        """Micro-batch `index` on the device; starts building `index + 1`."""
        if index != self._index or self._pending is None:  # not the one prepared (never in the loop's order)
            if self._pending is not None:
                self._pending.cancel()
            self._pending = self._pool.submit(self._on_host, index)
        batch = self._pending.result()
        self._index = index + 1
        self._pending = self._submit(index + 1)
        return {key: value.to(self._device, non_blocking=True) for key, value in batch.items()}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BatchPrefetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
