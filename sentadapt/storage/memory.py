"""Hand freed memory back to the operating system, so a long step's peak does not stay resident: used after the
teacher's table is keyed and written and after the neighbour search, before training starts."""

from __future__ import annotations

import contextlib


def release_freed_memory() -> None:
    """Hand what the last block freed back to the OS (Arrow's pool, then glibc's heap): a table's writer reads and
    encodes every text once, and the allocators would otherwise keep each block's high-water mark, so the peak
    would creep up with the corpus. A no-op where the C library has no malloc_trim."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)
