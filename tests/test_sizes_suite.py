"""docs/results.md's "Sizes" section is what the stored study renders, and the stored study follows from the tracked
per-pair cosines (results/sizes/cosines/): a stale section or record fails here (issue 45, issue 41 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.sizes_suite import POOLS, RESULTS, SECTION, section, study
from tools.doc_sections import wrap

REPO = Path(__file__).resolve().parents[1]
STORED = REPO / RESULTS / "study.json"


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads(STORED.read_text(encoding="utf-8"))


def test_the_sizes_section_is_what_the_stored_study_renders(stored: dict) -> None:
    assert wrap(SECTION, section(stored)) in (REPO / "docs" / "results.md").read_text(encoding="utf-8")


def test_the_stored_study_follows_from_the_stored_cosines(stored: dict) -> None:
    # the test Δs do not depend on the bootstrap (the decision's risk does): recomputed without it
    fresh = study(REPO / RESULTS, stored["seeds"], resamples=0, pools=REPO / POOLS)
    keys = [(c["domain"], c["variant"], c["seed"]) for c in stored["cells"]]
    assert [(c["domain"], c["variant"], c["seed"]) for c in fresh["cells"]] == keys
    for old, new in zip(stored["cells"], fresh["cells"]):
        assert new["base_test"] == pytest.approx(old["base_test"], abs=1e-9)
        assert new["test_delta"] == pytest.approx(old["test_delta"], abs=1e-9)


def test_the_figures_quoted_in_docs_sizes_md_are_the_stored_study_s(stored: dict) -> None:
    """docs/sizes.md quotes the teacher pairing's means; they must be the study's (no hand-kept copy drifts)."""
    labels = ["384 fp32", "384 int8", "384 binary", "192 fp32", "192 int8", "96 fp32", "96 int8"]
    text = (REPO / "docs" / "sizes.md").read_text(encoding="utf-8")
    for variant, name in (("teacher", "without `--matryoshka`"), ("teacher-m", "`--matryoshka 384,192,96`")):
        cells = [c for c in stored["cells"] if c["variant"] == variant]
        means = [sum(c["test_delta"][label] for c in cells) / len(cells) for label in labels]
        row = f"| {name} | " + " | ".join(f"{mean:+.2f}".replace("-", "−") for mean in means) + " |"
        assert row in text, row


def test_the_teacher_evidence_section_is_what_its_stored_outputs_render(tmp_path: Path) -> None:
    """Issue 41 item 6: docs/results.md's "teacher-evidence" section regenerates from results/distill/ (tracked
    per-pair outputs) without training; rendered into a copy of the document, nothing changes (~40 s). It runs in
    a copy of results/distill/ (the study rewrites its study-*.json), so the repository is left as it was."""
    import os
    import shutil
    import subprocess
    import sys

    shutil.copytree(REPO / "results" / "distill", tmp_path / "results" / "distill")
    copy = tmp_path / "results.md"
    original = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    copy.write_text(original, encoding="utf-8")
    tracked = {path: path.read_bytes() for path in (REPO / "results" / "distill").glob("study-*.json")}
    subprocess.run([sys.executable, "-m", "experiments.teacher_evidence", "--render", "--doc", str(copy)],
                   cwd=tmp_path, check=True, capture_output=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert copy.read_text(encoding="utf-8") == original
    assert {path: path.read_bytes() for path in tracked} == tracked
