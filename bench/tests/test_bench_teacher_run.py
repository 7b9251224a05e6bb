"""bench_teacher_run's reshaped caches (`one-pass`: one padded pass a step; `fixed-cost`: the pass cost fixed before
issue 84), each keeping the precision `auto` picked for the default (the reshaped timings keep each precision's sum),
and `--pass-penalty`'s environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.bench_teacher_run import PASS_PENALTY, commands, reshaped_timings
from sentadapt.options import PASS_OVERHEAD_TOKENS
from sentadapt.train.pass_costs import MAX_PASS_COST, arithmetic_from_timings

SECONDS = {"no": [0.08, 0.23, 0.19, 0.69, 1.3], "bf16": [0.05, 0.11, 0.1, 0.33, 0.62]}


def _default_cache(tmp_path: Path) -> dict[str, object]:
    (tmp_path / "cache-default" / "pass-costs").mkdir(parents=True)
    record = {"key": {"cpu": "x"}, "shapes": [[8, 16]], "seconds": SECONDS, "timed": "2026-12-07"}
    (tmp_path / "cache-default" / "pass-costs" / "pass-1.json").write_text(json.dumps(record))
    return record


@pytest.mark.parametrize(("command", "pass_cost"), [("one-pass", MAX_PASS_COST), ("fixed-cost", PASS_OVERHEAD_TOKENS)])
def test_a_reshaped_cache_keeps_the_precision_and_sets_the_pass_cost(tmp_path: Path, command: str,
                                                                     pass_cost: int) -> None:
    record = _default_cache(tmp_path)

    reshaped_timings(tmp_path / "cache-default", tmp_path / f"cache-{command}", command)

    written = json.loads((tmp_path / f"cache-{command}" / "pass-costs" / "pass-1.json").read_text())
    assert {name: value for name, value in written.items() if name != "seconds"} == {
        name: value for name, value in record.items() if name != "seconds"}
    default = arithmetic_from_timings("auto", True, SECONDS)
    reshaped = arithmetic_from_timings("auto", True, written["seconds"])
    assert (default.precision, reshaped.precision) == ("bf16", "bf16")
    assert default.pass_cost not in (MAX_PASS_COST, PASS_OVERHEAD_TOKENS) and reshaped.pass_cost == pass_cost
    assert sum(written["seconds"]["no"]) == pytest.approx(sum(SECONDS["no"]))


def test_a_reshaped_cache_stops_where_the_default_timed_nothing(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^fixed-cost: the default's run timed no training pass \(nothing in .*"
                                         r"pass-costs\): on a GPU or with several processes nothing is chunked, so "
                                         r"there is no fixed-cost run to compare$"):
        reshaped_timings(tmp_path / "cache-default", tmp_path / "cache-fixed-cost", "fixed-cost")
    assert not (tmp_path / "cache-fixed-cost").exists()


def test_the_pass_penalty_comes_first_on_every_command_s_path(tmp_path: Path) -> None:
    old = tmp_path / "old"
    slowed = commands(tmp_path, old, tmp_path / "work", penalty=0.5)
    assert slowed["default"][1]["PYTHONPATH"] == str(PASS_PENALTY)
    assert slowed["old"][1]["PYTHONPATH"].split(":") == [str(PASS_PENALTY), str(old.resolve())]
    assert {command[1]["PASS_PENALTY_S"] for command in slowed.values()} == {"0.5"}
    plain = commands(tmp_path, old, tmp_path / "work")
    assert "PASS_PENALTY_S" not in plain["default"][1] and plain["old"][1]["PYTHONPATH"] == str(old.resolve())
