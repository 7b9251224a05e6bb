"""The sizes users ship (issue 45): all-MiniLM-L6-v2 adapted on the four suite domains with and without
`--matryoshka 384,192,96`, with the teacher default (all-mpnet-base-v2) and without, scored at 384/192/96 dims ×
fp32/int8/binary on re-drawn test splits.

    python -m research.experiments.sizes_suite --train          # the two runs without a teacher (plain, plain-m) per domain
    python -m research.experiments.sizes_suite --encode         # per-pair cosines of every run and the base, every form
    python -m research.experiments.sizes_suite --study --render research/results.md

Runs. With the teacher: distill_suite's k3e (the teacher default k3 with teacher_evidence=on) and k3em (the same
flags and `--matryoshka 384,192,96`), `python -m research.experiments.distill_suite --train --pairs l6-mpnet --variant k3em
--extra=... --extra=--matryoshka --extra=384,192,96`. Without: `sentadapt adapt CORPUS --base L6 --dev POOL
--set patience=0 [--matryoshka 384,192,96]` (the tuned-base defaults). Every run gets its domain's pool
(dev-200.jsonl + test.jsonl) as `--dev`, as distill_suite's do, and its published model is what is scored: the
best of its evaluated steps on the whole pool, the same rule for every variant (the pool holds the test pairs, so
this choice among ≤ 4 steps has seen them; it is the same for the runs with and without --matryoshka compared).

Forms (sentadapt/evaluation/forms.py, the code `eval --dims/--quantize` runs): the prefix of each vector; int8 with
ranges from 2,000 corpus sentences (a seeded sample of corpus.txt: what a user calibrating on the texts they index
does); binary scored by Hamming distance. Per-pair cosines are written to research/results/sizes/cosines/ (tracked): every
figure regenerates from them with `--study`. research/results/sizes/runs/VARIANT-DOMAIN/ keeps each run's config.yaml and
metrics.json (its settings, dev curve and sizes table).

Study: per domain and split seed (5), decision_study.draw's 200 dev pairs and the test pairs sharing no sentence
with them; per variant and form, Spearman × 100 on test and its Δ against the base's 384 fp32 on the same pairs.
The sizes decision (decision/sizes.py, its rule written before these runs) is applied on each drawn dev set, and
the test Δ of the form it names is reported (the base's 384 fp32 when it names none: Δ 0).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from research.experiments.decision_runs import pool_file
from research.experiments.decision_study import DevSet, Pool, draw, load_pool
from research.experiments.distill_suite import run_job
from research.experiments.domain_data import DOMAINS
from research.experiments.results_suite import machine_summary, sentadapt

SHARED = Path("../shared")
L6 = str(SHARED / "models/all-minilm-l6-v2")
WORK = Path("runs/distill")
RESULTS = Path("research/results/sizes")
POOLS = Path("research/results/distill/data")  # each domain's pool.jsonl, tracked: the study needs nothing untracked
SIZES = (384, 192, 96)
MATRYOSHKA = ("--matryoshka", ",".join(map(str, SIZES)))
# variant → (what it is, where its runs are under WORK/runs)
VARIANTS = {
    "plain": ("no teacher, no --matryoshka (the tuned-base defaults)", "plain/l6"),
    "plain-m": ("no teacher, --matryoshka 384,192,96 with weights 1,1,1 (the default until 2026-11-27)", "plain-m/l6"),
    # a check after the weighting rule's verdict (which read the teacher runs): the new default weights without one
    "plain-mw": ("no teacher, --matryoshka 384,192,96 with the default weights 2,1,1", "plain-mw/l6"),
    "teacher": ("--teacher all-mpnet-base-v2 (the teacher default; distill_suite's k3e)", "k3e/l6-mpnet"),
    "teacher-m": ("--teacher all-mpnet-base-v2 and --matryoshka 384,192,96 (distill_suite's k3em)", "k3em/l6-mpnet"),
    # research/findings.md, "Weighting the full size" (the rule committed before these runs)
    "teacher-mw": ("teacher-m with --set matryoshka_weights=2,1,1 (distill_suite's k3emw; the default weights since "
                   "2026-11-27)", "k3emw/l6-mpnet"),
}
# a second training seed (adapt --seed 1) of the teacher variants, planned in research/findings.md ("Sizes") before its
# runs: news, forums and glosses. Not in the main tables; the targets read each domain's mean over its seeds.
REPLICATES = {
    "teacher-s1": ("the teacher variant, trained with --seed 1", "k3e-s1/l6-mpnet"),
    "teacher-m-s1": ("the teacher-m variant, trained with --seed 1", "k3em-s1/l6-mpnet"),
    # a check after the weighting rule's verdict (not part of it): news, where the full-size cost was closest
    "teacher-mw-s1": ("the teacher-mw variant, trained with --seed 1", "k3emw-s1/l6-mpnet"),
}
SEEDED = {"teacher": "teacher-s1", "teacher-m": "teacher-m-s1"}
CALIBRATION = 2000  # corpus sentences int8's ranges come from
DEV = 200
SECTION = "sizes"


def run_folder(work: Path, variant: str, domain: str) -> Path:
    return work / "runs" / {**VARIANTS, **REPLICATES}[variant][1] / domain


def train(work: Path, variant: str, domain: str, reuse: bool) -> None:
    folder = run_folder(work, variant, domain)
    if reuse and (folder / "metrics.json").is_file():
        print(f"{variant} {domain}: done earlier", flush=True)
        return
    data = work / "data"
    argv = sentadapt("adapt", str(data / domain / "corpus.txt"), "--base", L6, "--dev", str(pool_file(data, domain)),
                     "--output", str(folder), "--overwrite", "--set", "patience=0",
                     *(MATRYOSHKA if variant != "plain" else ()),
                     *(("--set", "matryoshka_weights=1,1,1") if variant == "plain-m" else ()))
    run_job(argv, folder, work, f"{variant} {domain}")


def forms() -> list[Any]:
    from sentadapt.evaluation.forms import forms_of, resolved

    return resolved(forms_of(SIZES, ("none", "int8", "binary")), SIZES[0], "all-MiniLM-L6-v2")


def calibration_sentences(work: Path, domain: str) -> list[str]:
    lines = list(dict.fromkeys(line.strip() for line in (work / "data" / domain / "corpus.txt").read_text(
        encoding="utf-8").splitlines() if line.strip()))
    rows = np.random.default_rng(0).permutation(len(lines))[:CALIBRATION]
    return [lines[row] for row in sorted(rows)]


def encode(model: str, pool: Pool, calibration: list[str], path: Path) -> None:
    """`model`'s cosine of every pool pair in every form, into PATH (.npz, one float32 array per form label)."""
    from sentadapt.evaluation.contract import cosine_scores
    from sentadapt.evaluation.forms import int8_ranges, scoring_vectors
    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(model, device="cpu")
    texts = list(dict.fromkeys(pool.first + pool.second))
    vectors = encoder.encode(texts, max_length=128).float().numpy()
    ranges = int8_ranges(encoder.encode(calibration, max_length=128).float().numpy())
    row = {text: i for i, text in enumerate(texts)}
    first = np.array([row[text] for text in pool.first])
    second = np.array([row[text] for text in pool.second])
    import torch

    arrays = {}
    for form in forms():
        formed = torch.from_numpy(scoring_vectors(form, vectors, ranges))
        arrays[form.label(SIZES[0])] = cosine_scores(formed[first], formed[second]).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def encode_all(work: Path, results: Path, domains: list[str]) -> None:
    for domain in domains:
        pool = load_pool(pool_file(work / "data", domain))
        calibration = calibration_sentences(work, domain)
        variants = [*VARIANTS, *REPLICATES]
        models = {"base": L6, **{variant: str(run_folder(work, variant, domain)) for variant in variants}}
        for name, model in models.items():
            path = results / "cosines" / f"{name}-{domain}.npz"
            if path.is_file():
                continue
            if name != "base" and not (Path(model) / "metrics.json").is_file():
                print(f"{name} {domain}: no finished run in {model}; skipped", flush=True)
                continue
            started = time.perf_counter()
            encode(model, pool, calibration, path)
            print(f"{name} {domain}: encoded in {time.perf_counter() - started:.0f} s", flush=True)
            if name != "base":  # the run's settings and dev curve beside its cosines (tracked, kilobytes)
                record = results / "runs" / f"{name}-{domain}"
                record.mkdir(parents=True, exist_ok=True)
                for kept in ("config.yaml", "metrics.json"):
                    shutil.copy(Path(model) / kept, record / kept)


def spearman(gold: np.ndarray, cosines: np.ndarray) -> float:
    return float(100 * spearmanr(gold, cosines).statistic)


def study(results: Path, seeds: int, resamples: int, pools: Path = POOLS) -> dict[str, Any]:
    from sentadapt.decision.sizes import size_table

    labels = [form.label(SIZES[0]) for form in forms()]
    cells: list[dict[str, Any]] = []
    for domain in DOMAINS:
        if not (results / "cosines" / f"base-{domain}.npz").is_file():
            continue
        pool = load_pool(pools / domain / "pool.jsonl")
        base = np.load(results / "cosines" / f"base-{domain}.npz")
        for variant in [*VARIANTS, *REPLICATES]:
            path = results / "cosines" / f"{variant}-{domain}.npz"
            if not path.is_file():
                continue
            cosines = np.load(path)
            for seed in range(seeds):
                dev_rows, test = draw(pool, DEV, seed, domain)
                gold = pool.gold[test]
                reference = spearman(gold, base[labels[0]][test])
                test_delta = {label: spearman(gold, cosines[label][test]) - reference for label in labels}
                dev = DevSet(pool, dev_rows, resamples)
                table = size_table(dev.evaluator, dev.outputs(base[labels[0]].astype(np.float64)),
                                   [dev.outputs(cosines[label].astype(np.float64)) for label in labels], forms(),
                                   SIZES[0], 0.2)
                named = labels[table.smallest] if table.smallest is not None else None
                cells.append({"domain": domain, "variant": variant, "seed": seed, "base_test": reference,
                              "test_delta": test_delta, "named": named,
                              "named_test_delta": 0.0 if named is None else test_delta[named]})
    return {"command": "python -m research.experiments.sizes_suite --study", "seeds": seeds, "dev": DEV,
            "finished": time.strftime("%Y-%m-%d"), "machine": machine_summary(), "cells": cells}


def _mean(cells: list[dict[str, Any]], value: Any) -> float:
    return float(np.mean([value(cell) for cell in cells]))


def tables(result: dict[str, Any]) -> list[str]:
    cells = result["cells"]
    labels = [form.label(SIZES[0]) for form in forms()]
    lines = ["| variant | domain | base 384 fp32 | " + " | ".join(labels) + " |",
             "|---|---|---:|" + "---:|" * len(labels),
             "| bytes / vector | | 1536 | " + " | ".join(
                 f"{form.bytes_per_vector(SIZES[0]):g}" for form in forms()) + " |"]
    for variant in VARIANTS:
        for domain in [*DOMAINS, "mean"]:
            chosen = [c for c in cells if c["variant"] == variant and (domain == "mean" or c["domain"] == domain)]
            if not chosen:
                continue
            name = f"**{domain}**" if domain == "mean" else domain
            lines.append(f"| {variant} | {name} | {_mean(chosen, lambda c: c['base_test']):.2f} | " + " | ".join(
                f"{_mean(chosen, lambda c, label=label: c['test_delta'][label]):+.2f}" for label in labels) + " |")
    return lines


def seed_delta(cells: list[dict[str, Any]], variant: str, label: str, domain: str) -> float | None:
    """A variant's test Δ in a domain, mean over split seeds; None when it was not run there."""
    chosen = [c for c in cells if c["variant"] == variant and c["domain"] == domain]
    return _mean(chosen, lambda c: c["test_delta"][label]) if chosen else None


def full_size_costs(cells: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """What the default weighting (teacher-mw, and its second training seed) cost at full size against the teacher
    run of the same seed, per (domain, run) where both ran: the figure README.md and docs/sizes.md quote the largest
    of."""
    costs = {}
    for domain in DOMAINS:
        for weighted, alone in (("teacher-mw", "teacher"), ("teacher-mw-s1", "teacher-s1")):
            full, plain = seed_delta(cells, weighted, "384 fp32", domain), seed_delta(cells, alone, "384 fp32", domain)
            if full is not None and plain is not None:
                costs[domain, weighted] = plain - full
    return costs


def acceptance(result: dict[str, Any]) -> list[str]:
    """The issue's two targets on the teacher pairing, per domain: means over split seeds, and over the training seeds
    a domain has (a REPLICATES run counts only when both variants have one, so the two sides see the same seeds)."""
    cells = result["cells"]
    lines = []
    for domain in DOMAINS:
        replicated = all(any(c["variant"] == SEEDED[v] and c["domain"] == domain for c in cells) for v in SEEDED)
        runs = {v: [v, SEEDED[v]] if replicated else [v] for v in SEEDED}  # each variant's training seeds here

        def delta(variant: str, label: str, domain: str = domain, runs: dict[str, list[str]] = runs) -> float | None:
            values = [seed_delta(cells, run, label, domain) for run in runs[variant]]
            return None if None in values else sum(values) / len(values)  # type: ignore[arg-type]

        full, half, alone = delta("teacher-m", "384 fp32"), delta("teacher-m", "192 fp32"), delta("teacher", "384 fp32")
        seeds = len(runs["teacher-m"])
        if full is None or half is None or alone is None:
            continue
        gains = full >= 0
        kept = "—" if not gains else ("yes" if half >= 0 else "**no**")
        lines.append(f"| {domain} | {seeds} | {full:+.2f} | {half:+.2f} | {kept} | {alone:+.2f} | {full - alone:+.2f} "
                     f"| {'yes' if full - alone >= -0.2 else '**no**'} |")
    return ["| domain | training seeds | teacher-m 384 | teacher-m 192 | 192 ≥ base where 384 is | teacher 384 | "
            "m − no m | ≤ 0.2 lost |", "|---|---:|---:|---:|---|---:|---:|---|", *lines]


WEIGHTED_SMALL_SIZES = ("192 fp32", "96 fp32")  # the forms whose mean Δ the weighting may cost at most:
WEIGHTED_SMALL_COST = 0.10


def weighting(result: dict[str, Any]) -> tuple[list[str], bool | None]:
    """The full-size weighting's rule (research/findings.md, "Weighting the full size"): teacher-mw against the teacher
    run of the same training seed, per domain, and whether `--matryoshka` without weights should weigh the full width
    2 (None: teacher-mw has not run in all four domains)."""
    cells = result["cells"]
    lines, met = [], True
    for domain in DOMAINS:
        full, half = seed_delta(cells, "teacher-mw", "384 fp32", domain), seed_delta(cells, "teacher-mw", "192 fp32",
                                                                                      domain)
        alone = seed_delta(cells, "teacher", "384 fp32", domain)
        if full is None or half is None or alone is None:
            return [], None
        kept = "—" if full < 0 else ("yes" if half >= 0 else "**no**")
        cost_met = full - alone >= -0.2
        met = met and cost_met and kept != "**no**"
        lines.append(f"| {domain} | {full:+.2f} | {half:+.2f} | {kept} | {alone:+.2f} | {full - alone:+.2f} | "
                     f"{'yes' if cost_met else '**no**'} |")
    small = []
    for label in WEIGHTED_SMALL_SIZES:
        weighted = float(np.mean([seed_delta(cells, "teacher-mw", label, d) for d in DOMAINS]))
        plain = float(np.mean([seed_delta(cells, "teacher-m", label, d) for d in DOMAINS]))
        kept_small = weighted >= plain - WEIGHTED_SMALL_COST
        met = met and kept_small
        small.append(f"{label}: {weighted:+.2f} against teacher-m's {plain:+.2f} ({'kept' if kept_small else 'lost'})")
    verdict = ("met: `--matryoshka` without weights weighs the full width 2 and each prefix 1" if met else
               "not met: `--matryoshka` without weights stays 1 each")
    checks = []
    for domain in DOMAINS:  # a second training seed, read after the verdict
        second = (seed_delta(cells, "teacher-mw-s1", "384 fp32", domain), seed_delta(cells, "teacher-s1", "384 fp32",
                                                                                       domain))
        if None not in second:
            weighted, alone = second  # type: ignore[misc]
            checks.append(f" A second training seed (seed 1, run after the verdict) on {domain}: teacher-mw 384 "
                          f"{weighted:+.2f} against teacher's {alone:+.2f}, a full-size change of "
                          f"{weighted - alone:+.2f}.")
    return ["| domain | teacher-mw 384 | teacher-mw 192 | 192 ≥ base where 384 is | teacher 384 | mw − no m | "
            "≤ 0.2 lost |", "|---|---:|---:|---|---:|---:|---|", *lines, "",
            f"Mean over the four domains, {'; '.join(small)} (at most {WEIGHTED_SMALL_COST:.2f} below). The rule "
            f"written before the runs: **{verdict}**.{''.join(checks)}"], met


def replication(result: dict[str, Any]) -> list[str]:
    """Each training seed's full-size figures where a second seed was run (research/findings.md, "Sizes")."""
    cells = result["cells"]
    lines = []
    for domain in DOMAINS:
        values = [seed_delta(cells, v, "384 fp32", domain) for v in ("teacher", "teacher-s1", "teacher-m",
                                                                      "teacher-m-s1")]
        if None in values:
            continue
        alone0, alone1, full0, full1 = values  # type: ignore[misc]
        lines.append(f"| {domain} | {alone0:+.2f} | {alone1:+.2f} | {full0:+.2f} | {full1:+.2f} | "
                     f"{full0 - alone0:+.2f} | {full1 - alone1:+.2f} | {(full0 + full1 - alone0 - alone1) / 2:+.2f} |")
    if not lines:
        return []
    return ["| domain | teacher 384, seed 42 | seed 1 | teacher-m 384, seed 42 | seed 1 | m − no m, seed 42 | seed 1 "
            "| mean |", "|---|---:|---:|---:|---:|---:|---:|---:|", *lines]


def decisions(result: dict[str, Any]) -> list[str]:
    cells = result["cells"]
    lines = ["| variant | forms named (count over domains × seeds) | mean test Δ of the named form "
             "| named, test Δ < 0 |", "|---|---|---:|---:|"]
    for variant in VARIANTS:
        chosen = [c for c in cells if c["variant"] == variant]
        if not chosen:
            continue
        counts: dict[str, int] = {}
        for cell in chosen:
            counts[cell["named"] or "none"] = counts.get(cell["named"] or "none", 0) + 1
        named = ", ".join(f"{label} ×{count}" for label, count in sorted(counts.items(), key=lambda kv: -kv[1]))
        below = sum(1 for cell in chosen if cell["named"] is not None and cell["named_test_delta"] < 0)
        lines.append(f"| {variant} | {named} | {_mean(chosen, lambda c: c['named_test_delta']):+.2f} | "
                     f"{below} of {sum(1 for cell in chosen if cell['named'] is not None)} |")
    return lines


def render(result: dict[str, Any], doc: Path) -> None:
    from tools.doc_sections import write_section

    write_section(doc, SECTION, section(result))


def section(result: dict[str, Any]) -> str:
    """The `sizes` section of research/results.md, from the study's record (research/results/sizes/study.json)."""
    body = [
        "## Sizes: Matryoshka training, truncation and quantization",
        "",
        f"Generated by `{result['command']}`, finished {result['finished']} ({result['machine']}), from the per-pair "
        "cosines in research/results/sizes/cosines/ (research/experiments/sizes_suite.py says how the runs were made). "
        f"all-MiniLM-L6-v2 on the four suite domains; per split seed ({result['seeds']} seeds) {result['dev']} dev "
        "pairs drawn from the pool and the test pairs sharing no sentence with them. Each cell: Spearman × 100 on "
        "test minus the base's at 384 fp32 on the same pairs (mean over seeds); int8 ranges from 2,000 corpus "
        "sentences; binary by Hamming distance. The base column is the base's own 384 fp32 score.",
        "",
        *tables(result),
        "",
        "The issue's targets with equal weights (teacher-m, `matryoshka_weights=1,1,1`: the default until "
        "2026-11-27; teacher pairing; Δ against the base at 384 fp32, means over split seeds and over the training "
        "seeds a domain has):",
        "",
        *acceptance(result),
        "",
        *(["The full size weighted twice (`teacher-mw`: teacher-m with `--set matryoshka_weights=2,1,1`, one "
           "training seed; its rule in research/findings.md, \"Weighting the full size\", decides `--matryoshka`'s "
           "default weights), against the teacher run of the same seed:", "", *weighted, ""]
          if (weighted := weighting(result)[0]) else []),
        *(["A second training seed (`adapt --seed 1`; planned in research/findings.md before its runs) of both teacher "
           "variants, at 384 fp32:", "", *replicated, ""] if (replicated := replication(result)) else []),
        "The sizes decision (decision/sizes.py: the fewest bytes whose dev Δ ≥ 0 at risk ≤ 0.20) on each drawn dev "
        "set, and the test Δ of what it named (none → the base's 384 fp32, Δ 0):",
        "",
        *decisions(result),
        "",
        "```",
        "python -m research.experiments.sizes_suite --train --encode --study --render research/results.md",
        "```",
    ]
    return "\n".join(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--encode", action="store_true")
    parser.add_argument("--study", action="store_true")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--render", type=Path, help="write the section into this document (with --study)")
    args = parser.parse_args()
    domains = args.domains.split(",")
    if args.train:
        for variant in ("plain", "plain-m", "plain-mw"):
            for domain in domains:
                train(args.work, variant, domain, args.reuse)
    if args.encode:
        encode_all(args.work, args.results, domains)
    if args.study:
        result = study(args.results, args.seeds, args.resamples)
        (args.results / "study.json").write_text(json.dumps(result, indent=1))
        print("\n".join([*tables(result), "", *acceptance(result), "", *weighting(result)[0], "",
                         *decisions(result)]))
        if args.render:
            render(result, args.render)


if __name__ == "__main__":
    main()
