"""Durable writes: the new content or the old one, never half, and no temporary file left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentadapt.storage.durable import replace_durably, write_text_atomically


def test_write_text_atomically_replaces_and_leaves_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    target.write_text("old")
    write_text_atomically(target, "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_a_failed_write_keeps_the_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "metrics.json"
    target.write_text("old")

    def full_disk(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomically(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_replace_durably_moves_folders_too(tmp_path: Path) -> None:
    staged = tmp_path / ".tmp-model"
    staged.mkdir()
    (staged / "weights").write_text("w")
    replace_durably(staged, tmp_path / "model")
    assert (tmp_path / "model" / "weights").read_text() == "w" and not staged.exists()
