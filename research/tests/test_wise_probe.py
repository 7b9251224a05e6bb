"""The WiSE-FT probe's verdict is what its pre-registered rule prints from the stored cells (research/findings.md)."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).parent.parent / "results" / "wise"


def test_the_probe_s_verdict_follows_from_its_stored_cells() -> None:
    from research.experiments.wise_probe import verdict

    stored = json.loads((RESULTS / "study.json").read_text())
    assert verdict(stored["cells"]) == stored["verdict"]
    assert stored["verdict"]["worth_a_feature"] is False
    for domain in ("news", "captions", "forums", "glosses"):
        scored = json.loads((RESULTS / "l6-mpnet" / domain / "cosines.json").read_text())
        assert scored["alpha_1_vs_k3_last"] < 1e-3  # the reruns are k3's runs
