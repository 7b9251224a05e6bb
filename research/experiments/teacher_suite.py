"""A teacher on the domain suite (issue 28): paraphrase-MiniLM-L3-v2 adapted with `--teacher all-MiniLM-L6-v2` on
each domain's corpus, settings chosen on the dev sets, then scored once on the held-out test pairs.

    python -m research.experiments.teacher_suite --grid                 # train every grid setting on the 4 domains (dev only)
    python -m research.experiments.teacher_suite --grid --settings A,B  # some of them (several processes may run side by side)
    python -m research.experiments.teacher_suite --final [NAME]         # NAME (default: the dev choice) on test, speed
    python -m research.experiments.teacher_suite --render               # redraw WORK/results.md from WORK/teacher.json

Training goes through research/experiments/domain_suite.py's DomainSuite (`sentadapt adapt DOMAIN/corpus.txt --recipe consert
--teacher L6 --dev DOMAIN/dev.jsonl`, the checkpoint chosen on the 100 dev pairs, the run's own decision by adapt's
default rule), one variant per grid setting, in WORK (runs/teacher; its data/ is runs/domain/data). The grid is
compared on what the runs record on dev (metrics.json: best_score − base_score and the decision), never on test.
The final step evaluates the base, the teacher and the chosen setting's runs in one `sentadapt eval` per domain on
test.jsonl and dev.jsonl, and times both models' encoding of every test sentence (best of 3, alternated) in this
process. The teacher's one-off cost and the cache hit come from the runs' metrics.json `teacher` blocks (the grid's
settings share the cache, $SENTADAPT_CACHE = WORK/cache, so only the first run per domain encodes).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from sentadapt.decision.rule import decision_of  # no torch
from tools.doc_sections import write_atomically, write_section

from research.experiments.doc_sections import current_command
from research.experiments.domain_data import DOMAINS
from research.experiments.domain_suite import MODELS, SHARED, DomainSuite, Plan, parse_extra, score
from research.experiments.results_suite import REPO, machine_summary, sentadapt, short

STUDENT, TEACHER = MODELS  # paraphrase-MiniLM-L3-v2, all-MiniLM-L6-v2
RECIPE = "consert"
SECTION = "teacher"
WORK = Path("runs/teacher")
# name → (what it changes, --set-extra specs, steps, batch); every setting adds --teacher L6 and keeps ConSERT's
# tuned-base preset (lr 5e-5) unless it names lr
GRID: dict[str, tuple[str, list[str], int, int]] = {
    "g-rw1-T05-lr5e5-s100": ("ConSERT + teacher (the mechanism's defaults: recipe_weight 1, T 0.05)", [], 100, 64),
    "g-rw0-T05-lr5e5-s100": ("teacher alone (recipe_weight 0), T 0.05", ["consert:recipe_weight=0"], 100, 64),
    "g-rw1-T10-lr5e5-s100": ("ConSERT + teacher, T 0.1", ["consert:distill_temperature=0.1"], 100, 64),
    # glosses' best checkpoint was the last one in both 100-step settings: twice the steps, same dev schedule (4 evals)
    "g-rw1-T10-lr5e5-s200": ("ConSERT + teacher, T 0.1", ["consert:distill_temperature=0.1"], 200, 64),
}


def suite(name: str, work: Path, reuse: bool = True) -> DomainSuite:
    _, specs, steps, batch = GRID[name]
    extra = parse_extra([f"{RECIPE}:--teacher={TEACHER}", *specs])
    plan = Plan(models=[STUDENT], domains=list(DOMAINS), recipes=[RECIPE], steps=steps, batch_size=batch,
                eval_every=max(1, steps // 4), variant=name, extra=extra, train_only=True)
    return DomainSuite(plan, work, SHARED, reuse)


def output_of(work: Path, name: str, domain: str) -> Path:
    return work / "runs" / name / short(STUDENT) / domain / RECIPE


def train(name: str, work: Path) -> None:
    runs = suite(name, work)
    runs.prepare_data()
    for domain in DOMAINS:
        runs.train(RECIPE, STUDENT, domain)


def dev_row(work: Path, name: str, domain: str) -> dict[str, Any] | None:
    """What one run recorded on dev (None when it has not finished)."""
    path = output_of(work, name, domain) / "metrics.json"
    if not path.is_file():
        return None
    metrics = json.loads(path.read_text())
    job = work / "jobs" / f"adapt-{name}-{short(STUDENT)}-{domain}-{RECIPE}.json"
    return {"base": metrics["base_score"], "best": metrics["best_score"],
            "delta": metrics["best_score"] - metrics["base_score"], "best_step": metrics.get("best_step"),
            "decision": decision_of(metrics).decision, "risk": metrics.get("decision_risk"),
            "teacher_score": metrics.get("teacher_score"), "teacher": metrics.get("teacher"),
            "train_seconds": json.loads(job.read_text())["seconds"] if job.is_file() else None,
            "command": " ".join(json.loads(job.read_text())["argv"][1:]) if job.is_file() else None}


def grid_results(work: Path) -> dict[str, Any]:
    grid = {}
    for name, (what, specs, steps, batch) in GRID.items():
        rows = {domain: row for domain in DOMAINS if (row := dev_row(work, name, domain))}
        if rows:
            grid[name] = {"what": what, "set": specs, "steps": steps, "batch_size": batch, "domains": rows}
    return grid


def applied(row: dict[str, Any], key: str = "delta") -> float:
    return row[key] if row["decision"] == "use-adapted" else 0.0


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def choose(grid: dict[str, Any]) -> str:
    """The complete setting with the best average dev Δ with the decision applied (ties: the raw dev Δ)."""
    complete = {name: g for name, g in grid.items() if len(g["domains"]) == len(DOMAINS)}
    return max(complete, key=lambda name: (mean([applied(r) for r in complete[name]["domains"].values()]),
                                           mean([r["delta"] for r in complete[name]["domains"].values()])))


def test_sentences(data: Path) -> list[str]:
    texts: list[str] = []
    for domain in DOMAINS:
        for line in (data / domain / "test.jsonl").read_text(encoding="utf-8").splitlines():
            pair = json.loads(line)
            texts += [pair["sentence1"], pair["sentence2"]]
    return list(dict.fromkeys(texts))


def encode_speed(texts: list[str], repeats: int = 3, max_length: int = 64) -> dict[str, Any]:
    """Each model's best of `repeats` encodings of `texts` (alternated, so both see the same machine load)."""
    from sentadapt import Encoder

    encoders = {short(model): Encoder.load(model) for model in (STUDENT, TEACHER)}
    times: dict[str, list[float]] = {name: [] for name in encoders}
    for _ in range(repeats):
        for name, encoder in encoders.items():
            started = time.perf_counter()
            encoder.encode(texts, batch_size=128, max_length=max_length)
            times[name].append(time.perf_counter() - started)
    best = {name: min(values) for name, values in times.items()}
    return {"sentences": len(texts), "max_length": max_length, "batch_size": 128, "repeats": repeats,
            "seconds": times, "best": best, "ratio": best[short(TEACHER)] / best[short(STUDENT)]}


def final(name: str, work: Path, results: dict[str, Any]) -> None:
    runs = suite(name, work)
    runs.prepare_data()
    data = runs.data
    results["final"] = {"setting": name, "domains": {}}
    for domain in DOMAINS:
        output, _ = runs.train(RECIPE, STUDENT, domain)  # reused: the grid trained it
        out = work / "evals" / name / f"{domain}.json"
        files = ["test.jsonl", "dev.jsonl"]
        job = runs.runner.run(f"eval-{name}-{domain}", sentadapt(
            "eval", STUDENT, TEACHER, str(output), *(arg for f in files for arg in ("--pairs", str(data / domain / f))),
            "--json", str(out)))
        base, teacher, student = json.loads(out.read_text())
        row = dev_row(work, name, domain)
        assert row is not None
        scores = {who: {"test": score(entry, "test.jsonl", "spearman"), "dev": score(entry, "dev.jsonl", "spearman")}
                  for who, entry in (("base", base), ("teacher", teacher), ("student", student))}
        results["final"]["domains"][domain] = {
            **scores, "decision": row["decision"], "risk": row["risk"], "dev_delta": row["delta"],
            "teacher_run": row["teacher"],
            "eval_command": "python -m sentadapt " + " ".join(job.argv[3:])}
    results["speed"] = encode_speed(test_sentences(data))
    results["cache"] = cache_evidence(results["grid"])


def cache_evidence(grid: dict[str, Any]) -> dict[str, Any]:
    """Per domain: the run that encoded the corpus with the teacher (seconds) and the runs that read the cache."""
    evidence = {}
    for domain in DOMAINS:
        blocks = [(name, g["domains"][domain]["teacher"]) for name, g in grid.items() if domain in g["domains"]]
        encoded = [(name, block) for name, block in blocks if not block["cached"]]
        evidence[domain] = {
            "sentences": blocks[0][1]["sentences"] if blocks else None,
            "encoded_by": [name for name, _ in encoded],
            "encode_seconds": [block["encode_seconds"] for _, block in encoded],
            "cache_hits": sum(block["cached"] for _, block in blocks), "runs": len(blocks)}
    return evidence


# ---------------------------------------------------------------------------------------------------- rendering


def _signed(value: float) -> str:
    return f"{value:+.2f}"


def gap_share(base: float, teacher: float, student: float) -> str:
    """Share of the teacher − base gap the student closed; only where the teacher is ahead."""
    return f"{(student - base) / (teacher - base) * 100:.0f} %" if teacher > base else "–"


def grid_table(results: dict[str, Any]) -> list[str]:
    grid, chosen = results["grid"], results.get("final", {}).get("setting")
    lines = ["| setting | " + " | ".join(f"{d} dev Δ" for d in DOMAINS) +
             " | avg dev Δ | avg dev Δ, decision applied | train time (4 domains) |",
             "|---|" + "---:|" * (len(DOMAINS) + 3)]
    for name, g in grid.items():
        rows = g["domains"]
        verdict = {"use-adapted": "use", "keep-base": "keep"}
        cells = [f"{_signed(rows[d]['delta'])} {verdict.get(rows[d]['decision'], '?')}" if d in rows else "–"
                 for d in DOMAINS]
        complete = len(rows) == len(DOMAINS)
        seconds = [r["train_seconds"] for r in rows.values() if r["train_seconds"]]
        label = f"**{g['what']}** (chosen)" if name == chosen else g["what"]
        label += f", {g['steps']} steps, batch {g['batch_size']}"
        lines.append(f"| {label} | " + " | ".join(cells) + " | " + (
            f"{_signed(mean([r['delta'] for r in rows.values()]))} | "
            f"{_signed(mean([applied(r) for r in rows.values()]))} | {sum(seconds) / 60:.1f} min |"
            if complete else "(incomplete) | – | – |"))
    return lines


def final_table(results: dict[str, Any]) -> tuple[list[str], list[float], list[float]]:
    header = ["domain", "L3 base test", "L6 teacher test", "student test", "Δ raw [95 % CI]", "Δ, decision applied",
              "gap closed (raw)", "gap closed (applied)", "dev Δ", "decision (risk)"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    raw, used = [], []
    for domain, d in results["final"]["domains"].items():
        base, teacher, student = (d[k]["test"]["value"] for k in ("base", "teacher", "student"))
        test = d["student"]["test"]
        applied_delta = test["delta"] if d["decision"] == "use-adapted" else 0.0
        raw.append(test["delta"])
        used.append(applied_delta)
        ci = test.get("ci")
        delta = _signed(test["delta"]) + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "") + (
            " *" if test.get("ci_excludes_0") else "")
        risk = f" ({d['risk']:.2f})" if d.get("risk") is not None else ""
        lines.append(f"| {domain} | {base:.2f} | {teacher:.2f} | {student:.2f} | {delta} | {_signed(applied_delta)} | "
                     f"{gap_share(base, teacher, student)} | {gap_share(base, teacher, base + applied_delta)} | "
                     f"{_signed(d['dev_delta'])} | {d['decision']}{risk} |")
    domains = results["final"]["domains"].values()
    average = {k: mean([d[k]["test"]["value"] for d in domains]) for k in ("base", "teacher", "student")}
    lines.append(f"| average | {average['base']:.2f} | {average['teacher']:.2f} | {average['student']:.2f} | "
                 f"{_signed(mean(raw))} | {_signed(mean(used))} | "
                 f"{gap_share(average['base'], average['teacher'], average['student'])} | "
                 f"{gap_share(average['base'], average['teacher'], average['base'] + mean(used))} | – | "
                 f"{sum(d['decision'] == 'use-adapted' for d in domains)} of {len(raw)} use |")
    return lines, raw, used


def render(results: dict[str, Any], command: str) -> str:
    final_ = results["final"]
    name = final_["setting"]
    g = results["grid"][name]
    lines = ["## A teacher: paraphrase-MiniLM-L3-v2 learns all-MiniLM-L6-v2 on the domain suite", "",
             f"Generated by `{command}`, finished {results.get('finished', '?')} "
             f"({results.get('machine', 'machine not recorded')}). Student paraphrase-MiniLM-L3-v2, teacher "
             "all-MiniLM-L6-v2 (`adapt DOMAIN/corpus.txt --recipe consert --teacher L6`: KL between the in-batch "
             "cosine distributions), the domain suite's splits (`research/experiments/domain_suite.py`), checkpoint chosen "
             "on the 100 dev pairs, `adapt`'s default decision (risk rule, 0.20). The setting was chosen on dev "
             "alone (best average dev Δ with the decision applied); test was read once, afterwards.", "",
             "Dev grid (metrics.json: selected checkpoint − base on the 100 dev pairs, and the run's decision):", "",
             *grid_table(results), "",
             *([f"**Conditions of this run.** {results['note']}", ""] if results.get("note") else []),
             f"Chosen: {g['what']}, {g['steps']} steps, batch {g['batch_size']}. Held-out test (Spearman × 100; "
             "Δ against the base with its paired 95 % CI, * when it excludes 0; decision applied: keep-base → 0; gap "
             "closed: (student − L3) / (L6 − L3), where the teacher is ahead):", ""]
    table, raw, used = final_table(results)
    worst = min(zip(used, final_["domains"]))
    verdict_avg = "met" if mean(used) >= 0.5 else f"not met, {0.5 - mean(used):.2f} short"
    verdict_worst = "met" if worst[0] >= -0.2 else f"not met, {-0.2 - worst[0]:.2f} below"
    lines += [*table, "",
              f"Targets (issue 28): average Δ with the decision applied ≥ +0.50: {_signed(mean(used))}, {verdict_avg}; "
              f"no domain below −0.20: worst {worst[1]} {_signed(worst[0])}, {verdict_worst}. Raw average "
              f"{_signed(mean(raw))}.", ""]
    speed = results["speed"]
    student, teacher = short(STUDENT), short(TEACHER)
    lines += [f"Speed: encoding the {speed['sentences']:,} unique test sentences of the four domains (batch "
              f"{speed['batch_size']}, max length {speed['max_length']}, best of {speed['repeats']}, alternated, "
              f"same process): L3 {speed['best'][student]:.1f} s, L6 {speed['best'][teacher]:.1f} s — the student "
              f"encodes {speed['ratio']:.2f}× as fast as the teacher (the adapted student has the base's "
              "architecture, so its speed is the base's).", ""]
    cache = results["cache"]
    cells = []
    for domain, c in cache.items():
        seconds = ", ".join(f"{s:.1f} s" for s in c["encode_seconds"]) or "none (cache from an earlier run)"
        cells.append(f"{domain} {c['sentences']:,} sentences: {seconds}; cache hit in {c['cache_hits']} of "
                     f"{c['runs']} runs")
    lines += ["Teacher's one-off cost (metrics.json `teacher.encode_seconds` of the run that encoded the corpus; "
              "every later run on the same corpus read `teacher.cached: true`): " + "; ".join(cells) + ".", "",
              "```bash", "python -m research.experiments.teacher_suite --grid   # then --final " + name]
    first = next(iter(g["domains"].values()))
    if first.get("command"):
        lines.append(current_command("python " + first["command"]).replace("/news/", "/DOMAIN/"))
    first_eval = next(iter(final_["domains"].values()))["eval_command"]
    lines += [first_eval.replace("/news/", "/DOMAIN/").replace("/news.json", "/DOMAIN.json"), "```"]
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=WORK)
    # not research/results.md: its runs keep no per-pair outputs, and the distillation section supersedes it
    parser.add_argument("--doc", type=Path, default=WORK / "results.md")
    parser.add_argument("--grid", action="store_true", help="train the grid's settings (dev only)")
    parser.add_argument("--settings", help=f"comma list of grid settings (default all: {', '.join(GRID)})")
    parser.add_argument("--final", metavar="NAME", help="evaluate setting NAME on test (default: the dev choice)",
                        nargs="?", const="")
    parser.add_argument("--render", action="store_true", help="only redraw the section from WORK/teacher.json")
    parser.add_argument("--note", help="a sentence on the conditions of the run, kept in WORK/teacher.json and shown "
                                       "under the grid")
    args = parser.parse_args()
    os.chdir(REPO)
    work: Path = args.work
    (work / "data").parent.mkdir(parents=True, exist_ok=True)
    if not (work / "data").exists():
        (work / "data").symlink_to(Path("../domain/data"))
    os.environ.setdefault("SENTADAPT_CACHE", str((work / "cache").resolve()))
    path = work / "teacher.json"
    results = json.loads(path.read_text()) if path.is_file() else {}
    if args.grid:
        names = [n.strip() for n in (args.settings or ",".join(GRID)).split(",") if n.strip()]
        for name in names:
            if name not in GRID:
                parser.error(f"--settings: unknown {name}; choose from {', '.join(GRID)}")
            train(name, work)
        print("dev grid (avg dev Δ, decision applied):")
        for name, g in grid_results(work).items():
            rows = g["domains"].values()
            print(f"  {name}: {len(rows)} domains, raw {mean([r['delta'] for r in rows]):+.2f}, "
                  f"applied {mean([applied(r) for r in rows]):+.2f}")
    if args.final is not None:
        results["grid"] = grid_results(work)
        final(args.final or choose(results["grid"]), work, results)
        results["machine"] = machine_summary()
        results["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_atomically(path, json.dumps(results, indent=1) + "\n")
    if args.note:
        results["note"] = args.note
        write_atomically(path, json.dumps(results, indent=1) + "\n")
    if args.final is not None or args.render:
        write_section(args.doc, SECTION, render(results, "python -m research.experiments.teacher_suite --final"))
        print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
