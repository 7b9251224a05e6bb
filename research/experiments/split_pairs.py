"""Split a labelled pairs file into a selection half and a held-out half (seeded), keeping the header.

    python -m research.experiments.split_pairs examples/it-support-dev.tsv --out-dir runs/split
    python -m research.experiments.split_pairs PAIRS.tsv --out-dir runs/split --disjoint --corpus CORPUS.txt --names dev,test

Selecting checkpoints on the same pairs that report the gain overstates it; this gives an honest
held-out measurement of in-domain adaptation.

--disjoint makes the held-out half share no sentence with the selection half: pairs linked by a common
sentence stay on one side, and the split is stratified by score (groups are dealt in score order, so each
score band is cut in the same proportion). --corpus FILE (one sentence per line) keeps every pair with a
sentence that is also in that corpus on the selection side, so the held-out pairs are text the adapted
model never trained on. The held-out side gets half of all the pairs (rounded up) or, when the corpus pins
more than half on the selection side, every free pair.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path


def _groups(rows: list[list[str]]) -> list[list[int]]:
    """Indices of rows linked by a shared sentence (union-find over the first two columns), in file order."""
    parent: dict[str, str] = {}

    def root(text: str) -> str:
        while parent.setdefault(text, text) != text:
            parent[text] = parent[parent[text]]
            text = parent[text]
        return text

    for row in rows:
        parent[root(row[0])] = root(row[1])
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(root(row[0]), []).append(index)
    return list(groups.values())


def disjoint_split(rows: list[list[str]], score_column: int, corpus: set[str],
                   seed: int) -> tuple[list[int], list[int]]:
    """(selection indices, held-out indices): sentence-disjoint, stratified by score, corpus pairs selected."""
    pinned: list[int] = []
    free: list[list[int]] = []
    for group in _groups(rows):
        if any(rows[i][0] in corpus or rows[i][1] in corpus for i in group):
            pinned.extend(group)
        else:
            free.append(group)
    rng = random.Random(seed)
    rng.shuffle(free)  # random order within a score band (the sort below is stable)
    free.sort(key=lambda group: sum(float(rows[i][score_column]) for i in group) / len(group))
    free_pairs = sum(len(group) for group in free)
    target = min(free_pairs, len(rows) - len(rows) // 2)
    # systematic allocation: after k free pairs, ~k × target / free_pairs of them are held out, so every
    # stretch of the score order (every band) is split in the same proportion
    selection, heldout, seen = list(pinned), [], 0
    for group in free:
        seen += len(group)
        side = heldout if len(heldout) + len(group) <= seen * target / free_pairs + 0.5 else selection
        side.extend(group)
    return sorted(selection), sorted(heldout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", type=Path)
    parser.add_argument("--out-dir", type=Path, default=Path("runs/split"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--disjoint", action="store_true", help="no sentence on both sides; stratified by score")
    parser.add_argument("--corpus", type=Path, help="with --disjoint: pairs with a sentence of this corpus are "
                        "kept on the selection side")
    parser.add_argument("--names", default="select,heldout", help="output name suffixes (default select,heldout)")
    args = parser.parse_args()
    names = args.names.split(",")
    if len(names) != 2 or not all(names):
        parser.error("--names takes two comma-separated names, e.g. dev,test")
    if args.corpus and not args.disjoint:
        parser.error("--corpus needs --disjoint")
    header, *rows = args.pairs.read_text(encoding="utf-8").splitlines()
    if args.disjoint:
        columns = header.split("\t")
        if "score" not in columns:
            parser.error(f"{args.pairs}:1: --disjoint needs a tab-separated header with a score column")
        cells = [row.split("\t") for row in rows]
        corpus = set(args.corpus.read_text(encoding="utf-8").splitlines()) if args.corpus else set()
        select_ids, heldout_ids = disjoint_split(cells, columns.index("score"), corpus, args.seed)
        parts = [[rows[i] for i in select_ids], [rows[i] for i in heldout_ids]]
    else:
        random.Random(args.seed).shuffle(rows)
        half = len(rows) // 2
        parts = [rows[:half], rows[half:]]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, part in zip(names, parts):
        path = args.out_dir / f"{args.pairs.stem}.{name}{args.pairs.suffix}"
        path.write_text("\n".join([header, *part]) + "\n", encoding="utf-8")
        print(f"{len(part)} pairs → {path}")


if __name__ == "__main__":
    main()
