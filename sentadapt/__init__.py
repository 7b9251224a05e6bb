"""sentadapt: adapt sentence-embedding models to a domain with contrastive learning.

The public calls (`sentadapt.evaluate`, `sentadapt.export`, ... : every name in `sentadapt.api.__all__`) are
imported on first use, so `import sentadapt` and the CLI's `--help` stay light (no torch)."""

import importlib as _importlib
from typing import Any as _Any

__version__ = "0.1.0"


def __getattr__(name: str) -> _Any:
    """`sentadapt.evaluate` & co.: imported from sentadapt.api the first time one is asked for."""
    if name.startswith("_"):
        raise AttributeError(f"module 'sentadapt' has no attribute '{name}'")
    api = _importlib.import_module("sentadapt.api")
    if name in globals():  # a subpackage (sentadapt.train, ...) that importing the API has just bound
        return globals()[name]
    if name not in getattr(api, "__all__", ()):  # also while sentadapt.api is still being imported
        raise AttributeError(f"module 'sentadapt' has no attribute '{name}'")
    value = getattr(api, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_importlib.import_module("sentadapt.api").__all__})
