"""The STS task table, data-source resolution and loading (a data directory's files, or the Hub's datasets) — no
torch, numpy or scipy at import, so option checks stay fast.

Imported by evaluation/sts.py and evaluation/task_types.py; it imports neither (imports point one way)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sentadapt.errors import ConfigError, DataError
from sentadapt.options import TEST_SPLIT
from sentadapt.registry import unknown_name_message

if TYPE_CHECKING:
    from sentadapt.data.pair_files import ScoredPairs

DATA_DIR_ENV = "SENTADAPT_DATA_DIR"
AGGREGATIONS = ("all", "mean", "wmean")


@dataclass(frozen=True)
class StsTask:
    name: str
    display: str
    splits: tuple[str, ...]
    hub_dataset: str
    hub_splits: dict[str, str] = field(default_factory=dict)
    score_range: tuple[float, float] = (0.0, 5.0)


TASKS: dict[str, StsTask] = {
    task.name: task
    for task in (
        StsTask("sts12", "STS12", ("test",), "mteb/sts12-sts", {"test": "test"}),
        StsTask("sts13", "STS13", ("test",), "mteb/sts13-sts", {"test": "test"}),
        StsTask("sts14", "STS14", ("test",), "mteb/sts14-sts", {"test": "test"}),
        StsTask("sts15", "STS15", ("test",), "mteb/sts15-sts", {"test": "test"}),
        StsTask("sts16", "STS16", ("test",), "mteb/sts16-sts", {"test": "test"}),
        StsTask("stsb", "STS-B", ("train", "dev", "test"), "mteb/stsbenchmark-sts",
                {"train": "train", "dev": "validation", "test": "test"}),
        StsTask("sickr", "SICK-R", ("train", "dev", "test"), "mteb/sickr-sts", {"test": "test"},
                score_range=(1.0, 5.0)),
    )
}


def parse_task_list(spec: str, split: str = TEST_SPLIT) -> list[str]:
    """'all' or a comma list ('stsb,sickr') → task names; 'all' keeps the tasks that have `split`."""
    names = [part.strip().lower() for part in spec.split(",") if part.strip()]
    if not names:
        raise ConfigError("--sts: give 'all' or a comma-separated list of tasks")
    if names == ["all"]:
        return [name for name, task in TASKS.items() if split in task.splits]
    for name in names:
        if name not in TASKS:
            raise ConfigError("--sts: " + unknown_name_message("task", name, [*TASKS, "all"]))
        if split not in TASKS[name].splits:
            raise ConfigError(f"--sts: task {name} has no '{split}' split (it has {', '.join(TASKS[name].splits)})")
    return list(dict.fromkeys(names))


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    """--data-dir, else $SENTADAPT_DATA_DIR, else None (hub datasets)."""
    chosen = data_dir or os.environ.get(DATA_DIR_ENV) or None
    if chosen is None:
        return None
    path = Path(chosen).expanduser()
    if not path.is_dir():
        origin = "--data-dir" if data_dir else f"${DATA_DIR_ENV}"
        raise DataError(f"{origin}: {path} is not a directory of STS files (e.g. stsb.test.jsonl)")
    return path


def load_task(name: str, split: str, data_dir: Path | None) -> ScoredPairs:
    """STS task `name`'s `split`: DATA_DIR/NAME.SPLIT.jsonl when a data directory is given, else the Hub's
    dataset (MTEB's copy); the pairs checked usable."""
    from sentadapt.data.pair_files import read_scored_pairs

    task = TASKS[name]
    if data_dir is not None:
        path = data_dir / f"{name}.{split}.jsonl"
        if not path.is_file():
            raise DataError(f"{path}: missing; the data directory needs {name}.{split}.jsonl (JSON Lines: "
                            "sentence1, sentence2, score)")
        pairs = read_scored_pairs(path, score_range=task.score_range)
        pairs.source = f"{path} (SentEval pairs)"
    else:
        pairs = _load_from_hub(task, split)
    pairs.check_usable()
    return pairs


def _load_from_hub(task: StsTask, split: str) -> ScoredPairs:
    from sentadapt.data.pair_files import ScoredPairs
    from sentadapt.storage.hub import hub_is_reachable

    if split not in task.hub_splits:
        raise DataError(f"{task.name}: the hub dataset {task.hub_dataset} has no '{split}' split; use --data-dir")
    if not hub_is_reachable():
        raise DataError(
            f"no STS data for {task.name}: pass --data-dir DIR (or set ${DATA_DIR_ENV}) with files such as "
            f"{task.name}.{split}.jsonl; the Hugging Face Hub ({task.hub_dataset}) is unreachable"
        )
    from datasets import load_dataset

    dataset = load_dataset(task.hub_dataset, split=task.hub_splits[split])
    pairs = ScoredPairs(source=f"hub:{task.hub_dataset}[{task.hub_splits[split]}] (MTEB pairs)")
    for row in dataset:
        pairs.append(row["sentence1"], row["sentence2"], float(row["score"]), task.name)
    return pairs
