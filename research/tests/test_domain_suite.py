"""research/experiments/domain_suite.py's pure parts: the renderer (cells, averages, the verdict applied), the verdict read from
metrics.json, the variant settings; and, marked shared, the `--quick` smoke run end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import needs_shared

from research.experiments import domain_render, domain_suite

REPO = Path(__file__).resolve().parents[2]


def _score(delta: float, low: float, high: float) -> dict[str, object]:
    return {"value": 0.0, "delta": delta, "ci": [low, high], "ci_excludes_0": low > 0 or high < 0}


def _run(kind: str, test: dict, ap: dict, dev: float, decision: str, seconds: float = 60.0,
         rss: float = 1024.0) -> dict[str, object]:
    return {"kind": kind, "test": test, "test_ap": ap, "dev": {"delta": dev}, "decision": decision,
            "train_seconds": seconds, "peak_rss_mb": rss,
            "command": f"python -m sentadapt adapt runs/domain/data/{'X'}/corpus.txt"}


def _results() -> dict[str, object]:
    def base(test: float, dev: float, ap: float) -> dict[str, object]:
        return {"kind": "base", "test": {"value": test}, "dev": {"value": dev}, "test_ap": {"value": ap}}

    news = {"base": base(80.0, 82.0, 90.0),
            "consert": _run("sentadapt", _score(1.5, 0.5, 2.5), _score(0.5, -0.2, 1.2), 0.8, "use-adapted"),
            "simcse": _run("peer", _score(0.5, -0.25, 1.25), _score(0.25, -0.5, 1.0), 0.1, "keep-base", 30.0)}
    forums = {"base": base(70.0, 71.0, 85.0),
              "consert": _run("sentadapt", _score(-0.5, -1.0, 0.0), _score(-1.0, -2.0, 0.0), 0.2, "keep-base",
                              120.0, 2048.0),
              "simcse": _run("peer", _score(1.5, 0.5, 2.5), _score(0.75, 0.25, 1.25), 0.9, "use-adapted", 30.0)}
    variant_news = {"base": base(80.0, 82.0, 90.0),
                    "consert": _run("sentadapt", _score(-0.25, -0.75, 0.25), _score(0.0, -0.5, 0.5), -0.1,
                                    "keep-base")}
    eval_entry = {"seconds": 10.0, "peak_rss_mb": 500.0,
                  "command": "python -m sentadapt eval M runs/domain/data/news/test.jsonl --json e-news.json"}
    plan = {"steps": 100, "batch_size": 64, "max_length": 64, "eval_every": 25, "dev_size": 100}
    return {
        "machine": "x86_64, 2 cores", "job_seconds": 600.0,
        "data": {"command": "python bench/domain_data.py --shared ../shared --out runs/domain/data --seed 0",
                 "manifest": {"domains": {
                     "news": {"subsets_used": ["headlines", "deft-news"], "pairs": 2783, "test": 1113,
                              "pairclass": {"positive": 273, "negative": 296}, "dev_pool": 200, "corpus": 2701,
                              "corpus_from_snli": 0},
                     "forums": {"subsets_used": ["deft-forum"], "pairs": 1625, "test": 650,
                                "pairclass": {"positive": 122, "negative": 242}, "dev_pool": 200, "corpus": 1319,
                                "corpus_from_snli": 0}}}},
        "variants": {
            "lr1e-5": {"plan": plan, "models": {"tiny": {"news": {"rows": variant_news, "eval": eval_entry}}}},
            "default": {"plan": plan, "finished": "2026-11-24 10:00 UTC", "models": {"tiny": {
                "news": {"rows": news, "eval": eval_entry}, "forums": {"rows": forums, "eval": eval_entry}}}},
        },
    }


def test_render_cells_averages_verdict_applied_and_variant_rows() -> None:
    text = domain_render.render(_results(), "python -m research.experiments.domain_suite")
    assert ("| run | news test Δ | forums test Δ | news dev Δ | forums dev Δ | avg test Δ | "
            "avg test Δ, verdict applied | train time (all domains) | peak RSS |") in text
    assert "| base model (Spearman × 100) | 80.00 | 70.00 | 82.00 | 71.00 | 75.00 | – | – | – |" in text
    # ConSERT: +1.5 used on news, -0.5 kept on forums → mean +0.50, verdict applied (1.5 + 0) / 2 = +0.75
    assert ("| sentadapt ConSERT | +1.50 [+0.50, +2.50] * | -0.50 [-1.00, +0.00] | +0.80 use | +0.20 keep | "
            "+0.50 | +0.75 | 3.0 min | 2.00 GB |") in text
    assert ("| peer: ST SimCSE | +0.50 [-0.25, +1.25] | +1.50 [+0.50, +2.50] * | +0.10 keep | +0.90 use | "
            "+1.00 | +0.75 | 1.0 min | 1.00 GB |") in text
    # a variant is an extra row; the domain it did not run is a dash, its averages over the domains it ran
    assert ("| sentadapt ConSERT — variant `lr1e-5` | -0.25 [-0.75, +0.25] | – | -0.10 keep | – | -0.25 | +0.00 | "
            "1.0 min | 1.00 GB |") in text
    assert ("Best sentadapt recipe by average test Δ: **sentadapt ConSERT** +0.50 (verdict applied +0.75); vs "
            "peer: ST SimCSE +1.00 (difference -0.50); worst domain with the verdict applied: forums +0.00.") in text
    assert "| base model (AP × 100) | 90.00 | 85.00 | 87.50 |" in text
    assert "| sentadapt ConSERT | +0.50 [-0.20, +1.20] | -1.00 [-2.00, +0.00] | -0.25 |" in text
    assert "| news | headlines, deft-news | 2783 | 1113 | 273/296 | 200 | 2701 (0) |" in text
    assert "python -m sentadapt eval M runs/domain/data/DOMAIN/test.jsonl --json e-DOMAIN.json" in text
    # the data command as a results.json from before the bench/experiments split stored it, rendered as a module
    assert "\npython -m research.experiments.domain_data --shared ../shared --out runs/domain/data --seed 0\n" in text
    assert text.startswith("## Domain adaptation suite\n\nGenerated by `python -m research.experiments.domain_suite`, finished "
                           "2026-11-24 10:00 UTC (x86_64, 2 cores); its jobs took 10 min. 100 optimizer steps")


def test_overall_table_ranks_default_rows_and_measures_the_distance_to_the_target() -> None:
    lines = domain_render.overall(_results())
    # default variant only (the lr1e-5 variant row is not a default), ranked by the average over its cells
    assert lines[:4] == ["| run (default settings) | avg test Δ over 2 model × domain cells | verdict applied | "
                         "false use (use, but test Δ ≤ 0) |",
                         "|---|---:|---:|---:|", "| peer: ST SimCSE | +1.00 | +0.75 | 0 of 2 |",
                         "| sentadapt ConSERT | +0.50 | +0.75 | 0 of 2 |"]
    assert lines[-1] == ("Best default recipe over all cells: **sentadapt ConSERT** +0.50 (target ≥ +1.00: not met, "
                         "0.50 short); with the verdict applied its worst cell is tiny forums +0.00 (target: none "
                         "below −0.20).")
    assert "### Over all models" in domain_render.render(_results(), "python -m research.experiments.domain_suite")


def test_variant_settings_become_set_options_or_flags() -> None:
    suite = domain_suite
    assert suite.parse_extra(["consert:lr=1e-5", "consert:--patience=20", "simcse:--lr=1e-5", "sg-opt:--no-x"]) == {
        "consert": ["--set", "lr=1e-5", "--patience", "20"], "simcse": ["--lr", "1e-5"], "sg-opt": ["--no-x"]}
    with pytest.raises(SystemExit) as caught:
        suite.parse_extra(["simcse:lr=1e-5"])
    assert str(caught.value) == ("--set-extra 'simcse:lr=1e-5': peers take bench/peers.py flags (e.g. "
                                 "simcse:--lr=1e-5), not --set keys")
    with pytest.raises(SystemExit) as caught:
        suite.parse_extra(["bert:lr=1"])
    assert str(caught.value).startswith("--set-extra 'bert:lr=1': expected RECIPE:KEY=VALUE or RECIPE:--FLAG[=VALUE]")


def _teacher_results() -> dict[str, object]:
    """Two grid settings on dev and a final run on test: news used (+0.60 on test), forums kept (raw −0.40)."""
    def dev(delta: float, decision: str, cached: bool) -> dict[str, object]:
        return {"base": 80.0, "best": 80.0 + delta, "delta": delta, "best_step": 50, "decision": decision,
                "risk": 0.1 if decision == "use-adapted" else 0.5, "teacher_score": 84.0, "train_seconds": 120.0,
                "command": "-m sentadapt adapt runs/teacher/data/news/corpus.txt --teacher L6",
                "teacher": {"sentences": 100, "cached": cached, "encode_seconds": 0.0 if cached else 2.5}}

    def final(base: float, teacher: float, delta: float, decision: str) -> dict[str, object]:
        score = {"value": base + delta, "delta": delta, "ci": [delta - 0.3, delta + 0.3],
                 "ci_excludes_0": abs(delta) > 0.3}
        return {"base": {"test": {"value": base}}, "teacher": {"test": {"value": teacher}},
                "student": {"test": score}, "decision": decision, "risk": 0.1, "dev_delta": 1.5,
                "eval_command": "python -m sentadapt eval L3 L6 runs/teacher/data/news/test.jsonl"}

    domains = dict.fromkeys(("news", "captions", "forums", "glosses"))
    grid = {"a": {"what": "setting a", "set": [], "steps": 100, "batch_size": 64,
                  "domains": {d: dev(1.5, "use-adapted", d != "news") for d in domains}},
            "b": {"what": "setting b", "set": [], "steps": 100, "batch_size": 64,
                  "domains": {d: dev(0.5, "keep-base", True) for d in domains}}}
    finals = {"news": final(80.0, 84.0, 0.6, "use-adapted"), "captions": final(90.0, 89.0, 0.2, "use-adapted"),
              "forums": final(77.0, 80.0, -0.4, "keep-base"), "glosses": final(83.0, 84.0, 0.0, "keep-base")}
    return {"grid": grid, "final": {"setting": "a", "domains": finals},
            "speed": {"sentences": 1000, "batch_size": 128, "max_length": 64, "repeats": 3,
                      "best": {"paraphrase-minilm-l3-v2": 2.0, "all-minilm-l6-v2": 4.0}, "ratio": 2.0},
            "cache": {d: {"sentences": 100, "encoded_by": ["a"] if d == "news" else [],
                          "encode_seconds": [2.5] if d == "news" else [], "cache_hits": 1, "runs": 2}
                      for d in domains}}


def test_teacher_section_applies_the_decision_and_the_gap_share() -> None:
    from research.experiments import teacher_suite

    results = _teacher_results()
    assert teacher_suite.choose(results["grid"]) == "a"
    text = teacher_suite.render(results, "python -m research.experiments.teacher_suite --final")
    # news: 0.6 of a 4-point gap = 15 %; captions: the teacher is behind, no share; forums kept: applied 0
    assert "| news | 80.00 | 84.00 | 80.60 | +0.60 [+0.30, +0.90] * | +0.60 | 15 % | 15 % | +1.50 |" in text
    assert "| captions | 90.00 | 89.00 | 90.20 | +0.20 [-0.10, +0.50] | +0.20 | – | – |" in text
    assert "| forums | 77.00 | 80.00 | 76.60 | -0.40 [-0.70, -0.10] * | +0.00 | -13 % | 0 % |" in text
    assert "+0.20, not met, 0.30 short; no domain below −0.20: worst forums +0.00, met. Raw average +0.10." in text
    assert "**setting a** (chosen)" in text and "| +1.50 | +1.50 | 8.0 min |" in text
    assert "encodes 2.00× as fast" in text and "news 100 sentences: 2.5 s; cache hit in 1 of 2 runs" in text


@pytest.mark.slow  # minutes: opt in with `pytest -m slow`
@pytest.mark.shared
@needs_shared()
def test_quick_suite_end_to_end(tmp_path: Path) -> None:
    """~2-3 min on 2 cores (ConSERT and SimCSE 3 steps each, one eval of 650 + 364 + 100 pairs)."""
    work = tmp_path / "work"
    done = subprocess.run([sys.executable, "-m", "research.experiments.domain_suite", "--quick", "--work", str(work)], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((work / "results.json").read_text())
    rows = results["variants"]["default"]["models"]["paraphrase-minilm-l3-v2"]["forums"]["rows"]
    assert list(rows) == ["base", "consert", "simcse"]
    assert rows["consert"]["decision"] in ("use-adapted", "keep-base")
    assert rows["simcse"]["test"]["ci"] is not None and 0 < rows["base"]["test"]["value"] < 100
    text = (work / "domain-suite.md").read_text()
    assert "| sentadapt ConSERT |" in text and "| peer: ST SimCSE |" in text
