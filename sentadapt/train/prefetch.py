"""The next micro-batch is built while the device computes this one.

A micro-batch is a pure function of its index (batching.plan_epoch, exact resume), so one worker
thread can build index i+1 (Arrow gather, padding; pinned when the target is a CUDA device) while the
main thread queues step i on the GPU. The copy to the device is `non_blocking`: from pinned memory it
runs on the copy engine, and the caching host allocator keeps the pinned block alive until it is done.
Only the worker thread calls `build`, so whatever state `build` keeps needs no lock.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch

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
