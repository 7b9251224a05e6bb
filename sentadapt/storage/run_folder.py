"""The run directory that `adapt --output DIR` writes: the one module that knows its layout.

    DIR/                    the published model (a sentence-transformers folder) once the run finished
      config.yaml           the whole run's settings, written first; what --resume and export read back
      metrics.json          written last: its presence marks a finished run
      README.md             the run's card, the decision first (run/folder_card.py), rewritten by each `decide`
      dev_outputs.json      per-pair dev outputs of the base and of every evaluated step (the decision's input)
      train.log             one JSON line per logged step
      curve.png             `adapt --plot`: the dev curve with its CIs over the loss (run/curve.py)
      tensorboard/          --report-to tensorboard
      checkpoints/step-NNNNNNN/   exact-resume checkpoints (train/checkpoint.py writes their contents)
      best/                 the best model on dev so far, until it is published
      stage-K-NAME/         an earlier stage of a multi-stage recipe: a run directory of its own
      auto.yaml, candidates/NAME/   --recipe auto: the plan and one run directory per candidate, base_dev.json
                            (the base's dev outputs, shared), candidates/NAME/auto_outcome.json (each one's result)
      .lock                 the pid of the process writing here

Everything else (train, auto, eval, export, diagnose, resolve) asks a `RunDir` for paths and state instead of
spelling these names. Standard library only (PyYAML for config.yaml, imported when read), no torch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentadapt.errors import ConfigError
from sentadapt.storage.durable import MANIFEST, TMP_PREFIX, write_json_file

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.json"
DEV_OUTPUTS_FILE = "dev_outputs.json"
TRAIN_LOG_FILE = "train.log"
CURVE_FILE = "curve.png"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINTS_DIR = "checkpoints"
BEST_DIR = "best"
AUTO_PLAN_FILE = "auto.yaml"
CANDIDATES_DIR = "candidates"
BASE_DEV_FILE = "base_dev.json"
OUTCOME_FILE = "auto_outcome.json"
CHOSEN_STAGING_DIR = ".chosen"
LOCK_FILE = ".lock"
CHECKPOINT_PREFIX = "step-"
CHECKPOINT_WEIGHTS_FILE = "model.safetensors"  # a checkpoint's TrainingModule state: `encoder.*` + `heads.*`
STAGE_PREFIX = "stage-"
MODEL_DESCRIPTION = "modules.json"  # a sentence-transformers folder's module list: where a model's layout is
# what a run writes before its first checkpoint: a folder holding only these never held a run worth keeping
BEFORE_FIRST_CHECKPOINT = frozenset({CONFIG_FILE, TRAIN_LOG_FILE, DEV_OUTPUTS_FILE, TENSORBOARD_DIR, CHECKPOINTS_DIR,
                                     LOCK_FILE})
# the run's own records (the layout above): with the published model's files, all that `adapt --overwrite` replaces
RUN_RECORDS = BEFORE_FIRST_CHECKPOINT | {METRICS_FILE, BEST_DIR, AUTO_PLAN_FILE, CANDIDATES_DIR, BASE_DEV_FILE,
                                         OUTCOME_FILE, CHOSEN_STAGING_DIR, CURVE_FILE}
# a published model's files in a run finished before metrics.json listed them (`model_files`): the names
# Encoder.save writes (transformers' weights, config and tokenizer files, sentence-transformers' descriptions)
MODEL_FILE_NAMES = frozenset({
    "config.json", "model.safetensors", "modules.json", "sentence_bert_config.json",
    "config_sentence_transformers.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt", "vocab.json", "merges.txt", "added_tokens.json", "spiece.model", "sentencepiece.bpe.model",
    "chat_template.jinja", "lora-adapter"})


ASIDE_SUFFIX = ".replaced"  # `.NAME.replaced`: the run an `--overwrite` of NAME replaces, until the new one finishes


def aside_path(output: Path) -> Path:
    """Where the run that `--overwrite` replaces waits: a hidden sibling of the output folder (same file system)."""
    return output.parent / f".{output.name}{ASIDE_SUFFIX}"


def unfinished_run_message(text: str, folder: Path) -> str:
    """What an unfinished run folder is, for a command that needs its model: how to finish it, and where the run an
    interrupted `--overwrite` replaced waits."""
    aside = aside_path(folder)
    waiting = (f"; the run it replaces is kept in {aside} (get it back with: rm -r {text} && mv {aside} {text})"
               if aside.is_dir() else "")
    return (f"{text}: an unfinished run of `sentadapt adapt` (no model published yet); finish it with: sentadapt "
            f"adapt --resume --output {text}{waiting}")


def checkpoint_name(step: int) -> str:
    return f"{CHECKPOINT_PREFIX}{step:07d}"


def checkpoint_step(folder: Path) -> int:
    return int(folder.name[len(CHECKPOINT_PREFIX):])


def list_checkpoints(checkpoints: Path) -> list[Path]:
    """The checkpoint folders in `checkpoints`, newest step first (complete or not: verify before reading)."""
    if not checkpoints.is_dir():
        return []
    found = [p for p in checkpoints.iterdir() if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX)]
    return sorted(found, key=checkpoint_step, reverse=True)


def manifest_step(folder: Path) -> int | None:
    """The step an atomically written model folder (best/, a checkpoint) holds, from its manifest."""
    manifest = folder / MANIFEST
    return json.loads(manifest.read_text()).get("step") if manifest.is_file() else None


@dataclass(frozen=True)
class RunDir:
    """A run directory: its paths, what state it is in, and its small JSON/YAML records."""

    path: Path

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    # ------------------------------------------------------------------ paths
    @property
    def config_file(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def metrics_file(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def dev_outputs_file(self) -> Path:
        return self.path / DEV_OUTPUTS_FILE

    @property
    def curve_file(self) -> Path:
        return self.path / CURVE_FILE

    @property
    def train_log(self) -> Path:
        return self.path / TRAIN_LOG_FILE

    @property
    def tensorboard(self) -> Path:
        return self.path / TENSORBOARD_DIR

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS_DIR

    @property
    def best(self) -> Path:
        return self.path / BEST_DIR

    @property
    def auto_plan(self) -> Path:
        return self.path / AUTO_PLAN_FILE

    @property
    def candidates(self) -> Path:
        return self.path / CANDIDATES_DIR

    @property
    def base_dev_file(self) -> Path:
        return self.path / BASE_DEV_FILE

    @property
    def outcome_file(self) -> Path:
        return self.path / OUTCOME_FILE

    @property
    def chosen_staging(self) -> Path:
        return self.path / CHOSEN_STAGING_DIR

    @property
    def lock_file(self) -> Path:
        return self.path / LOCK_FILE

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / checkpoint_name(step)

    def candidate(self, name: str) -> RunDir:
        """--recipe auto: the run directory of one candidate."""
        return RunDir(self.candidates / name)

    def stages(self, names: Sequence[str]) -> list[RunDir]:
        """One run directory per stage of a multi-stage recipe: earlier stages in DIR/stage-K-NAME, the last in
        DIR itself (so a one-stage run is just DIR)."""
        return [RunDir(self.path / f"{STAGE_PREFIX}{number}-{name}") for number, name in enumerate(names[:-1], 1)
                ] + [self]

    def staged_run(self) -> RunDir | None:
        """The run this folder is an earlier stage of (RUN/stage-K-NAME beside RUN's config.yaml), else None."""
        parent = RunDir(self.path.parent)
        return parent if self.path.name.startswith(STAGE_PREFIX) and parent.has_config() else None

    # ------------------------------------------------------------------ state
    def is_finished(self) -> bool:
        return self.metrics_file.is_file()

    def has_config(self) -> bool:
        return self.config_file.is_file()

    def is_auto(self) -> bool:
        """A --recipe auto run directory (it has a plan)."""
        return self.auto_plan.is_file()

    def checkpoint_folders(self) -> list[Path]:
        return list_checkpoints(self.checkpoints)

    def checkpoint_steps(self) -> list[int]:
        """The steps of the checkpoints, oldest first."""
        return sorted(checkpoint_step(folder) for folder in self.checkpoint_folders())

    def has_progress(self) -> bool:
        """Something to resume from: a checkpoint of the run or of one of its stages, or a finished stage."""
        stages = [p for p in self.path.glob(f"{STAGE_PREFIX}*") if p.is_dir()] if self.path.is_dir() else []
        return bool(self.checkpoint_folders()) or any(
            RunDir(stage).checkpoint_folders() or RunDir(stage).is_finished() for stage in stages)

    def never_started(self) -> bool:
        """A run stopped or failed before its first checkpoint (Ctrl-C while loading, a bad --lora target): its
        config.yaml and only what is written before the first checkpoint. Nothing in it is worth keeping, so the
        same command starts it again (no --overwrite needed) and --resume starts it from its saved config."""
        if not self.has_config() or self.is_finished() or self.is_auto() or self.has_progress():
            return False
        return all(path.name in BEFORE_FIRST_CHECKPOINT or path.name.startswith((TMP_PREFIX, STAGE_PREFIX))
                   for path in self.path.iterdir())

    def has_published_model(self) -> bool:
        return (self.path / MODEL_DESCRIPTION).is_file()

    def is_run(self) -> bool:
        """A `sentadapt adapt --output` folder, finished or not: its config.yaml, and a published model (config.json
        with metrics.json), checkpoints/ or best/ — or nothing else yet when it was stopped early."""
        if not self.has_config():
            return False
        return not (self.path / "config.json").is_file() or any(
            path.exists() for path in (self.metrics_file, self.checkpoints, self.best))

    def layout_folder(self) -> Path | None:
        """Where the model's layout (pooling, Dense head) is described: the published model, else best/; None for
        a run stopped before either was written."""
        if self.has_published_model():
            return self.path
        if (self.best / MODEL_DESCRIPTION).is_file():
            return self.best
        return None

    # ------------------------------------------------------------------ records
    def read_metrics(self) -> dict[str, Any] | None:
        """metrics.json, or None when the run has not finished."""
        if not self.metrics_file.is_file():
            return None
        return json.loads(self.metrics_file.read_text(encoding="utf-8"))

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        """metrics.json, atomically and last: its presence marks a finished run (`--resume` refuses, `--resume
        auto` stops)."""
        write_json_file(self.metrics_file, metrics)

    def finished_metrics(self, named: str) -> dict[str, Any]:
        """metrics.json of a finished run that published its model (what `pairs --run` and `decide` read), or one
        line naming the argument (`named`) and what to do."""
        metrics = self.read_metrics() if self.path.is_dir() else None
        if metrics is not None and self.has_published_model():
            return metrics
        if self.path.is_dir() and self.is_auto():
            raise ConfigError(self.auto_without_model(named))
        if self.path.is_dir() and is_run_folder(self.path) and metrics is None:
            raise ConfigError(unfinished_run_message(named, self.path))
        raise ConfigError(f"{named}: not a finished run with a model in it; pass the --output folder of a finished "
                          "`sentadapt adapt`")

    def auto_without_model(self, named: str) -> str:
        """Why a `--recipe auto` directory has no model, and what to use instead (it publishes one only when a
        candidate was chosen); `named`: how the message names it (`runs/x`, `--run runs/x`)."""
        try:
            metrics = self.read_metrics()
        except (OSError, ValueError):
            metrics = None
        if metrics is None:
            return (f"{named}: a --recipe auto run that has not finished (no metrics.json); continue it with "
                    f"sentadapt adapt --resume --output {self.path}, or use a finished candidate in "
                    f"{self.candidates}/")
        return (f"{named}: a --recipe auto run that kept the base model, so it publishes no model "
                f"({metrics.get('decision_reason', 'keep-base')}); use the base model "
                f"({metrics.get('base_model', 'see metrics.json')}), or one candidate's run in {self.candidates}/")

    def read_dev_outputs(self) -> dict[str, Any] | None:
        return self.read_json(self.dev_outputs_file)

    def write_dev_outputs(self, record: dict[str, Any]) -> None:
        self.write_json(self.dev_outputs_file, record)

    def read_json(self, path: Path) -> Any:
        """One of the directory's JSON records (e.g. `run.outcome_file`), or None when it is not written yet."""
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def write_json(self, path: Path, record: Any) -> None:
        """A compact JSON record (per-pair outputs can be large), atomically."""
        from sentadapt.storage.durable import json_text, write_text_atomically

        write_text_atomically(path, json_text(record))

    def read_config_text(self) -> str:
        return self.config_file.read_text(encoding="utf-8")

    def read_plan(self) -> dict[str, Any]:
        """auto.yaml as a mapping (empty when blank)."""
        import yaml

        return yaml.safe_load(self.auto_plan.read_text(encoding="utf-8")) or {}


def candidate_folder(name: str) -> str:
    """A candidate's folder relative to its auto run directory, as metrics.json records it."""
    return f"{CANDIDATES_DIR}/{name}"



def contents(folder: Path) -> list[str]:
    """The names in `folder` but a lock and the temporaries of an interrupted write (a run stopped while writing its
    config.yaml leaves only those: nothing a new run would replace), sorted."""
    return sorted(path.name for path in folder.iterdir() if path.name != LOCK_FILE
                  and not path.name.startswith(TMP_PREFIX))


def holds_anything(folder: Path) -> bool:
    return bool(contents(folder))


def is_run_folder(folder: Path) -> bool:
    """A folder `adapt --output` wrote, which `adapt --overwrite` may replace: its config.yaml names a recipe, or it
    holds a --recipe auto plan (a config.yaml of another tool is not taken for one)."""
    return RunDir(folder).is_auto() or _yaml_has_keys(folder / CONFIG_FILE, ("recipe",))


def is_export_folder(folder: Path) -> bool:
    """A folder `export` wrote, which `export --overwrite` may replace: its manifest names the format."""
    return _json_has_keys(folder / MANIFEST, ("format",))


def _yaml_has_keys(path: Path, keys: Sequence[str]) -> bool:
    import yaml

    return _has_keys(path, keys, yaml.safe_load, yaml.YAMLError)


def _json_has_keys(path: Path, keys: Sequence[str]) -> bool:
    return _has_keys(path, keys, json.loads, json.JSONDecodeError)


def _has_keys(path: Path, keys: Sequence[str], parse: Callable[[str], Any], invalid: type[Exception]) -> bool:
    """Whether `path` is a file that parses into a mapping holding every one of `keys` (an unreadable one does not)."""
    if not path.is_file():
        return False
    try:
        record = parse(path.read_text(encoding="utf-8"))
    except (invalid, UnicodeDecodeError):
        return False
    return isinstance(record, dict) and all(key in record for key in keys)
