"""Split the STS data in ../shared into four domain-adaptation tasks: a corpus, dev pairs and held-out test pairs.

    python -m research.experiments.domain_data --shared ../shared --out runs/domain-data [--seed 0]

Writes, per domain, deterministically (same inputs and --seed → byte-identical files):

  OUT/<domain>/corpus.txt           unlabelled sentences to adapt on, one per line
  OUT/<domain>/dev-200.jsonl        200 scored pairs (sentence1, sentence2, score, subset): checkpoint selection
  OUT/<domain>/dev.jsonl            its first 100 (what `sentadapt adapt --dev` gets by default)
  OUT/<domain>/dev-50.jsonl, dev-25.jsonl   its first 50 / 25 (dev-25 ⊂ dev-50 ⊂ dev ⊂ dev-200)
  OUT/<domain>/test.jsonl           held-out scored pairs (40 % of the domain's pairs): the reported Spearman
  OUT/<domain>/test-pairclass.tsv   the test pairs as pair classification (`sentence1<TAB>sentence2<TAB>label`):
                                    label 1 for a gold score ≥ 4, 0 for ≤ 1.5, the middle dropped — the
                                    thresholds research/experiments/make_eval_tasks.py uses for SICK-R / STS-B
  OUT/manifest.json                 seed, subsets used and every count

Domains (subsets of STS12–16, whose scores run 0–5; STS-B and SICK-R are left out: STS-B re-uses
STS12–16 pairs, so it would duplicate them):

  news      headlines (STS13–16), deft-news
  captions  MSRvid, images; the corpus also gets SNLI premises (Flickr30k captions) from the two NLI files,
            the whole corpus capped at 10,000 sentences
  forums    deft-forum, answers-forums, answer-answer, question-question, belief
  glosses   OnWN, surprise.OnWN, FNWN
  social    tweet-news (STS14): only with --domains social (the default builds the four above); a small corpus
            (340 sentences)

Split, per domain, with a generator seeded by (domain, --seed):
  1. The same pair annotated more than once (same normalised sentences, either order) becomes one pair with
     the mean score: otherwise a copy could sit in test and another in dev.
  2. Shuffle; test = the first 40 % of the pairs.
  3. dev-200: the next pairs in shuffled order that share no sentence with test (the others are skipped).
  4. Corpus: the unique sentences of the remaining pairs (+ SNLI premises for captions) minus every test
     AND every dev-200 sentence, so the adapted model never trains on a sentence it is scored on, and the
     dev Δ is an unbiased estimate of the test Δ. Shuffled, so any prefix of it is representative.

Sentences are compared by a normalised key for these exclusions: lower-cased with whitespace AND
punctuation removed. That is stricter than collapsing whitespace: SNLI's text is PTB-tokenized
("a man .", "do n't") and the STS images captions are not, and both come from Flickr, so the same caption
can appear in both spellings. `check_no_leak` verifies the result before anything is written.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# the pair-classification rule (≥ 4 → 1, ≤ 1.5 → 0) and the readers of the in-domain evaluation tasks;
from research.experiments.make_eval_tasks import NEGATIVE_MAX, POSITIVE_MIN, pairclass_tsv, read_jsonl, require

STS_FILES = ["sts12.test", "sts13.test", "sts14.test", "sts15.test", "sts16.test"]
NLI_FILES = ["allnli.dev.jsonl.gz", "snli.test.jsonl.gz"]
DOMAINS: dict[str, tuple[str, ...]] = {
    "news": ("headlines", "deft-news"),
    "captions": ("MSRvid", "images"),
    "forums": ("deft-forum", "answers-forums", "answer-answer", "question-question", "belief"),
    "glosses": ("OnWN", "surprise.OnWN", "FNWN"),
}
# short social posts (issue 41): STS14's tweet-news, a tweet against the news title it comments on. Built on demand
# (`--domains social`) and kept out of DOMAINS, which the four earlier suites and their stored studies loop over.
# Its 750 pairs leave a corpus of 340 sentences (test 300, dev-200, the rest minus their sentences).
SOCIAL = "social"
EXTRA_DOMAINS: dict[str, tuple[str, ...]] = {SOCIAL: ("tweet-news",)}
ALL_DOMAINS: dict[str, tuple[str, ...]] = {**DOMAINS, **EXTRA_DOMAINS}
PREMISE_DOMAINS = {"captions"}  # SNLI premises are Flickr30k image captions
CORPUS_CAP = 10_000  # captions: STS sentences + premises; the other domains stay far below it
TEST_FRACTION = 0.4
DEV_POOL = 200
DEV_SIZES = (25, 50, 100)  # nested prefixes of the dev-200 pool; 100 is dev.jsonl

_NOT_WORD = re.compile(r"[\W_]+")


def key(text: str) -> str:
    """The normalised comparison key: lower-case letters and digits only ("A man ." == "a man.")."""
    return _NOT_WORD.sub("", text.lower())


@dataclass
class Pair:
    sentence1: str
    sentence2: str
    score: float
    subset: str

    def sentence_keys(self) -> tuple[str, str]:
        return key(self.sentence1), key(self.sentence2)

    def as_json(self) -> dict[str, object]:
        return {"sentence1": self.sentence1, "sentence2": self.sentence2, "score": round(self.score, 4),
                "subset": self.subset}


@dataclass
class DomainSplit:
    name: str
    test: list[Pair]
    dev_pool: list[Pair]
    corpus: list[str]
    counts: dict[str, object] = field(default_factory=dict)


class LeakError(ValueError):
    """A test or dev sentence reached the corpus, or a dev pair shares a sentence with test."""


def check_no_leak(corpus: Iterable[str], dev: Sequence[Pair], test: Sequence[Pair], domain: str = "") -> None:
    """Raise LeakError naming the first offending sentence: a test or dev sentence in the corpus, or a dev pair
    sharing a sentence with a test pair (all by normalised key)."""
    where = f"{domain}: " if domain else ""
    corpus_keys = {key(text) for text in corpus}
    test_keys = {k for pair in test for k in pair.sentence_keys()}
    for side, pairs in (("test", test), ("dev", dev)):
        for pair in pairs:
            for text in (pair.sentence1, pair.sentence2):
                if key(text) in corpus_keys:
                    raise LeakError(f"{where}{side} sentence {text!r} is also in the corpus")
    for pair in dev:
        for text in (pair.sentence1, pair.sentence2):
            if key(text) in test_keys:
                raise LeakError(f"{where}dev pair ({pair.sentence1!r}, {pair.sentence2!r}) shares the sentence "
                                f"{text!r} with the test pairs")


def read_domain_pairs(sts_dir: Path, subsets: Sequence[str]) -> tuple[list[Pair], int]:
    """The domain's pairs over STS12–16 in file order, repeated annotations merged (mean score); and how many
    annotations were merged away."""
    merged: dict[tuple[str, str], tuple[Pair, list[float]]] = {}
    annotations = 0
    for name in STS_FILES:
        for record in read_jsonl(require(sts_dir / f"{name}.jsonl")):
            if record.get("subset") not in subsets:
                continue
            annotations += 1
            pair = Pair(record["sentence1"], record["sentence2"], float(record["score"]), record["subset"])
            pair_key = tuple(sorted(pair.sentence_keys()))
            if pair_key in merged:
                merged[pair_key][1].append(pair.score)
            else:
                merged[pair_key] = (pair, [pair.score])
    pairs = []
    for pair, scores in merged.values():
        pair.score = sum(scores) / len(scores)
        pairs.append(pair)
    return pairs, annotations - len(pairs)


def read_premises(nli_dir: Path) -> list[str]:
    """Distinct SNLI premises of the NLI files, in file order (hypotheses are written by annotators, premises
    are the Flickr30k captions)."""
    return list(dict.fromkeys(record["premise"] for name in NLI_FILES for record in read_jsonl(require(nli_dir / name))
                              if record.get("source", "snli") == "snli"))


def _unique(texts: Iterable[str], excluded: set[str]) -> list[str]:
    """First spelling of each key not in `excluded` (blank texts dropped)."""
    seen = set(excluded)
    kept = []
    for text in texts:
        text_key = key(text)
        if text_key and text_key not in seen:
            seen.add(text_key)
            kept.append(text.strip())
    return kept


def split_domain(name: str, pairs: list[Pair], premises: Sequence[str], seed: int) -> DomainSplit:
    rng = random.Random(f"{name}:{seed}")  # a string seed is hashed deterministically (sha512)
    order = list(pairs)
    rng.shuffle(order)
    test_count = round(len(order) * TEST_FRACTION)
    test, rest = order[:test_count], order[test_count:]
    test_keys = {k for pair in test for k in pair.sentence_keys()}
    dev_pool: list[Pair] = []
    remaining: list[Pair] = []
    skipped = 0
    for pair in rest:
        if len(dev_pool) < DEV_POOL and not test_keys.intersection(pair.sentence_keys()):
            dev_pool.append(pair)
        else:
            skipped += len(dev_pool) < DEV_POOL
            remaining.append(pair)
    if len(dev_pool) < DEV_POOL:
        raise SystemExit(f"{name}: only {len(dev_pool)} pairs share no sentence with the test pairs; "
                         f"{DEV_POOL} are needed for dev-200")
    excluded = test_keys | {k for pair in dev_pool for k in pair.sentence_keys()}
    sts_sentences = _unique((text for pair in remaining for text in (pair.sentence1, pair.sentence2)), excluded)
    corpus = list(sts_sentences)
    added_premises = 0
    if name in PREMISE_DOMAINS and len(corpus) < CORPUS_CAP:
        candidates = _unique(premises, excluded | {key(text) for text in corpus})
        rng.shuffle(candidates)
        extra = candidates[: CORPUS_CAP - len(corpus)]
        added_premises = len(extra)
        corpus.extend(extra)
    corpus = corpus[:CORPUS_CAP]
    rng.shuffle(corpus)
    counts = {
        "pairs": len(pairs), "test": len(test), "dev_pool": len(dev_pool),
        "dev_skipped_sharing_test": skipped, "remaining_pairs": len(remaining),
        "corpus": len(corpus), "corpus_from_sts": len(corpus) - added_premises, "corpus_from_snli": added_premises,
        "subsets": {subset: sum(pair.subset == subset for pair in pairs) for subset in ALL_DOMAINS.get(name, ())},
        "test_subsets": {subset: sum(pair.subset == subset for pair in test) for subset in ALL_DOMAINS.get(name, ())},
    }
    return DomainSplit(name, test, dev_pool, corpus, counts)


def _write_jsonl(path: Path, pairs: Sequence[Pair]) -> None:
    path.write_text("".join(json.dumps(pair.as_json(), ensure_ascii=False) + "\n" for pair in pairs), encoding="utf-8")


def write_domain(split: DomainSplit, out: Path) -> dict[str, object]:
    check_no_leak(split.corpus, split.dev_pool, split.test, split.name)
    folder = out / split.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.txt").write_text("".join(text + "\n" for text in split.corpus), encoding="utf-8")
    _write_jsonl(folder / "dev-200.jsonl", split.dev_pool)
    for size in DEV_SIZES:
        _write_jsonl(folder / ("dev.jsonl" if size == 100 else f"dev-{size}.jsonl"), split.dev_pool[:size])
    _write_jsonl(folder / "test.jsonl", split.test)
    labels = pairclass_tsv(((pair.sentence1, pair.sentence2, pair.score) for pair in split.test),
                           folder / "test-pairclass.tsv", f"{split.name} test pairs")
    return {**split.counts, "pairclass": {key: labels[key] for key in ("positive", "negative", "dropped_middle")}}


def build(shared: Path, out: Path, seed: int = 0, domains: Sequence[str] | None = None) -> dict:
    """Split and write every domain of DOMAINS (or those named, of ALL_DOMAINS); returns the manifest (also written to
    OUT/manifest.json, where the entries of domains built earlier into OUT are kept)."""
    sts_dir, nli_dir = shared / "data" / "sts", shared / "data" / "nli"
    names = list(domains or DOMAINS)
    unknown = [name for name in names if name not in ALL_DOMAINS]
    if unknown:
        raise SystemExit(f"--domains: unknown domain(s) {', '.join(unknown)}; choose from {', '.join(ALL_DOMAINS)}")
    premises = read_premises(nli_dir) if PREMISE_DOMAINS.intersection(names) else []
    splits = []
    for name in names:  # every domain split and checked before anything is written
        pairs, merged = read_domain_pairs(sts_dir, ALL_DOMAINS[name])
        split = split_domain(name, pairs, premises, seed)
        split.counts["merged_repeated_annotations"] = merged
        check_no_leak(split.corpus, split.dev_pool, split.test, name)
        splits.append(split)
    manifest = {
        "built_by": "research/experiments/domain_data.py",
        "seed": seed,
        "parameters": {"test_fraction": TEST_FRACTION, "dev_pool": DEV_POOL, "dev_sizes": [*DEV_SIZES, DEV_POOL],
                       "corpus_cap": CORPUS_CAP, "positive_min": POSITIVE_MIN, "negative_max": NEGATIVE_MAX,
                       "sts_files": STS_FILES, "nli_files": NLI_FILES,
                       "key": "lower-cased, whitespace and punctuation removed"},
        "domains": _earlier_domains(out / "manifest.json", seed),
    }
    out.mkdir(parents=True, exist_ok=True)
    for split in splits:
        manifest["domains"][split.name] = {"subsets_used": list(ALL_DOMAINS[split.name]),
                                           "snli_premises": split.name in PREMISE_DOMAINS,
                                           **write_domain(split, out)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _earlier_domains(path: Path, seed: int) -> dict[str, object]:
    """The domain entries of a manifest already in OUT with the same seed (building `--domains social` into a folder
    of the four keeps their counts)."""
    if not path.is_file():
        return {}
    earlier = json.loads(path.read_text(encoding="utf-8"))
    return dict(earlier.get("domains", {})) if earlier.get("seed") == seed else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=Path("../shared"), help="the shared folder (default ../shared)")
    parser.add_argument("--out", type=Path, default=Path("runs/domain-data"), help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffles (default 0)")
    parser.add_argument("--domains", help=f"comma list of {','.join(ALL_DOMAINS)} (default: {','.join(DOMAINS)})")
    args = parser.parse_args()
    try:
        manifest = build(args.shared, args.out, args.seed, args.domains.split(",") if args.domains else None)
    except LeakError as error:
        raise SystemExit(f"leak: {error}") from None
    for name, c in manifest["domains"].items():
        pc = c["pairclass"]
        print(f"{name}: {c['pairs']} pairs → test {c['test']} (pair classification {pc['positive']}+/"
              f"{pc['negative']}-), dev-200 ({c['dev_skipped_sharing_test']} skipped sharing a test sentence), "
              f"corpus {c['corpus']} sentences ({c['corpus_from_snli']} SNLI premises)")
    print(f"→ {args.out} (counts in {args.out / 'manifest.json'})")


if __name__ == "__main__":
    main()
