"""research/experiments/domain_data.py: the domain-adaptation splits (corpus / dev / test) built from ../shared, without
leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sentadapt.data.pair_files import read_labelled_pairs, read_scored_pairs
from tests.conftest import SHARED, needs_shared

from research.experiments import domain_data

REPO = Path(__file__).resolve().parents[2]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_key_ignores_case_whitespace_and_tokenization() -> None:
    assert domain_data.key("A man  is playing .") == domain_data.key("a man is playing.")
    assert domain_data.key("He do n't know") == domain_data.key("he don't know")
    assert domain_data.key("a man") != domain_data.key("a woman")


def test_check_no_leak_catches_a_planted_test_sentence_in_the_corpus() -> None:
    pair = domain_data.Pair
    test = [pair("A dog runs.", "A cat sleeps.", 1.0, "images")]
    dev = [pair("A man cooks.", "A woman cooks.", 3.0, "images")]
    domain_data.check_no_leak(["a bird flies .", "a man sings ."], dev, test, "captions")  # clean: no error
    with pytest.raises(domain_data.LeakError) as caught:
        domain_data.check_no_leak(["a bird flies .", "a  CAT sleeps ."], dev, test, "captions")
    assert str(caught.value) == "captions: test sentence 'A cat sleeps.' is also in the corpus"
    with pytest.raises(domain_data.LeakError) as caught:
        domain_data.check_no_leak(["a woman cooks"], dev, test, "captions")
    assert str(caught.value) == "captions: dev sentence 'A woman cooks.' is also in the corpus"
    shared_dev = [*dev, pair("a dog runs", "A horse jumps.", 2.0, "images")]
    with pytest.raises(domain_data.LeakError) as caught:
        domain_data.check_no_leak(["a bird flies"], shared_dev, test, "captions")
    assert str(caught.value) == ("captions: dev pair ('a dog runs', 'A horse jumps.') shares the sentence 'a dog runs' "
                                 "with the test pairs")


def test_split_domain_keeps_test_sentences_out_of_dev_and_corpus() -> None:
    # a chain of 1500 pairs (i, i + 1): each sentence is in two pairs, so test shares sentences with the rest
    pairs = [domain_data.Pair(f"sentence {i}", f"Sentence {i + 1} .", float(i % 6), "s") for i in range(1500)]
    split = domain_data.split_domain("toy", pairs, [], seed=0)
    assert len(split.test) == 600 and len(split.dev_pool) == 200
    test_keys = {k for p in split.test for k in p.sentence_keys()}
    assert not test_keys & {k for p in split.dev_pool for k in p.sentence_keys()}
    assert not test_keys & {domain_data.key(text) for text in split.corpus}
    assert split.counts["dev_skipped_sharing_test"] > 0  # the vocabulary overlap was real
    assert domain_data.split_domain("toy", pairs, [], seed=0).corpus == split.corpus  # seeded
    assert domain_data.split_domain("toy", pairs, [], seed=1).corpus != split.corpus


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("domain-data")
    return out, domain_data.build(SHARED, out, seed=0)


@pytest.mark.shared
@needs_shared()
@pytest.mark.parametrize("domain", ["news", "captions", "forums", "glosses"])
def test_real_split_sizes_nesting_and_no_leak(built: tuple[Path, dict], domain: str) -> None:
    out, manifest = built
    folder = out / domain
    corpus = (folder / "corpus.txt").read_text(encoding="utf-8").splitlines()
    dev200, test = _jsonl(folder / "dev-200.jsonl"), _jsonl(folder / "test.jsonl")
    devs = {size: _jsonl(folder / name) for size, name in [(25, "dev-25.jsonl"), (50, "dev-50.jsonl"),
                                                            (100, "dev.jsonl")]}
    assert len(dev200) == 200 and [len(devs[size]) for size in (25, 50, 100)] == [25, 50, 100]
    assert devs[25] == devs[50][:25] and devs[50] == devs[100][:50] and devs[100] == dev200[:100]
    assert len(test) >= 300 and len(corpus) >= 500 and len(corpus) <= 10_000
    assert len(corpus) == len({domain_data.key(text) for text in corpus})  # unique
    # the leak check, recomputed from the files rather than trusted
    key = domain_data.key
    test_keys = {key(r[s]) for r in test for s in ("sentence1", "sentence2")}
    dev_keys = {key(r[s]) for r in dev200 for s in ("sentence1", "sentence2")}
    corpus_keys = {key(text) for text in corpus}
    assert not test_keys & corpus_keys and not dev_keys & corpus_keys and not dev_keys & test_keys
    assert {r["subset"] for r in test} <= set(domain_data.DOMAINS[domain])
    # readable by sentadapt's own readers, as the suite's `adapt --dev` and `eval --pairs` will read them
    assert len(read_scored_pairs(folder / "dev.jsonl")) == 100
    assert len(read_scored_pairs(folder / "test.jsonl")) == len(test)
    labelled = read_labelled_pairs(folder / "test-pairclass.tsv")
    expected = [int(r["score"] >= 4) for r in test if r["score"] >= 4 or r["score"] <= 1.5]
    assert labelled.labels == expected
    counts = manifest["domains"][domain]
    assert counts["test"] == len(test) and counts["corpus"] == len(corpus)
    assert counts["pairclass"]["positive"] == sum(expected)


@pytest.mark.shared
@needs_shared()
def test_captions_corpus_gets_snli_premises_and_the_build_is_deterministic(built: tuple[Path, dict],
                                                                          tmp_path: Path) -> None:
    out, manifest = built
    captions = manifest["domains"]["captions"]
    assert captions["corpus_from_snli"] > 1000 and captions["corpus"] <= 10_000
    assert captions["corpus_from_sts"] + captions["corpus_from_snli"] == captions["corpus"]
    assert manifest["domains"]["news"]["corpus_from_snli"] == 0
    domain_data.build(SHARED, tmp_path, seed=0, domains=["forums"])
    for name in ("corpus.txt", "dev-200.jsonl", "test.jsonl", "test-pairclass.tsv"):
        assert (tmp_path / "forums" / name).read_bytes() == (out / "forums" / name).read_bytes()
    domain_data.build(SHARED, tmp_path / "seed1", seed=1, domains=["forums"])
    assert (tmp_path / "seed1" / "forums" / "test.jsonl").read_bytes() != (out / "forums" / "test.jsonl").read_bytes()


@pytest.mark.shared
@needs_shared()
def test_social_is_built_on_demand_beside_the_four_and_keeps_their_manifest(built: tuple[Path, dict],
                                                                             tmp_path: Path) -> None:
    _, manifest = built
    assert "social" not in manifest["domains"]  # the default build is the four earlier domains
    domain_data.build(SHARED, tmp_path, seed=0, domains=["news"])
    both = domain_data.build(SHARED, tmp_path, seed=0, domains=["social"])
    assert set(both["domains"]) == {"news", "social"}  # news' entry kept from the first build
    assert json.loads((tmp_path / "manifest.json").read_text())["domains"]["news"] == manifest["domains"]["news"]
    social = both["domains"]["social"]
    assert (social["pairs"], social["test"], social["dev_pool"], social["corpus"]) == (750, 300, 200, 340)
    folder = tmp_path / "social"
    test, dev = _jsonl(folder / "test.jsonl"), _jsonl(folder / "dev-200.jsonl")
    assert {r["subset"] for r in test + dev} == {"tweet-news"}
    corpus = {domain_data.key(text) for text in (folder / "corpus.txt").read_text(encoding="utf-8").splitlines()}
    scored = {domain_data.key(r[s]) for r in test + dev for s in ("sentence1", "sentence2")}
    assert not corpus & scored
    with pytest.raises(SystemExit, match=r"--domains: unknown domain\(s\) tweets; choose from news, captions, "
                                         r"forums, glosses, social"):
        domain_data.build(SHARED, tmp_path, seed=0, domains=["tweets"])
