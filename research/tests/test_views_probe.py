"""research/experiments/views_probe.py's corpora: general sentences added as an anchor never repeat a corpus line or bring in
a pool sentence, and are as many as the corpus lines (issue 41, item 3)."""

from __future__ import annotations

from research.experiments.domain_data import key
from research.experiments.views_probe import with_anchor


def test_the_anchor_adds_as_many_general_sentences_none_a_corpus_line_or_a_pool_sentence() -> None:
    lines = ["a headline one", "a headline two", "a headline three"]
    general = ["A dog runs .", "a headline two", "Two men talk .", "A dog runs .", "Kids play outside .", "A cat ."]
    excluded = {key("two men talk")}  # a pool sentence, normalised (case and punctuation ignored)
    corpus = with_anchor(lines, general, excluded, seed=0)
    assert corpus[:3] == lines
    added = corpus[3:]
    assert len(added) == 3 and len(set(added)) == 3
    assert set(added) <= {"A dog runs .", "Kids play outside .", "A cat ."}
    assert with_anchor(lines, general, excluded, seed=0) == corpus  # seeded


def test_a_short_supply_adds_what_there_is() -> None:
    assert with_anchor(["x one", "x two", "x three"], ["only one ."], set()) == ["x one", "x two", "x three",
                                                                                  "only one ."]
