"""`--overwrite` without losing the run it replaces.

A new run into a folder that holds an earlier run (finished or not) does not delete it first. The earlier run is
renamed to a hidden sibling, `.NAME.replaced` (one rename on the same file system: nothing is copied), the new run
starts in NAME, and the earlier run is deleted only once the new one has something to put in its place: its first
checkpoint (of any stage or candidate) or its end. Any failure before that — a teacher that trails the base, a bad
corpus line, Ctrl-C while loading or before the first checkpoint — puts the earlier run back as it was, byte for
byte. A process killed outright (SIGKILL, a lost node) cannot put it back itself: the next `adapt` into NAME does,
before anything else (`recover`), unless the killed run had reached a checkpoint.

Only the main process touches the folders; the lock (run/lock.py) is held throughout.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sentadapt.events import Note, quiet
from sentadapt.rundir import LOCK_FILE, RunDir

ASIDE_SUFFIX = ".replaced"


def aside_path(output: Path) -> Path:
    """Where the run that `--overwrite` replaces waits: a hidden sibling of the output folder (same file system)."""
    return output.parent / f".{output.name}{ASIDE_SUFFIX}"


def has_replacement(output: Path) -> bool:
    """The new run in `output` holds something to put in the old one's place: a checkpoint (of the run, a stage or a
    --recipe auto candidate) or a finished run."""
    run_dir = RunDir(output)
    if run_dir.is_finished() or run_dir.has_progress():
        return True
    if run_dir.candidates.is_dir():
        return any(RunDir(folder).is_finished() or RunDir(folder).has_progress()
                   for folder in run_dir.candidates.iterdir() if folder.is_dir())
    return False


def worth_setting_aside(output: Path) -> bool:
    """Anything in `output` but the lock and what a run writes before its first checkpoint."""
    if not output.is_dir():
        return False
    if RunDir(output).never_started():
        return False
    return any(path.name != LOCK_FILE for path in output.iterdir())


def recover(output: Path, note: Note = quiet) -> None:
    """A run set aside by an `--overwrite` run that was killed before it could settle: back in place when the
    killed run never reached a checkpoint, else deleted (the killed run's checkpoint replaced it)."""
    aside = aside_path(output)
    if not aside.is_dir():
        return
    if output.is_dir() and has_replacement(output):
        shutil.rmtree(aside)
        return
    if output.is_dir():
        shutil.rmtree(output)
    os.rename(aside, output)
    note(f"--output {output}: put back the run that an interrupted --overwrite run had set aside in {aside}")


@dataclass
class Replacement:
    """The earlier run of an `--overwrite`, set aside until the new run settles (None: nothing was set aside)."""

    output: Path
    aside: Path | None = None
    note: Note = quiet

    @classmethod
    def set_aside(cls, output: Path, note: Note = quiet) -> Replacement:
        """Move the earlier run in `output` aside (the caller holds its lock, which stays behind and is re-taken)."""
        if not worth_setting_aside(output):
            if output.is_dir():
                shutil.rmtree(output)  # nothing worth keeping: what a run wrote before its first checkpoint
            return cls(output, None, note)
        aside = aside_path(output)
        (output / LOCK_FILE).unlink(missing_ok=True)  # ours: the earlier run goes aside as it was
        os.rename(output, aside)
        return cls(output, aside, note)

    def commit(self, _checkpoint: Path | None = None) -> None:
        """The new run has a checkpoint (or has finished): the earlier run is deleted."""
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)
            self.aside = None

    def settle(self) -> None:
        """At the end of the new run, whatever happened: keep it if it got somewhere, else put the earlier one back."""
        if self.aside is None:
            return
        if has_replacement(self.output):
            self.commit()
            return
        if self.output.is_dir():
            shutil.rmtree(self.output)
        os.rename(self.aside, self.output)
        self.aside = None
        self.note(f"--output {self.output}: the new run stopped before its first checkpoint; the run it was to "
                  "replace is back as it was")
