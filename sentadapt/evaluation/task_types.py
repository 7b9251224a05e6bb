"""Every registered task type, format detection, and the dev set that training selects checkpoints on.

Importing this module registers the task types (one module each); adding a type (clustering, triplets) is one module
with `@TASK_TYPES.register(name)` and one import line here: detection, reading and the messages that list the layouts
read the registry (tests/evaluation/test_task_type_fixture.py registers one that touches nothing else). No torch at
import time, so `adapt` checks --dev and --dev-metric before torch loads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sentadapt.data.pair_files import sniff_columns
from sentadapt.errors import ConfigError, DataError
from sentadapt.evaluation import STS_AGGREGATE, pairclass, reranking, retrieval, sts  # noqa: F401  (registers the task types)
from sentadapt.evaluation.contract import TASK_TYPES, EvalTask
from sentadapt.evaluation.evaluator import Evaluator
from sentadapt.evaluation.tasks import TASKS, resolve_data_dir
from sentadapt.options import TEST_SPLIT


def detection_order(folders: bool = False) -> list[type[EvalTask]]:
    """The task types that read files (`folders`: folders), in the order detection sniffs them: most specific
    first (EvalTask.detection_rank)."""
    types = [TASK_TYPES.get(name) for name in TASK_TYPES.names()]
    return sorted((kind for kind in types if kind.reads_folders == folders), key=lambda kind: kind.detection_rank)


def _layouts(types: list[type[EvalTask]]) -> str:
    """The file layouts a message lists: each type's title and layout, in detection order."""
    return " | ".join(f"{kind.title}: {kind.description}" for kind in types)


def detect_task_type(path: str | Path, task_option: bool = True) -> str:
    """The task type of a file or folder, from its layout / header / first record; `task_option`: the command has
    `--task TYPE` to name it (eval), so the message may suggest it (adapt --dev and decide have none)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if path.is_dir():
        folder_types = detection_order(folders=True)
        for kind in folder_types:
            if kind.sniff(path):
                return kind.kind
        collections = " or ".join(f"a {kind.title} collection ({kind.description})" for kind in folder_types)
        raise DataError(f"{path}: is a folder, and not {collections}; pass a labelled pairs file "
                        "(.tsv/.csv/.jsonl/.parquet) or such a folder")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: the file is empty")
    file_types = detection_order()
    for kind in file_types:
        if kind.sniff(path):
            return kind.kind
    columns = sorted(sniff_columns(path))
    expected = f"expected {_layouts(file_types)}"
    if not columns:
        raise DataError(f"{path}: no sentence pairs (only blank lines or comments); {expected}")
    raise DataError(f"{path}: cannot tell the task type (found {', '.join(columns)}); {expected}"
                    + ("; or pass --task TYPE" if task_option else ""))


def read_task(path: str | Path, kind: str | None = None, split: str = TEST_SPLIT,
              aggregate: str = STS_AGGREGATE) -> EvalTask:
    """Read one file or folder as a task of type `kind` (None: detected)."""
    path = Path(path)
    kind = kind or detect_task_type(path)
    if kind == "sts":
        return sts.ScoredPairsTask.read(path, split, aggregate)
    return TASK_TYPES.get(kind).read(path, split)


def check_metric(metric: str | None, kind: str, option: str = "--dev-metric") -> None:
    if metric is not None and metric not in TASK_TYPES.get(kind).metric_names:
        names = ", ".join(TASK_TYPES.get(kind).metric_names)
        raise ConfigError(f"{option}: '{metric}' is not a {TASK_TYPES.get(kind).title} metric; choose one of {names}")


def resolve_dev_set(
    dev: str | None, data_dir: str | Path | None, metric: str | None = None, resamples: int | None = None
) -> tuple[str | None, Callable[[], Evaluator] | None]:
    """Which dev set scores checkpoints: stsb | sickr | a file or BEIR folder of any task type | none; by
    default STS-B dev when STS data is available. Returns a display name and a factory (the evaluator
    loads lazily; types and metric names are checked now); (None, None) means no dev set."""
    options: dict[str, Any] = {"metric": metric}
    if resamples is not None:
        options["resamples"] = resamples
    directory = resolve_data_dir(data_dir)
    if dev is None:
        if directory is None or not (directory / "stsb.dev.jsonl").is_file():
            if metric is not None:
                raise ConfigError("--dev-metric: needs a dev set; pass --dev FILE|DIR")
            return None, None
        dev = "stsb"
    if dev.lower() in ("none", "off"):
        if metric is not None:
            raise ConfigError("--dev-metric: needs a dev set; --dev is none")
        return None, None
    if dev.lower() in TASKS:
        name = dev.lower()
        if directory is None:
            raise DataError(f"--dev {name}: needs STS data; pass --data-dir DIR or set $SENTADAPT_DATA_DIR")
        check_metric(metric, "sts")
        return (f"{TASKS[name].display} dev",
                lambda: sts.StsEvaluator.from_sts([name], "dev", directory, **options))
    path = Path(dev)
    if not path.exists():
        raise DataError(f"--dev {dev}: no such file or folder; pass stsb, sickr, a labelled pairs file "
                        "(.tsv/.csv/.jsonl with sentence1, sentence2 and score or label), a reranking .jsonl "
                        "or a BEIR retrieval folder")
    kind = detect_task_type(path, task_option=False)  # adapt --dev, decide: no --task to suggest
    check_metric(metric, kind)
    title = f"{path.name} — {TASK_TYPES.get(kind).title}"
    return path.name, lambda: Evaluator([read_task(path, kind, split="dev")], split="dev", title=title, **options)
