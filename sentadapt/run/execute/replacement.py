"""`--overwrite` without losing the run it replaces.

A new run into a folder that holds an earlier run (finished or not) does not delete it first. The earlier run is
renamed to a hidden sibling, `.NAME.replaced` (one rename on the same file system: nothing is copied), the new run
starts in NAME, and the earlier run is deleted only once the new one has *finished* (its metrics.json is written):
until then the new run may still be stopped, and a user who stops it must be able to choose either run.

When the new run stops early (a teacher that trails the base, a bad corpus line, Ctrl-C or SIGTERM while loading or
training, a full disk):
- before its first checkpoint: nothing of it is worth keeping, so the earlier run is put back as it was, byte for
  byte;
- after a checkpoint: both are kept, and one line says where each is, how to continue the new one (`--resume`, which
  deletes the earlier run when it finishes) and how to get the earlier one back.
A process killed outright (SIGKILL, a lost node) cannot say so itself: the next `adapt` into NAME does (`recover`),
before anything else.

Only the main process touches the folders; the lock (run/execute/lock.py) is held throughout.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sentadapt.events import Note, quiet
from sentadapt.storage.run_folder import LOCK_FILE, RunDir, aside_path

__all__ = ["Replacement", "aside_path", "recover"]


def has_replacement(output: Path) -> bool:
    """The new run in `output` holds something worth keeping: a checkpoint (of the run, a stage or a --recipe auto
    candidate) or a finished run."""
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


def both_kept(output: Path, aside: Path) -> str:
    """The line for a new run stopped after a checkpoint, with the run it replaces still set aside."""
    return (f"--output {output}: the new run is not finished, so the run it replaces is kept in {aside}; continue "
            f"the new one with: sentadapt adapt --resume --output {output} (the old one is deleted when it "
            f"finishes), or get the old one back with: rm -r {output} && mv {aside} {output}")


def recover(output: Path, note: Note = quiet) -> None:
    """A run set aside by an `--overwrite` run that was killed before it could settle, settled now as the run would
    have settled it."""
    aside = aside_path(output)
    if aside.is_dir():
        settle_aside(output, aside, note, f"--output {output}: put back the run that an interrupted --overwrite run "
                                          f"had set aside in {aside}")


def settle_aside(output: Path, aside: Path, note: Note, put_back: str) -> None:
    """The run in `aside` once the new run in `output` has stopped, whatever stopped it: deleted when the new run
    finished; kept, and the user told where, when it reached a checkpoint; else put back, saying `put_back`."""
    if RunDir(output).is_finished():
        shutil.rmtree(aside, ignore_errors=True)
    elif has_replacement(output):
        note(both_kept(output, aside))
    else:
        if output.is_dir():
            shutil.rmtree(output)
        os.rename(aside, output)
        note(put_back)


@dataclass
class Replacement:
    """The earlier run of an `--overwrite`, set aside until the new run finishes (None: nothing was set aside)."""

    output: Path
    aside: Path | None = None
    note: Note = quiet

    @classmethod
    def set_aside(cls, output: Path, note: Note = quiet) -> Replacement:
        """Move the earlier run in `output` aside (the caller holds its lock, which stays behind and is re-taken).
        When an earlier run already waits aside (a replacement that was stopped), `output` holds that unfinished
        replacement: it is what this new run replaces, and the run waiting aside goes on waiting."""
        aside = aside_path(output)
        if aside.is_dir():
            if output.is_dir():
                shutil.rmtree(output)
            note(f"--output {output}: replacing the unfinished run that was there; the run it was to replace "
                 f"still waits in {aside} until this one finishes")
            return cls(output, aside, note)
        if not worth_setting_aside(output):
            if output.is_dir():
                shutil.rmtree(output)  # nothing worth keeping: what a run wrote before its first checkpoint
            return cls(output, None, note)
        (output / LOCK_FILE).unlink(missing_ok=True)  # ours: the earlier run goes aside as it was
        os.rename(output, aside)
        return cls(output, aside, note)

    @classmethod
    def waiting(cls, output: Path, note: Note = quiet) -> Replacement:
        """A resumed run: a run it replaces may wait aside, to be deleted when this one finishes."""
        aside = aside_path(output)
        return cls(output, aside if aside.is_dir() else None, note)

    def settle(self) -> None:
        """At the end of the new run, whatever happened: finished, the earlier run is deleted; stopped after a
        checkpoint, both are kept and the user told where; stopped before one, the earlier run is put back."""
        if self.aside is None:
            return
        put_back = (f"--output {self.output}: the new run stopped before its first checkpoint; the run it was to "
                    "replace is back as it was")
        settle_aside(self.output, self.aside, self.note, put_back)
        self.aside = None
