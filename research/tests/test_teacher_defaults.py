"""The teacher-run options the product keeps or dropped follow what the pre-registered rules print from the stored
studies (research/findings.md wrote each rule before its runs)."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "distill"


def test_the_defaults_are_what_the_pre_registered_rules_print_from_the_stored_studies() -> None:
    """docs/decision.md and docs/teacher.md wrote each lever's adoption rule before its runs; the code applies them
    to the studies stored in research/results/distill, and the defaults follow what it prints."""
    from sentadapt.config.merging import REMOVED_SETTINGS
    from sentadapt.config.schema import TrainConfig

    from research.experiments.teacher_evidence import blend_lines

    alone = json.loads((RESULTS / "study-k3e.json").read_text())
    assert alone["teacher_evidence"]["default_on"] is False  # the held-out evidence stays opt-in
    # the dev-pair evidence and the teacher-led limit: what their studies, the check and the stress test give
    from research.experiments.dev_agreement import teacher_defaults

    defaults = teacher_defaults(RESULTS)
    # both rules say off: the options left the product (issue 59), which accepts only these values from saved runs
    assert {key: REMOVED_SETTINGS[key] for key in defaults} == defaults == {"teacher_evidence": "off",
                                                                         "teacher_risk": None}
    blend = json.loads((RESULTS / "study-k3eb.json").read_text())
    _, met = blend_lines(alone, blend, RESULTS)
    assert TrainConfig().teacher.blend == ("auto" if met else "1")



def test_the_faster_teacher_run_s_defaults_are_what_its_rules_say() -> None:
    """research/findings.md ("A faster teacher run") wrote each rule before its runs: a lever becomes the ConSERT
    teacher run's default iff every pairing × domain keeps its raw Δ within 0.1 of k3's; teacher_speed applies it to
    the stored studies. Both levers together (k3f) fell on all-MiniLM-L6-v2 ← all-mpnet-base-v2 in all four domains,
    so ConSERT keeps its shuffle + feature-cutoff views; bf16 alone (k3bf) held in all 8 cells, so a ConSERT teacher
    run defaults to `mixed_precision: auto` (and only ConSERT: nothing else was measured)."""
    from sentadapt.config.schema import TrainConfig
    from sentadapt.recipes import RECIPES
    from sentadapt.recipes.consert import ConsertConfig, ConsertRecipe
    from sentadapt.recipes.presets import TEACHER_DEFAULTS

    from research.experiments.teacher_speed import verdict

    both = verdict(RESULTS)
    assert len(both["cells"]) == 8 and not both["adopt"]
    assert sorted(cell["domain"] for cell in both["cells"] if not cell["held"]) == ["captions", "forums", "glosses",
                                                                                    "news"]
    for defaults in (TEACHER_DEFAULTS, ConsertRecipe.spec.tuned_base_defaults, ConsertRecipe.spec.train_defaults,
                     ConsertRecipe.spec.teacher_defaults):
        assert "views" not in defaults
    assert ConsertConfig().views == ("shuffle", "feature-cutoff") and TrainConfig().mixed_precision == "no"

    bf16 = verdict(RESULTS, candidate="k3bf")
    assert len(bf16["cells"]) == 8 and all(cell["held"] for cell in bf16["cells"]) and bf16["adopt"]
    assert ConsertRecipe.spec.teacher_defaults == {"mixed_precision": "auto"}
    assert "mixed_precision" not in TEACHER_DEFAULTS
    assert all(not RECIPES.get(name).spec.teacher_defaults for name in RECIPES.names() if name != "consert")
