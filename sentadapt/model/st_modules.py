"""What a sentence-transformers folder's JSON files say (modules.json, the Pooling config), without torch.

`st_format.py` builds modules from these files (it needs torch for the Dense layers); `presets.py` reads
them to tell a sentence-tuned base from a plain MLM one while `adapt` still validates its options, before
torch is imported.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from sentadapt.errors import ModelError
from sentadapt.storage.memory import same_file_once

POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_lasttoken": "lasttoken",
}
UNSUPPORTED_POOLING_FLAGS = (
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
)


def read_json(path: Path) -> Any:
    """A model folder's JSON file, parsed once per process while the file is unchanged: presets, prompts and the
    encoder each ask for modules.json and the Pooling config during one run (4 readers), which then costs one
    read (`same_file_once`). A copy each time, so no caller sees another's changes."""
    try:
        return copy.deepcopy(same_file_once(path, _parse_json))
    except FileNotFoundError:
        raise ModelError(f"{path}: missing (listed in modules.json)") from None
    except json.JSONDecodeError as error:
        raise ModelError(f"{path}: line {error.lineno}: invalid JSON ({error.msg})") from None


def _parse_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_modules(modules_file: Path) -> list[dict[str, Any]]:
    """modules.json's entries in pipeline order."""
    modules = read_json(modules_file)
    if not isinstance(modules, list) or not all(isinstance(module, dict) for module in modules):
        raise ModelError(f"{modules_file}: expected a JSON list of modules (idx, name, path, type)")
    return sorted(modules, key=lambda m: m.get("idx", 0))


def transformer_config(folder: Path) -> Path:
    """The config.json of a local model folder's transformer: in the folder modules.json names for its Transformer
    module (a sentence-transformers folder may keep it in a subfolder), else the folder's own."""
    modules_file = folder / "modules.json"
    modules = read_modules(modules_file) if modules_file.is_file() else []
    path = next((str(module.get("path", "")) for module in modules
                 if module_kind(module.get("type", "")) == "Transformer"), "")
    return folder / path / "config.json"


def module_kind(type_name: str) -> str:
    """'sentence_transformers.models.Pooling' and the v5+ module paths both map to 'Pooling'."""
    return type_name.rsplit(".", 1)[-1]


def read_pooling_mode(config_path: Path) -> str:
    """The token pooling of a Pooling module's config.json: cls, mean, max or lasttoken."""
    config = read_json(config_path)
    if "pooling_mode" in config:  # sentence-transformers >= 6: "mean" or a list of modes
        named = config["pooling_mode"]
        named = [named] if isinstance(named, str) else list(named)
        modes = [mode for mode in named if mode in POOLING_FLAGS.values()]
        unsupported = [mode for mode in named if mode not in POOLING_FLAGS.values()]
    else:  # the pooling_mode_* flags every earlier version writes
        modes = [mode for flag, mode in POOLING_FLAGS.items() if config.get(flag)]
        unsupported = [flag for flag in UNSUPPORTED_POOLING_FLAGS if config.get(flag)]
    if unsupported or len(modes) != 1:
        raise ModelError(
            f"{config_path}: pooling {', '.join(unsupported + modes) or 'none'} is not supported; "
            "sentadapt reads exactly one of cls, mean, max or lasttoken token pooling (pass --pooling to override)"
        )
    return modes[0]
