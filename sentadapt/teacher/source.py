"""The teacher given to `adapt --teacher`: a model (a folder or a Hub id) or a vectors file, checked before anything
loads (check_teacher: run/plan.py's seam) and resolved once for the run."""

from __future__ import annotations

from pathlib import Path

from sentadapt.errors import ConfigError, ModelError
from sentadapt.model.resolve import ResolvedModel


def resolve_source(teacher: str) -> ResolvedModel | Path:
    """--teacher as a vectors file (its path) or a model (resolved)."""
    from sentadapt.data.vectors import is_vectors_path

    return Path(teacher) if is_vectors_path(teacher) else resolve_teacher(teacher)


def check_teacher(teacher: str, base_location: str) -> ResolvedModel | Path:
    """Before any weights load: the teacher must resolve to a model that holds weights and is not the base model
    itself, or be a vectors file that exists (its contents are read once the corpus is, in `teacher_table`).
    Returns the teacher resolved (`resolve_source`), for the run to load without resolving it again."""
    from sentadapt.model.resolve import check_has_weights

    resolved = resolve_source(teacher)
    if isinstance(resolved, Path):
        from sentadapt.data.vectors import check_vectors_file

        check_vectors_file(resolved, teacher)
        return resolved
    if resolved.location == base_location:
        raise ConfigError(f"--teacher {teacher}: is the base model itself; a teacher must be another, stronger "
                          "model")
    try:
        check_has_weights(resolved)
    except ModelError as error:
        raise ModelError(f"--teacher {error}") from None
    return resolved


def resolve_teacher(teacher: str) -> ResolvedModel:
    """resolve_model's ModelError, naming the option: "--teacher PATH: no such model folder"."""
    from sentadapt.model.resolve import resolve_model

    try:
        return resolve_model(teacher)
    except ModelError as error:
        raise ModelError(f"--teacher {error}") from None
