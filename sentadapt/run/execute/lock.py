"""The run directory's lock: one writer at a time (`OUTPUT/.lock` holds the writer's pid)."""

from __future__ import annotations

import os
from pathlib import Path

from sentadapt.errors import ConfigError
from sentadapt.events import Note, quiet
from sentadapt.storage.run_folder import RunDir

# A lock's writer writes its pid right after creating the file (microseconds): an empty lock older than this was
# left by a run stopped in between (Ctrl-C at that instant), not by a run still starting
EMPTY_LOCK_STALE_S = 10.0


def acquire_lock(output: Path, note: Note = quiet) -> Path:
    """Create `output/.lock` holding our pid in one atomic step (O_EXCL); take over a lock whose process is gone."""
    lock = RunDir(output).lock_file
    for _attempt in range(3):
        try:
            descriptor = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pid = _lock_pid(lock)
            if pid == os.getpid():
                return lock
            if pid == 0:
                continue  # released in the meantime: try again
            if pid is None and _age(lock) > EMPTY_LOCK_STALE_S:
                note(f"--output {output}: taking over a lock that never got its pid (its run was stopped while "
                     "taking it)")
                lock.unlink(missing_ok=True)
                continue
            if pid is None or _process_alive(pid):
                holder = f"pid {pid}" if pid is not None else "starting, the lock has no pid yet"
                raise ConfigError(f"--output {output}: another sentadapt run ({holder}) is writing here; wait for "
                                  f"it or remove {lock} if that process is not sentadapt") from None
            note(f"--output {output}: taking over a stale lock (pid {pid} is not running; that run was killed)")
            lock.unlink(missing_ok=True)
            continue
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(str(os.getpid()))
        except BaseException:
            lock.unlink(missing_ok=True)  # stopped before the pid was written: leave no lock that names no one
            raise
        return lock
    raise ConfigError(f"--output {output}: could not take {lock}; another run keeps replacing it")


def held_by_another(output: Path) -> bool:
    """Whether a live process other than this one holds `output`'s lock (claiming it will be refused)."""
    pid = _lock_pid(RunDir(output).lock_file)
    return pid is None or (pid not in (0, os.getpid()) and _process_alive(pid))


def _lock_pid(lock: Path) -> int | None:
    """The pid in a lock file; 0 when it was just released; None while its writer has not written the pid yet."""
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        return 0
    return int(text) if text.isdigit() else None


def _age(lock: Path) -> float:
    """Seconds since the lock file was last written (0 when it is gone)."""
    import time

    try:
        return time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return False  # os.kill(0, ...) would address our own process group
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by another user
    return True
