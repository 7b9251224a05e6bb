"""Files on the Hugging Face Hub: whether it answers, a model's small files from the local cache or fetched.

Offline machines fail in seconds, not after the libraries' retries: every reader of the Hub asks `hub_is_reachable`
first, or takes a file from the cache (`cached_hub_file`) and fetches only what is missing (`hub_file`)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

HUB_PROBE_TIMEOUT_S = 3.0


def hub_is_reachable(timeout: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """A quick TCP probe of the Hub endpoint, so offline machines fail in seconds, not after retries."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in {"1", "true", "yes"}:
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or 443
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def cached_hub_file(model_id: str, filename: str) -> Path | None:
    """A file of a Hub model from the local Hugging Face cache; None when it is not there (never downloads)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    found = try_to_load_from_cache(model_id, filename)
    return Path(found) if isinstance(found, str) else None


def hub_file(model_id: str, filename: str) -> Path | None:
    """A small file of a Hub model: from the local cache, else downloaded when the Hub answers (so the first
    run judges a model as the later ones do); None when the repo has no such file or it cannot be fetched."""
    cached = cached_hub_file(model_id, filename)
    if cached is not None:
        return cached
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    try:
        return Path(hf_hub_download(model_id, filename, etag_timeout=HUB_PROBE_TIMEOUT_S))
    except (EntryNotFoundError, LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError):
        return None  # not in the repo, offline, or refused: the caller says what that means for it
