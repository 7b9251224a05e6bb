"""research/results.md's "Sizes" section is what the stored study renders, and the stored study follows from the tracked
per-pair cosines (research/results/sizes/cosines/): a stale section or record fails here (issue 45, issue 41 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tools.doc_sections import wrap

from research.experiments.sizes_suite import POOLS, RESULTS, SECTION, section, study

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / RESULTS / "study.json"


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads(STORED.read_text(encoding="utf-8"))


def test_the_sizes_section_is_what_the_stored_study_renders(stored: dict) -> None:
    assert wrap(SECTION, section(stored)) in (REPO / "research" / "results.md").read_text(encoding="utf-8")


def test_the_stored_study_follows_from_the_stored_cosines(stored: dict) -> None:
    # the test Δs do not depend on the bootstrap (the decision's risk does): recomputed without it
    fresh = study(REPO / RESULTS, stored["seeds"], resamples=0, pools=REPO / POOLS)
    keys = [(c["domain"], c["variant"], c["seed"]) for c in stored["cells"]]
    assert [(c["domain"], c["variant"], c["seed"]) for c in fresh["cells"]] == keys
    for old, new in zip(stored["cells"], fresh["cells"]):
        assert new["base_test"] == pytest.approx(old["base_test"], abs=1e-9)
        assert new["test_delta"] == pytest.approx(old["test_delta"], abs=1e-9)


def test_the_teacher_evidence_section_is_what_its_stored_outputs_render(tmp_path: Path) -> None:
    """Issue 41 item 6: research/results.md's "teacher-evidence" section regenerates from research/results/distill/ (tracked
    per-pair outputs) without training; rendered into a copy of the document, nothing changes (~40 s). It runs in
    a copy of research/results/distill/ (the study rewrites its study-*.json), so the repository is left as it was."""
    import os
    import shutil
    import subprocess
    import sys
    import time

    shutil.copytree(REPO / "research" / "results" / "distill", tmp_path / "research" / "results" / "distill")
    copy = tmp_path / "results.md"
    original = (REPO / "research" / "results.md").read_text(encoding="utf-8")
    copy.write_text(original, encoding="utf-8")
    stored = REPO / "research" / "results" / "distill"
    written = tmp_path / "research" / "results" / "distill"  # the study rewrites its study-*.json here
    started = time.time()
    subprocess.run([sys.executable, "-m", "research.experiments.teacher_evidence", "--render", "--doc", str(copy)],
                   cwd=tmp_path, check=True, capture_output=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert copy.read_text(encoding="utf-8") == original
    rewritten = sorted(path.name for path in written.glob("study-*.json") if path.stat().st_mtime >= started - 1)
    assert {"study-k3.json", "study-k3e.json"} <= set(rewritten)  # recomputed, not merely read back

    def content(path: Path) -> str:  # a study as recomputed: all but when, where and with which argv it ran
        record = json.loads(path.read_text(encoding="utf-8"))
        return json.dumps({key: value for key, value in record.items() if key not in ("finished", "machine",
                                                                                     "command")}, sort_keys=True)

    assert {name: content(written / name) for name in rewritten} == {name: content(stored / name)
                                                                      for name in rewritten}


def test_the_teacher_figures_quoted_in_teacher_md_are_the_stored_study_s() -> None:
    """docs/teacher.md's "Which teacher" table quotes the default's distillation study (research/results/distill/study-k3.json,
    which the staleness test above re-derives); a hand-kept copy must not drift. README.md's rows of the same study:
    research/experiments/doc_figures.py (test_doc_figures.py)."""
    from research.experiments.distill_suite import headline

    result = json.loads((REPO / "research" / "results" / "distill" / "study-k3.json").read_text(encoding="utf-8"))
    teacher = (REPO / "docs" / "teacher.md").read_text(encoding="utf-8")
    big, small = headline(result, "l6-mpnet"), headline(result, "l3-l6")
    share = round(100 * big["news_raw"] / big["news_lead"])
    assert (f"| all-MiniLM-L6-v2 ← all-mpnet-base-v2 | {big['lead']:+.2f} | {big['raw']:+.2f} | "
            f"{big['applied_100']:+.2f} / {big['applied_200']:+.2f} | news: lead {big['news_lead']:+.2f}, "
            f"Δ {big['news_raw']:+.2f} ({share} %), used in {big['news_used']} of {big['news_cells']} draws |"
            ) in teacher
    assert (f"| paraphrase-MiniLM-L3-v2 ← all-MiniLM-L6-v2 | {small['lead']:+.2f} | {small['raw']:+.2f} | "
            f"{small['applied_100']:+.2f} / {small['applied_200']:+.2f} | news: lead {small['news_lead']:+.2f}, "
            f"Δ {small['news_raw']:+.2f} |") in teacher


def test_the_social_figures_quoted_in_teacher_md_are_the_stored_study_s() -> None:
    result = json.loads((REPO / "research" / "results" / "distill" / "study-k3e-social.json").read_text(encoding="utf-8"))
    cells = [c for c in result["cells"] if c["pairing"] == "l6-mpnet" and c["size"] == 200]

    def mean(key: str) -> float:
        return sum(c[key] for c in cells) / len(cells)

    share = round(100 * mean("raw") / mean("teacher_lead"))
    used = sum(c["applied"] != 0 for c in cells)
    text = " ".join((REPO / "docs" / "teacher.md").read_text(encoding="utf-8").split())
    assert (f"leads all-MiniLM-L6-v2 by {mean('teacher_lead'):+.2f} on the test pairs and the student gains "
            f"{mean('raw'):+.2f} ({share} %)") in text
    assert (f"confirmed the gain in {used} of {len(cells)} draws at 200 dev pairs ({mean('applied'):+.2f} "
            "applied)") in text


def test_matryoshka_s_default_weights_are_what_the_weighting_rule_reads_from_the_stored_study(stored: dict) -> None:
    """research/findings.md, "Weighting the full size": the rule, committed before the teacher-mw runs, is applied by
    sizes_suite.weighting to the stored study; `--matryoshka` without weights follows its verdict."""
    from sentadapt.recipes.matryoshka import Matryoshka

    from research.experiments.sizes_suite import weighting

    met = weighting(stored)[1]
    assert met is not None, "the teacher-mw runs are missing from the stored study"
    assert Matryoshka.of((384, 192, 96), ()).weights == ((2.0, 1.0, 1.0) if met else (1.0, 1.0, 1.0))
