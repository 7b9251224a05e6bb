"""Build pair-classification, reranking and retrieval evaluation tasks from the real data in ../shared.

    python -m research.experiments.make_eval_tasks --shared ../shared --out runs/eval-tasks

Writes, deterministically (same inputs and --seed → byte-identical files):

  OUT/pairclass/sickr.test.tsv, OUT/pairclass/stsb.test.tsv
      `sentence1<TAB>sentence2<TAB>label` from the SICK-R and STS-B test sets: label 1 for a gold score ≥ 4,
      0 for a score ≤ 1.5; pairs in between are dropped (the ambiguous middle is not a "duplicate / not
      duplicate" judgement). SICK's raw 1–5 scores are used as they are (see "SICK's range" below).
  OUT/rerank/snli.test.jsonl
      One `{"query", "positive", "negative"}` object per SNLI test premise (MTEB's reranking layout): the
      premise is the query, its entailment hypotheses the positives, its contradiction and neutral
      hypotheses plus --random-negatives (default 7) hypotheses of other premises the negatives. With SNLI's
      three hypotheses per premise that is ~10 candidates per query, a top-10 list: MRR@10 and nDCG@10 see
      every candidate. Premises without an entailment hypothesis are skipped.
  OUT/retrieval/sts-nli/{corpus.jsonl, queries.jsonl, qrels/test.tsv}
      A BEIR folder. Queries: the distinct sentence1 of STS pairs (all STS files) whose gold score is ≥ 4;
      relevant documents: their sentence2 (qrels score 1). Corpus: every unique sentence of the STS and NLI
      files (exact text, ~55k documents). Details under "Retrieval" below.
  OUT/manifest.json
      The parameters and every count printed.

Retrieval decisions:
  - Ids are `s<N>`, N the sentence's first appearance over the input files in a fixed order. A query's
    `_id` is the `_id` of the same sentence in the corpus (BEIR's Quora/CQADupStack convention): every
    query is itself a corpus document, so an evaluator must skip the hit whose corpus id equals the query
    id (BEIR's `ignore_identical_ids`) or every query finds itself at rank 1.
  - A pair whose two sentences are identical is not a qrels line (it would be that self-hit); a query left
    with no relevant document is dropped. Both are counted.
  - The same (sentence1, sentence2) pair annotated more than once (STS-B reuses STS12–16 pairs, and a few
    sets repeat pairs) is relevant when the MEAN of its annotations is ≥ 4, and gives one qrels line.
  - SICK's range: SICK-R relatedness runs 1–5 and the SemEval/STS-B scores 0–5. Raw scores are used with
    the same ≥ 4 threshold for both (as in the pair-classification task, and as SentEval and MTEB use SICK's
    scores unchanged). Mapping SICK linearly onto 0–5 would move the threshold to a raw 4.2 and drop about
    a fifth of SICK's relevant pairs; on both scales 4 means "mostly equivalent".
  - Texts are used exactly as stored: the STS text is untokenized, the SNLI text PTB-tokenized
    ("packages ."), so a sentence present in both spellings is two documents.

Random reranking negatives are drawn (seeded) from the distinct SNLI test hypotheses, never one of the
query's own hypotheses; a random hypothesis can, rarely, happen to be true of the premise too.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

# every STS file in ../shared/data/sts, in the order that numbers the corpus (STS12–16, STS-B, SICK-R)
STS_FILES = ["sts12.test", "sts13.test", "sts14.test", "sts15.test", "sts16.test", "stsb.train", "stsb.dev",
             "stsb.test", "sickr.train", "sickr.dev", "sickr.test"]
NLI_FILES = ["allnli.dev.jsonl.gz", "snli.test.jsonl.gz"]
PAIRCLASS_SETS = ["sickr.test", "stsb.test"]
POSITIVE_MIN = 4.0  # score ≥ 4: "mostly equivalent" (STS guidelines); label 1 / relevant
NEGATIVE_MAX = 1.5  # score ≤ 1.5: at most "same topic"; label 0
RANDOM_NEGATIVES = 7  # + SNLI's neutral and contradiction hypotheses (+ 1 entailment) ≈ 10 candidates


def read_jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as error:
                    raise SystemExit(f"{path}:{number}: invalid JSON ({error.msg})") from None


def require(path: Path) -> Path:
    if not path.is_file():
        raise SystemExit(f"{path}: not found; pass --shared pointing at the shared folder (see ../shared/README.md)")
    return path


def _tsv_cell(text: str, where: object) -> str:
    # the pairs reader reads TSV without quoting, so a tab or newline inside a sentence would shift columns
    if "\t" in text or "\n" in text or "\r" in text:
        raise SystemExit(f"{where}: a sentence contains a tab or line break; cannot write it as TSV: {text!r}")
    return text


def pairclass_tsv(pairs: Iterable[tuple[str, str, float]], target: Path, where: object) -> dict[str, int]:
    """Scored pairs → a pair-classification TSV at `target`: label 1 at score ≥ POSITIVE_MIN, 0 at
    ≤ NEGATIVE_MAX, the middle dropped; `where` names the source in errors. Returns the counts."""
    lines = ["sentence1\tsentence2\tlabel"]
    kept = {1: 0, 0: 0}
    total = 0
    for first, second, score in pairs:
        total += 1
        if NEGATIVE_MAX < score < POSITIVE_MIN:
            continue
        label = int(score >= POSITIVE_MIN)
        kept[label] += 1
        lines.append(f"{_tsv_cell(first, where)}\t{_tsv_cell(second, where)}\t{label}")
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"source_pairs": total, "pairs": kept[0] + kept[1], "positive": kept[1], "negative": kept[0],
            "dropped_middle": total - kept[0] - kept[1]}


def build_pairclass(sts_dir: Path, out_dir: Path) -> dict[str, dict[str, int]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict[str, int]] = {}
    for name in PAIRCLASS_SETS:
        source = require(sts_dir / f"{name}.jsonl")
        records = read_jsonl(source)
        counts[name] = pairclass_tsv(((r["sentence1"], r["sentence2"], float(r["score"])) for r in records),
                                     out_dir / f"{name}.tsv", source)
    return counts


def build_rerank(nli_dir: Path, out_dir: Path, random_negatives: int, seed: int) -> dict[str, int]:
    source = require(nli_dir / "snli.test.jsonl.gz")
    by_premise: dict[str, dict[str, list[str]]] = {}
    for record in read_jsonl(source):
        labels = by_premise.setdefault(record["premise"], {"entailment": [], "neutral": [], "contradiction": []})
        if record["hypothesis"] not in labels[record["label"]]:
            labels[record["label"]].append(record["hypothesis"])
    pool = list(dict.fromkeys(h for labels in by_premise.values() for hs in labels.values() for h in hs))
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    skipped = conflicting = 0
    for premise, labels in by_premise.items():
        positive = labels["entailment"]
        if not positive:
            skipped += 1
            continue
        hard = [h for h in labels["contradiction"] + labels["neutral"] if h not in positive]
        conflicting += len(labels["contradiction"]) + len(labels["neutral"]) - len(hard)
        own = {premise, *positive, *hard}
        randoms: list[str] = []
        while len(randoms) < random_negatives:  # rejection sampling: the pool has ~19k texts, a query owns ~3
            candidate = pool[rng.randrange(len(pool))]
            if candidate not in own:
                own.add(candidate)
                randoms.append(candidate)
        rows.append({"query": premise, "positive": positive, "negative": hard + randoms})
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "snli.test.jsonl"
    target.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return {"premises": len(by_premise), "queries": len(rows), "skipped_no_entailment": skipped,
            "positives": sum(len(r["positive"]) for r in rows),  # type: ignore[arg-type,misc]
            "hard_negatives": sum(len(r["negative"]) for r in rows) - random_negatives * len(rows),  # type: ignore[arg-type,misc]
            "random_negatives": random_negatives * len(rows), "hypothesis_pool": len(pool),
            "dropped_conflicting_labels": conflicting}


def build_retrieval(sts_dir: Path, nli_dir: Path, out_dir: Path) -> dict[str, int]:
    ids: dict[str, str] = {}  # text → "s<N>", in order of first appearance

    def id_of(text: str) -> str:
        return ids.setdefault(text, f"s{len(ids)}")

    annotations: dict[tuple[str, str], list[float]] = defaultdict(list)
    sts_pairs = 0
    for name in STS_FILES:
        for record in read_jsonl(require(sts_dir / f"{name}.jsonl")):
            sts_pairs += 1
            s1, s2 = record["sentence1"], record["sentence2"]
            id_of(s1)
            id_of(s2)
            annotations[(s1, s2)].append(float(record["score"]))
    for name in NLI_FILES:
        for record in read_jsonl(require(nli_dir / name)):
            id_of(record["premise"])
            id_of(record["hypothesis"])

    relevant: dict[str, list[str]] = {}  # query text → relevant texts, in first-seen order
    identical = 0
    for (s1, s2), scores in annotations.items():
        if sum(scores) / len(scores) < POSITIVE_MIN:
            continue
        if s1 == s2:
            identical += 1
            continue
        relevant.setdefault(s1, []).append(s2)

    target = out_dir
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    with (target / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for text, doc_id in ids.items():
            handle.write(json.dumps({"_id": doc_id, "title": "", "text": text}, ensure_ascii=False) + "\n")
    with (target / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for text in relevant:
            handle.write(json.dumps({"_id": ids[text], "text": text}, ensure_ascii=False) + "\n")
    with (target / "qrels" / "test.tsv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["query-id", "corpus-id", "score"])
        for text, docs in relevant.items():
            writer.writerows([ids[text], ids[doc], 1] for doc in docs)
    single_annotation_queries = {s1 for (s1, s2), scores in annotations.items()
                                 if sum(scores) / len(scores) >= POSITIVE_MIN}
    return {"sts_pairs": sts_pairs, "distinct_sts_pairs": len(annotations), "corpus": len(ids),
            "queries": len(relevant), "qrels": sum(len(docs) for docs in relevant.values()),
            "dropped_identical_pairs": identical,
            "dropped_queries_only_identical": len(single_annotation_queries) - len(relevant),
            "multi_annotated_pairs": sum(len(scores) > 1 for scores in annotations.values())}


def build(shared: Path, out: Path, random_negatives: int = RANDOM_NEGATIVES, seed: int = 0) -> dict:
    sts_dir, nli_dir = shared / "data" / "sts", shared / "data" / "nli"
    for path in [*(sts_dir / f"{name}.jsonl" for name in STS_FILES), *(nli_dir / name for name in NLI_FILES)]:
        require(path)  # every input checked before anything is written
    manifest = {
        "built_by": "research/experiments/make_eval_tasks.py",
        "parameters": {"positive_min": POSITIVE_MIN, "negative_max": NEGATIVE_MAX,
                       "random_negatives": random_negatives, "seed": seed},
        "pairclass": build_pairclass(sts_dir, out / "pairclass"),
        "rerank": {"snli.test": build_rerank(nli_dir, out / "rerank", random_negatives, seed)},
        "retrieval": {"sts-nli": build_retrieval(sts_dir, nli_dir, out / "retrieval" / "sts-nli")},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=Path("../shared"), help="the shared folder (default ../shared)")
    parser.add_argument("--out", type=Path, default=Path("runs/eval-tasks"), help="output folder")
    parser.add_argument("--random-negatives", type=int, default=RANDOM_NEGATIVES,
                        help=f"random hypotheses of other premises per reranking query (default {RANDOM_NEGATIVES})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random negatives (default 0)")
    args = parser.parse_args()
    if args.random_negatives < 0:
        parser.error("--random-negatives must be ≥ 0")
    manifest = build(args.shared, args.out, args.random_negatives, args.seed)
    for name, c in manifest["pairclass"].items():
        print(f"pairclass/{name}.tsv: {c['pairs']} pairs ({c['positive']} label 1, {c['negative']} label 0; "
              f"{c['dropped_middle']} of {c['source_pairs']} in the middle dropped)")
    r = manifest["rerank"]["snli.test"]
    print(f"rerank/snli.test.jsonl: {r['queries']} queries, {r['positives']} positives, {r['hard_negatives']} "
          f"contradiction/neutral + {r['random_negatives']} random negatives "
          f"({r['skipped_no_entailment']} premises without an entailment skipped)")
    q = manifest["retrieval"]["sts-nli"]
    print(f"retrieval/sts-nli: {q['corpus']} documents, {q['queries']} queries, {q['qrels']} qrels "
          f"({q['dropped_identical_pairs']} identical pairs dropped, {q['dropped_queries_only_identical']} queries "
          "left without a relevant document)")
    print(f"→ {args.out} (counts in {args.out / 'manifest.json'})")


if __name__ == "__main__":
    main()
