"""Split a labelled pairs file into a selection half and a held-out half (seeded), keeping the header.

    python bench/split_pairs.py examples/it-support-dev.tsv --out-dir runs/split

Selecting checkpoints on the same pairs that report the gain overstates it; this gives an honest
held-out measurement of in-domain adaptation.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", type=Path)
    parser.add_argument("--out-dir", type=Path, default=Path("runs/split"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    header, *rows = args.pairs.read_text(encoding="utf-8").splitlines()
    random.Random(args.seed).shuffle(rows)
    half = len(rows) // 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, part in (("select", rows[:half]), ("heldout", rows[half:])):
        path = args.out_dir / f"{args.pairs.stem}.{name}{args.pairs.suffix}"
        path.write_text("\n".join([header, *part]) + "\n", encoding="utf-8")
        print(f"{len(part)} pairs → {path}")


if __name__ == "__main__":
    main()
