"""Every stored study the docs quote at the default decision was computed at the product's defaults (issue 83)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research.experiments.study_settings import QUOTED, product_settings, stale


@pytest.mark.parametrize("path", sorted(QUOTED), ids=str)
def test_every_quoted_study_ran_at_the_products_defaults(path: Path) -> None:
    assert stale(path, json.loads(path.read_text(encoding="utf-8")), QUOTED[path]) is None


def test_a_study_made_before_settings_were_recorded_or_at_another_limit_is_stale() -> None:
    """What the check said of dev-size-power.json before issue 83 re-ran it: no settings (computed at 0.20)."""
    path = Path("research/results/distill/dev-size-power.json")
    assert stale(path, {"sizes": [50], "cells": []}, "dev_size_power") == (
        f"{path}: records no settings (made before studies recorded them), but the product's defaults are "
        f"{product_settings()}; re-run it: python -m research.experiments.dev_size_power --study")
    older = {**product_settings(), "max_risk": 0.1}  # issue 68's limit of one look
    assert stale(path, {"settings": older}, "dev_size_power").startswith(f"{path}: ran with {older}, but")
    assert stale(path, {"settings": product_settings()}, "dev_size_power") is None
