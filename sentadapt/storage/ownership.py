"""What sentadapt wrote inside a run or an export folder, at any depth: all that `--overwrite` may replace.

Every file sentadapt writes is known by one of three records, each with its SHA-256 where the content is fixed:
- an atomically written folder (a checkpoint, best/, an export) lists its files and their sums in its manifest.json;
- a run's published model files are listed with their sums in metrics.json's `model_files` (a run finished before
  the sums were recorded lists the names; one finished before that, the names a model folder holds);
- the run's own records (config.yaml, train.log, metrics.json, ...) and tensorboard's event files, by name: the run
  rewrites them as it goes, so their bytes are not fixed.
Anything else is the user's — a file or folder at any depth, or a listed file whose bytes changed since it was
written — and `--overwrite` refuses to delete it, naming it (a folder holding nothing of sentadapt's is named once).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from sentadapt.errors import ConfigError
from sentadapt.storage.durable import MANIFEST, OLD_PREFIX, TMP_PREFIX, file_sha256
from sentadapt.storage.run_folder import (
    BEST_DIR,
    CANDIDATES_DIR,
    CHECKPOINT_PREFIX,
    CHECKPOINTS_DIR,
    CHOSEN_STAGING_DIR,
    LOCK_FILE,
    MODEL_DESCRIPTION,
    MODEL_FILE_NAMES,
    RUN_RECORDS,
    STAGE_PREFIX,
    TENSORBOARD_DIR,
    RunDir,
    contents,
)

TENSORBOARD_EVENTS = "events.out.tfevents."  # the prefix of every file tensorboard's writer creates
CHANGED = " (changed since sentadapt wrote it)"
# A file's verdict: None when sentadapt wrote it, else how to name it (its relative path, CHANGED added when the
# record lists it with other bytes)
Ours = Callable[[str, Path], "str | None"]


def foreign_in_run(folder: Path) -> list[str]:
    """The paths inside a run folder that sentadapt did not write, or whose bytes changed since, sorted (relative
    to `folder`; a changed file carries CHANGED after its name)."""
    return _foreign_in_run(folder, "")


def foreign_in_export(folder: Path) -> list[str]:
    """The paths in an export folder that its manifest does not list, or whose bytes differ from it, sorted."""
    sums = _manifest_sums(folder)
    if sums is None:
        return contents(folder)
    return _walk(folder, "", _listed(sums, "", manifest=True))


def check_replaceable(label: str, folder: Path, what: str, recognise: Callable[[Path], bool],
                      foreign: Callable[[Path], list[str]]) -> None:
    """--overwrite replaces only what sentadapt wrote (`what`, which `recognise` knows): a non-empty folder holding
    anything else, at any depth, is refused, naming it, so `--output . --overwrite` cannot delete a user's files —
    nor the notes a user added inside a run or an export (`foreign` lists them). A lock and the temporaries of an
    interrupted write do not count. `label`: how the message names the folder."""
    names = contents(folder)
    if not names:
        return
    if not recognise(folder):
        raise ConfigError(f"{label}: holds files sentadapt did not write ({shown(names)}); --overwrite replaces "
                          f"only {what}; choose a new or empty folder")
    added = foreign(folder)
    if added:
        raise ConfigError(f"{label}: holds files sentadapt did not write ({shown(added)}), which --overwrite would "
                          "delete; move them out of the folder, or choose another output")


def shown(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


# ---------------------------------------------------------------------------------------------------- a run folder
def _foreign_in_run(folder: Path, prefix: str) -> list[str]:
    model = _model_file(_model_files(folder), folder, prefix)
    foreign: list[str] = []
    for path in sorted(folder.iterdir()):
        name, relative = path.name, f"{prefix}{path.name}"
        if _transient(name):
            continue
        if path.is_dir() and name == CHECKPOINTS_DIR:
            foreign += _foreign_in_checkpoints(path, f"{relative}/")
        elif path.is_dir() and name in (BEST_DIR, CHOSEN_STAGING_DIR):
            foreign += _foreign_in_written_folder(path, f"{relative}/")
        elif path.is_dir() and name == TENSORBOARD_DIR:
            foreign += _walk(path, f"{relative}/", _tensorboard_event)
        elif path.is_dir() and name == CANDIDATES_DIR:
            foreign += _foreign_in_runs(path, f"{relative}/")
        elif path.is_dir() and name.startswith(STAGE_PREFIX):
            foreign += _foreign_in_run(path, f"{relative}/")
        elif path.is_file() and name in RUN_RECORDS:
            continue
        elif path.is_dir():
            foreign += _walk(path, f"{relative}/", model, named=relative)
        else:
            verdict = model(relative, path)
            foreign += [] if verdict is None else [verdict]
    return foreign


def _foreign_in_checkpoints(folder: Path, prefix: str) -> list[str]:
    """checkpoints/: one atomically written folder per step."""
    return _foreign_in_children(folder, prefix, lambda path: path.name.startswith(CHECKPOINT_PREFIX),
                                _foreign_in_written_folder)


def _foreign_in_runs(folder: Path, prefix: str) -> list[str]:
    """--recipe auto's candidates/: one run folder per candidate."""
    return _foreign_in_children(folder, prefix, lambda path: RunDir(path).has_config(), _foreign_in_run)


def _foreign_in_children(folder: Path, prefix: str, written: Callable[[Path], bool],
                         inside: Callable[[Path, str], list[str]]) -> list[str]:
    """A folder whose children sentadapt writes as folders of one kind (`written` knows them; `inside` walks one):
    anything else in it is named whole."""
    foreign: list[str] = []
    for path in sorted(folder.iterdir()):
        if _transient(path.name):
            continue
        if path.is_dir() and written(path):
            foreign += inside(path, f"{prefix}{path.name}/")
        else:
            foreign.append(f"{prefix}{path.name}")
    return foreign


def _foreign_in_written_folder(folder: Path, prefix: str) -> list[str]:
    """A folder written atomically (a checkpoint, best/): what its manifest lists, with the listed bytes; a folder
    without a readable manifest is not one sentadapt wrote, and is named whole."""
    sums = _manifest_sums(folder)
    if sums is None:
        return [prefix.rstrip("/")]
    return _walk(folder, prefix, _listed(sums, prefix, manifest=True))


def _model_files(folder: Path) -> dict[str, str | None] | None:
    """The published model's files (relative path → SHA-256, None where only the name was recorded), from
    metrics.json; None for a run finished before any record (or not finished)."""
    try:
        metrics = RunDir(folder).read_metrics() or {}
    except (OSError, ValueError):
        return None
    recorded = metrics.get("model_files")
    if isinstance(recorded, dict):
        return {str(name): str(digest) if digest else None for name, digest in recorded.items()}
    if isinstance(recorded, list):
        return {str(name): None for name in recorded}
    return None


def _model_file(model: dict[str, str | None] | None, folder: Path, prefix: str) -> Ours:
    """Whether a file below the run's top is part of the model it published. Recorded: listed, with the listed
    bytes. Not recorded (a run finished before metrics.json listed them): a file name a model folder holds, at the
    top or in a module folder its modules.json names."""
    if model is not None:
        return _listed(model, prefix, manifest=False)
    modules = _module_folders(folder / MODEL_DESCRIPTION)

    def legacy(relative: str, path: Path) -> str | None:
        parts = relative[len(prefix):].split("/")
        known = (parts[0] in MODEL_FILE_NAMES and len(parts) > 1) or (  # lora-adapter/, whole
            path.name in MODEL_FILE_NAMES and (len(parts) == 1 or (len(parts) == 2 and parts[0] in modules)))
        return None if known else relative
    return legacy


def _module_folders(modules_json: Path) -> set[str]:
    """The sub-folders a sentence-transformers modules.json names (1_Pooling, 2_Dense, ...)."""
    try:
        modules = json.loads(modules_json.read_text(encoding="utf-8"))
        return {str(module["path"]).split("/", 1)[0] for module in modules if module.get("path")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


# ---------------------------------------------------------------------------------------------------- the walk
def _walk(folder: Path, prefix: str, ours: Ours, named: str | None = None) -> list[str]:
    """The foreign paths below `folder` (`prefix` + their path inside it). A sub-folder holding nothing of ours is
    named once; `named`: the name of `folder` itself, reported whole when nothing in it is ours."""
    foreign, kept = _walk_folder(folder, prefix, ours)
    if named is not None and not kept and foreign:
        return [named]
    return foreign


def _walk_folder(folder: Path, prefix: str, ours: Ours) -> tuple[list[str], bool]:
    """(the foreign paths below `folder`, whether anything below it is ours)."""
    foreign: list[str] = []
    kept = False
    for path in sorted(folder.iterdir()):
        relative = f"{prefix}{path.name}"
        if _transient(path.name):
            continue
        if path.is_dir() and not path.is_symlink():
            below, below_kept = _walk_folder(path, f"{relative}/", ours)
            kept |= below_kept
            foreign += below if below_kept else ([relative] if below else [])
            continue
        verdict = ours(relative, path)
        kept |= verdict is None or verdict.endswith(CHANGED)  # a folder sentadapt wrote into is named by its files
        foreign += [] if verdict is None else [verdict]
    return foreign, kept


def _listed(sums: dict[str, str | None], prefix: str, manifest: bool) -> Ours:
    """A file a record lists (a manifest, and with `manifest` the manifest itself; metrics.json's model files),
    with the listed bytes; `prefix`: where the record's folder sits in the walk."""
    def ours(relative: str, path: Path) -> str | None:
        inside = relative[len(prefix):]
        if manifest and inside == MANIFEST:
            return None
        if inside not in sums:
            return relative
        return None if _same_bytes(path, sums[inside]) else f"{relative}{CHANGED}"
    return ours


def _tensorboard_event(relative: str, path: Path) -> str | None:
    return None if path.name.startswith(TENSORBOARD_EVENTS) else relative


def _manifest_sums(folder: Path) -> dict[str, str | None] | None:
    try:
        sums = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {str(name): str(digest) for name, digest in sums.items()} if isinstance(sums, dict) else None


def _same_bytes(path: Path, digest: str | None) -> bool:
    """Whether `path` holds the bytes recorded (always, where only its name was recorded)."""
    return digest is None or file_sha256(path) == digest


def _transient(name: str) -> bool:
    """A lock, or a temporary of an interrupted write (recover_interrupted_writes removes them)."""
    return name == LOCK_FILE or name.startswith((TMP_PREFIX, OLD_PREFIX))
