"""sentadapt.text_tables: result tables as plain data — tones for the CLI's colours, aligned text for everyone else."""

from __future__ import annotations

from sentadapt.text_tables import BAD, GOOD, Cell, TextTable, signed


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


def test_a_table_too_wide_shortens_names_and_never_cuts_numbers() -> None:
    from sentadapt.text_tables import TextTable, fit, shorten_name

    assert shorten_name("../shared/models/paraphrase-minilm-l3-v2", 14) == "paraphr…-l3-v2"
    assert shorten_name("runs/consert/best", 14) == "…/consert/best"
    assert shorten_name("short", 14) == "short"
    table = TextTable("t")
    table.column("metric")
    for name in ("../shared/models/paraphrase-minilm-l3-v2", "../shared/models/all-minilm-l6-v2"):
        table.column(f"{name}\n[mean]", right=True)
    table.row("spearman", "76.04 [63.91, 84.42]", "80.39 [68.55, 87.85]")
    assert fit(table, 200) is table  # it fits: nothing changes
    narrow = fit(table, 50)
    assert [c.header for c in narrow.columns] == ["metric", "paraphra…m-l3-v2\n[mean]", "all-minilm-l6-v2\n[mean]"]
    assert [c.text for c in narrow.rows[0].cells] == ["spearman", "76.04\n[63.91, 84.42]", "80.39\n[68.55, 87.85]"]
