"""sentadapt.tables: result tables as plain data — tones for the CLI's colours, aligned text for everyone else."""

from __future__ import annotations

from sentadapt.tables import BAD, GOOD, Cell, TextTable, signed


def test_a_table_prints_as_aligned_text_with_its_title_and_caption() -> None:
    table = TextTable("Scores", caption="95 % CIs")
    table.column("task")
    table.column("model\n[mean]", right=True)
    table.row("stsb", "82.41")
    table.row(Cell("avg", "strong"), Cell("9.50", GOOD))
    assert str(table) == "Scores\ntask  model [mean]\nstsb         82.41\navg           9.50\n95 % CIs"


def test_a_change_carries_its_sign_and_tone() -> None:
    assert signed(0.4242) == Cell("+0.42", GOOD)
    assert signed(-0.1) == Cell("-0.10", BAD)
    assert signed(0.0) == Cell("+0.00", "")
