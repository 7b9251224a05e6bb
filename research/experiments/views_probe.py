"""Issue 41 item 3, a probe before any feature: does a teacher run learn more when each corpus sentence comes with
edited copies of itself, which the teacher labels like any other sentence (more signal per sentence)?

    python -m research.experiments.views_probe --build                 # WORK/data/DOMAIN: corpus.txt + views, the same pool
    python -m research.experiments.distill_suite --train --work runs/distill-views --pairs l6-mpnet --domains news \\
        --variant k3v                                         # the teacher-run defaults on it
    python -m research.experiments.views_probe --build --anchor --work runs/distill-anchor   # corpus + general sentences
    python -m research.experiments.distill_suite --train --work runs/distill-anchor --pairs l6-mpnet --domains news \\
        --variant k3a

Views, drawn with seed 0, per corpus sentence of at least MIN_WORDS words: a crop (a contiguous run of 60–80 % of
its words) and a word deletion (each word dropped with probability 0.15, at least one dropped, never all). Views
equal to a corpus sentence or to each other are dropped. The dev/test pool is the suite's own: no pool sentence is
in the corpus or its views (the pool pairs' sentences were never corpus lines). research/findings.md, "Views of each
sentence", says what was planned before the run and what it read.

`--anchor` (the issue's other half of item 3: general sentences mixed in as an anchor) adds, instead of views, as
many general sentences as the corpus has lines: SNLI premises (Flickr30k captions, research/experiments/domain_data.py's
`read_premises`), drawn with seed 0, none that is a corpus line or, normalised, a pool sentence. research/findings.md,
"General sentences beside the domain's", says what was planned before its run.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np

SOURCE = Path("runs/distill/data")
WORK = Path("runs/distill-views")
MIN_WORDS = 4
CROP = (0.6, 0.8)
DELETE = 0.15


def crop(words: list[str], generator: np.random.Generator) -> list[str]:
    keep = max(1, min(len(words) - 1, round(generator.uniform(*CROP) * len(words))))
    start = int(generator.integers(0, len(words) - keep + 1))
    return words[start:start + keep]


def delete(words: list[str], generator: np.random.Generator) -> list[str]:
    dropped = generator.random(len(words)) < DELETE
    if not dropped.any():
        dropped[generator.integers(0, len(words))] = True
    if dropped.all():
        dropped[generator.integers(0, len(words))] = False
    return [word for word, gone in zip(words, dropped, strict=True) if not gone]


def with_views(lines: list[str], seed: int = 0) -> list[str]:
    """The corpus lines, then each line's views (those of MIN_WORDS words or more), each text once."""
    generator = np.random.default_rng(seed)
    seen = set(lines)
    views = []
    for line in lines:
        words = line.split()
        if len(words) < MIN_WORDS:
            continue
        for edit in (crop, delete):
            view = " ".join(edit(words, generator))
            if view not in seen:
                seen.add(view)
                views.append(view)
    return [*lines, *views]


def with_anchor(lines: list[str], general: list[str], excluded: set[str], seed: int = 0) -> list[str]:
    """The corpus lines, then as many general sentences as there are lines (fewer if the supply runs out), drawn
    at random; none is a corpus line or has a normalised key in `excluded` (the pool's sentences)."""
    from research.experiments.domain_data import key

    seen = set(lines)
    supply = [text for text in dict.fromkeys(general) if text not in seen and key(text) not in excluded]
    order = np.random.default_rng(seed).permutation(len(supply))[:len(lines)]
    return [*lines, *(supply[i] for i in sorted(order))]


def pool_keys(folder: Path) -> set[str]:
    """The normalised keys of every sentence of a domain's pool (dev-200 + test)."""
    import json

    from research.experiments.domain_data import key

    rows = [json.loads(line) for line in (folder / "pool.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return {key(row[side]) for row in rows for side in ("sentence1", "sentence2")}


def build(source: Path, work: Path, domains: list[str], anchor: list[str] | None = None) -> None:
    for domain in domains:
        target = work / "data" / domain
        target.mkdir(parents=True, exist_ok=True)
        lines = [line.strip() for line in (source / domain / "corpus.txt").read_text(encoding="utf-8").splitlines()
                 if line.strip()]
        corpus = with_views(lines) if anchor is None else with_anchor(lines, anchor, pool_keys(source / domain))
        (target / "corpus.txt").write_text("\n".join(corpus) + "\n", encoding="utf-8")
        for name in ("pool.jsonl", "dev-200.jsonl", "test.jsonl"):
            shutil.copy(source / domain / name, target / name)
        added = "views" if anchor is None else "general sentences"
        print(f"{domain}: {len(lines)} sentences + {len(corpus) - len(lines)} {added} → {target / 'corpus.txt'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--domains", default="news")
    parser.add_argument("--build", action="store_true")
    parser.add_argument("--anchor", action="store_true", help="general sentences (SNLI premises) instead of views")
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    args = parser.parse_args()
    if args.build:
        from research.experiments.domain_data import read_premises

        anchor = read_premises(args.shared / "data" / "nli") if args.anchor else None
        build(args.source, args.work, args.domains.split(","), anchor)


if __name__ == "__main__":
    main()
