"""bench_teacher_run's `one-pass` command: its cache makes the run keep one padded pass a step while `auto` picks what
the default picked (the flattened timings keep each precision's sum)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.bench_teacher_run import one_pass_timings
from sentadapt.train.pass_costs import MAX_PASS_COST, arithmetic_from_timings


def test_one_pass_keeps_the_precision_and_costs_a_pass_the_most(tmp_path: Path) -> None:
    seconds = {"no": [0.08, 0.23, 0.19, 0.69, 1.3], "bf16": [0.05, 0.11, 0.1, 0.33, 0.62]}
    (tmp_path / "cache-default" / "pass-costs").mkdir(parents=True)
    record = {"key": {"cpu": "x"}, "shapes": [[8, 16]], "seconds": seconds, "timed": "2026-12-07"}
    (tmp_path / "cache-default" / "pass-costs" / "pass-1.json").write_text(json.dumps(record))

    one_pass_timings(tmp_path / "cache-default", tmp_path / "cache-one-pass")

    flat = json.loads((tmp_path / "cache-one-pass" / "pass-costs" / "pass-1.json").read_text())
    assert {name: value for name, value in flat.items() if name != "seconds"} == {
        name: value for name, value in record.items() if name != "seconds"}
    default = arithmetic_from_timings("auto", True, seconds)
    one_pass = arithmetic_from_timings("auto", True, flat["seconds"])
    assert (default.precision, one_pass.precision) == ("bf16", "bf16")
    assert default.pass_cost < MAX_PASS_COST and one_pass.pass_cost == MAX_PASS_COST


def test_one_pass_stops_where_the_default_timed_nothing(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^one-pass: the default's run timed no training pass \(nothing in .*"
                                         r"pass-costs\): on a GPU or with several processes nothing is chunked"):
        one_pass_timings(tmp_path / "cache-default", tmp_path / "cache-one-pass")
    assert not (tmp_path / "cache-one-pass").exists()
