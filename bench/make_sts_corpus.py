"""Write the unlabeled sentences of the STS data as a corpus (ConSERT's unsupervised, transductive setting).

    python -m bench.make_sts_corpus --data-dir ../shared/data/sts --out runs/sts-corpus.txt --limit 10000

ConSERT trains on every sentence of STS12–16, STS-B and SICK-R without their labels (paper §4.1,
as BERT-flow). `--limit` keeps a seeded random sample so runs fit a CPU budget.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

FILES = ["sts12.test", "sts13.test", "sts14.test", "sts15.test", "sts16.test", "stsb.train", "stsb.dev",
         "stsb.test", "sickr.train", "sickr.dev", "sickr.test"]


def unique_sentences(data_dir: Path, files: list[str] = FILES) -> list[str]:
    """Every distinct sentence of the files' pairs (whitespace normalised), in order of first appearance."""
    sentences: dict[str, None] = {}
    for name in files:
        with (data_dir / f"{name}.jsonl").open(encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        for sentence in (*(row["sentence1"] for row in rows), *(row["sentence2"] for row in rows)):
            sentences.setdefault(" ".join(sentence.split()), None)
    return list(sentences)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data/sts"))
    parser.add_argument("--out", type=Path, default=Path("runs/sts-corpus.txt"))
    parser.add_argument("--files", default=",".join(FILES), help="comma list of TASK.SPLIT")
    parser.add_argument("--limit", type=int, default=0, help="random sample of this many sentences (0 = all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sentences = unique_sentences(args.data_dir, args.files.split(","))
    chosen = list(sentences)
    if args.limit and args.limit < len(chosen):
        chosen = random.Random(args.seed).sample(chosen, args.limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    print(f"{len(chosen)} sentences (of {len(sentences)} unique) → {args.out}")


if __name__ == "__main__":
    main()
