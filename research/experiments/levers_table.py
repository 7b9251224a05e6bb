"""Before/after table of the levers tried on tuned bases (research/findings.md), from domain-suite results.

    python -m research.experiments.levers_table runs/levers-a runs/levers-b [runs/domain]

Each WORK folder is a `research/experiments/domain_suite.py --work WORK --variant NAME …` run; one row per (variant,
recipe, model): the selected checkpoint's dev Δ and the held-out test Δ (Spearman × 100) averaged over the
domains, the test Δ with the verdict applied (keep-base counts as 0), and each domain's test Δ with its
paired 95 % CI. Pure reading: nothing is trained or evaluated here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sentadapt.decision.rule import USE_ADAPTED, decide  # the rule `adapt` applies to its runs

from research.experiments.domain_render import applied_delta, delta_cell, rows_of


def mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):+.2f}" if values else "–"


def rows(results: dict[str, Any]) -> list[tuple[str, str, str, dict[str, dict[str, Any]]]]:
    """(variant, recipe, model, {domain: row}) of every trained row, as the suite's renderer lists them."""
    models = dict.fromkeys(model for data in results["variants"].values() for model in data["models"])
    return [(variant, recipe, Path(model).name, per_domain)
            for model in models for variant, recipe, per_domain in rows_of(results, model)]


def table(works: list[Path]) -> str:
    entries = [entry for work in works for entry in rows(json.loads((work / "results.json").read_text()))]
    domains = list(dict.fromkeys(domain for *_, per_domain in entries for domain in per_domain))
    lines = ["| variant | recipe | model | dev Δ | test Δ | test Δ, verdict applied | "
             + " | ".join(f"{d} test Δ" for d in domains) + " |",
             "|---|---|---|---:|---:|---:|" + "---:|" * len(domains)]
    for variant, recipe, model, per_domain in sorted(entries, key=lambda e: (e[2], e[1], e[0])):
        done = [per_domain[d] for d in domains if d in per_domain]
        dev = [row["dev"]["delta"] for row in done if (row.get("dev") or {}).get("delta") is not None]
        test = [row["test"]["delta"] for row in done]
        applied = [applied_delta(row) for row in done]
        cells = [delta_cell(per_domain[d]["test"]) if d in per_domain else "–" for d in domains]
        partial = "" if len(done) == len(domains) else f" ({len(done)}/{len(domains)} domains)"
        lines.append(f"| {variant}{partial} | {recipe} | {model} | {mean(dev)} | {mean(test)} | {mean(applied)} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def dev_size_table(evals: list[Path]) -> str:
    """How wide the paired 95 % CI of a dev Δ is at each dev size: `sentadapt eval BASE RUN... --pairs
    dev-25.jsonl --pairs dev-50.jsonl --pairs dev.jsonl --pairs dev-200.jsonl --pairs test.jsonl --json F`
    per domain; mean half-width over domains and runs, and how often `adapt`'s decision (Δ > 0 with the CI
    excluding 0) says use-adapted."""
    widths: dict[str, list[float]] = {}
    uses: dict[str, int] = {}
    for path in evals:
        for entry in json.loads(path.read_text())[1:]:
            for report in entry["delta_vs_first"]:
                (task, metrics), = report["tasks"].items()
                delta = metrics["spearman"]
                name = task.removesuffix(".jsonl")
                widths.setdefault(name, []).append((delta["ci"][1] - delta["ci"][0]) / 2)
                uses[name] = uses.get(name, 0) + int(decide(delta["delta"], delta["ci"], None).decision == USE_ADAPTED)
    lines = ["| pairs | mean ± half-width of the paired 95 % CI | runs the decision would use |", "|---|---:|---:|"]
    for name, values in widths.items():
        lines.append(f"| {name} | ±{sum(values) / len(values):.2f} | {uses[name]} / {len(values)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("works", nargs="+", type=Path, help="domain-suite work folders (each with results.json)")
    parser.add_argument("--dev-sizes", action="store_true",
                        help="the arguments are eval JSON files of the dev-size check (see dev_size_table)")
    args = parser.parse_args()
    print(dev_size_table(args.works) if args.dev_sizes else table(args.works))


if __name__ == "__main__":
    main()
