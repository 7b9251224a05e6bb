"""The ConSERT training-pooling probe's verdict is what its pre-registered rule gives from the stored cosines
(research/findings.md, "ConSERT's training pooling on a base that declares [CLS]")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).parent.parent / "results" / "pooling"


def test_the_probe_s_study_is_recomputed_from_its_stored_cosines() -> None:
    from research.experiments.pooling_probe import study

    stored = json.loads((RESULTS / "study.json").read_text())
    recomputed = study(RESULTS)
    assert recomputed["verdict"]["conditions"] == stored["verdict"]["conditions"] == {
        "raw": True, "applied": True, "cells": False}
    assert recomputed["verdict"]["adopt_auto"] is False
    for again, cell in zip(recomputed["cells"], stored["cells"], strict=True):
        for arm in ("mean", "cls"):
            assert again["arms"][arm]["raw"] == pytest.approx(cell["arms"][arm]["raw"], abs=1e-9)


def test_the_verdict_fails_on_one_cell_far_below_and_passes_without_it() -> None:
    from research.experiments.pooling_probe import verdict

    def cell(mean: float, cls: float) -> dict:
        return {"arms": {"mean": {"raw": mean, "applied": mean}, "cls": {"raw": cls, "applied": cls}}}

    assert verdict([cell(0.0, 1.0), cell(0.5, 0.1)])["adopt_auto"] is True
    assert verdict([cell(0.0, 1.0), cell(0.5, -0.1)])["conditions"]["cells"] is False
