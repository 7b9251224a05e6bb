"""The domain-adaptation suite: every sentadapt recipe and the sentence-transformers peers adapted to four
domains built from ../shared (research/experiments/domain_data.py), scored on held-out pairs against the base model.

    python -m research.experiments.domain_suite                  # full: both shared models × 4 domains (an hour+ on 2 cores)
    python -m research.experiments.domain_suite --quick          # smoke: L3 model, one domain, 3 steps, ConSERT + SimCSE
    python -m research.experiments.domain_suite --reuse          # continue an interrupted run (finished jobs are skipped)
    python -m research.experiments.domain_suite --render         # redraw the markdown from WORK/results.json
    python -m research.experiments.domain_suite --variant lr1e-5 --set-extra consert:lr=1e-5 --set-extra consert:--patience=20

Per model × domain: the base model; each sentadapt recipe (`sentadapt adapt DOMAIN/corpus.txt --dev
DOMAIN/dev.jsonl`, checkpoint chosen on the 100 dev pairs; CLSR trains on NLI entailment pairs instead);
each peer (bench/peers.py, same steps, batch and max length, model after the last step); then ONE
`sentadapt eval BASE RUN...` on the domain's test.jsonl (Spearman, the main metric), test-pairclass.tsv
(AP) and dev.jsonl, whose paired bootstrap CIs give every Δ against the base.

The verdict: a sentadapt run's metrics.json `decision` ("use-adapted" / "keep-base", by the rule the run was
made with: the strict rule — dev Δ > 0 with a paired CI excluding 0 — for the runs rendered in research/results.md
so far; research/experiments/decision_study.py compares the rules). Peers get the strict rule applied to their dev Δ from the
eval (sentence-transformers has no verdict). "Verdict applied" counts a keep-base
run's test Δ as 0: the user keeps the base model.

Variants: `--variant NAME` with `--set-extra RECIPE:KEY=VALUE` (→ `--set KEY=VALUE` for that recipe) or
`--set-extra RECIPE:--FLAG[=VALUE]` (a flag of `sentadapt adapt`, or of bench/peers.py for a peer), repeatable,
runs only the recipes it names (or --recipes) on the same splits, stores them under the variant's name and
renders them as extra rows next to the default ones. `--dev-size 25|50|200` (dev-N.jsonl instead of the
100-pair dev.jsonl) needs a variant too.

Layout of WORK (runs/domain, or runs/domain-quick): data/ (the splits), runs/VARIANT/MODEL/DOMAIN/RECIPE/
(adapted models), evals/VARIANT/MODEL-DOMAIN.json (eval output), jobs/ and logs/ (one per job, from the
Runner of research/experiments/results_suite.py: wall time and the job's own peak RSS), results.json (everything rendered).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.decision.rule import STRICT, DecisionRule, decide, decision_of  # no torch
from tools.doc_sections import write_atomically, write_section

from research.experiments.domain_data import DOMAINS
from research.experiments.results_suite import REPO, Runner, machine_summary, sentadapt, short

SHARED = Path("../shared")  # relative: main() runs from the repository root, so logged commands are portable
MODELS = [str(SHARED / "models/paraphrase-minilm-l3-v2"), str(SHARED / "models/all-minilm-l6-v2")]
SENTADAPT_RECIPES = ("consert", "sg-opt", "clsr")
PEERS = ("simcse", "ct", "tsdae")
AUTO = "auto"  # `adapt --recipe auto`: the three recipes as its candidates, then its choice (and the reference rule)
REFERENCE = "best-dev"  # the same candidates, the best dev Δ used when its plain 95 % CI excludes 0 (not adjusted)
CLSR_PAIRS = ["nli/allnli.dev.jsonl.gz", "nli/snli.test.jsonl.gz"]  # relative to ../shared/data
DEV_SIZES = {25: "dev-25.jsonl", 50: "dev-50.jsonl", 100: "dev.jsonl", 200: "dev-200.jsonl"}
DEFAULT_VARIANT = "default"
SECTION = "domain-suite"


@dataclass
class Plan:
    models: list[str]
    domains: list[str]
    recipes: list[str]
    steps: int = 100
    batch_size: int = 64  # ConSERT and the peers; SG-OPT and CLSR keep their recipes' (16, 512), as results_suite
    max_length: int = 64
    eval_every: int = 25
    dev_size: int = 100
    seed: int = 0  # the data split's
    variant: str = DEFAULT_VARIANT
    extra: dict[str, list[str]] = field(default_factory=dict)  # recipe → extra arguments
    train_only: bool = False  # train (or reuse) the runs, evaluate later in one pass with every recipe


def parse_extra(specs: list[str]) -> dict[str, list[str]]:
    """`RECIPE:KEY=VALUE` → {RECIPE: ["--set", "KEY=VALUE"]}; `RECIPE:--FLAG=VALUE` → [--FLAG, VALUE]."""
    extra: dict[str, list[str]] = {}
    for spec in specs:
        recipe, sep, setting = spec.partition(":")
        if not sep or not setting or recipe not in (*SENTADAPT_RECIPES, *PEERS):
            raise SystemExit(f"--set-extra {spec!r}: expected RECIPE:KEY=VALUE or RECIPE:--FLAG[=VALUE] with RECIPE "
                             f"one of {', '.join((*SENTADAPT_RECIPES, *PEERS))}")
        if setting.startswith("--"):
            extra.setdefault(recipe, []).extend(setting.split("=", 1))
        elif recipe in PEERS:
            raise SystemExit(f"--set-extra {spec!r}: peers take bench/peers.py flags (e.g. {recipe}:--lr=1e-5), "
                             "not --set keys")
        elif "=" not in setting:
            raise SystemExit(f"--set-extra {spec!r}: expected KEY=VALUE after '{recipe}:'")
        else:
            extra.setdefault(recipe, []).extend(["--set", setting])
    return extra


def find_task(entry: dict[str, Any], filename: str) -> tuple[int, str, dict[str, Any]]:
    """(report index, task name, task result) of the task read from `filename` in one model's eval entry."""
    stem = filename.rsplit(".", 1)[0]
    for index, report in enumerate(entry["reports"]):
        for name, result in report["tasks"].items():
            if name in (filename, stem):
                return index, name, result
    raise SystemExit(f"eval output: no task for {filename} in {entry.get('model')}; tasks: "
                     f"{[name for report in entry['reports'] for name in report['tasks']]}")


def score(entry: dict[str, Any], filename: str, metric: str) -> dict[str, Any]:
    """The metric × 100 as eval wrote it, with its Δ against the first model (paired CI) when there is one."""
    index, name, result = find_task(entry, filename)
    cell: dict[str, Any] = {"value": result["metrics"][metric], "ci_value": result.get("ci", {}).get(metric)}
    if entry.get("delta_vs_first"):
        delta = entry["delta_vs_first"][index]["tasks"][name][metric]
        cell.update(delta=delta["delta"], ci=delta["ci"], ci_excludes_0=delta["ci_excludes_0"])
    return cell


class DomainSuite:
    def __init__(self, plan: Plan, work: Path, shared: Path, reuse: bool) -> None:
        self.plan, self.work, self.shared = plan, work, shared
        self.runner = Runner(work, reuse)
        self.results: dict[str, Any] = {"variants": {}}
        path = work / "results.json"
        if path.exists():  # other variants, models and domains keep what their own runs wrote
            self.results = json.loads(path.read_text())
        variant = self.results["variants"].setdefault(plan.variant, {"models": {}})
        variant["plan"] = asdict(plan)
        self.written: set[tuple[str, str]] = set()  # (model, domain) entries this process measured

    @property
    def data(self) -> Path:
        return self.work / "data"

    def save(self) -> None:
        """Write what this process measured into results.json as it is now on disk: suites run side by side
        on one WORK (other variants, models or recipes in parallel) each add their own entries."""
        import fcntl

        path = self.work / "results.json"
        with (self.work / ".results.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # read-merge-write as one step against the other processes
            self._merge_into(path)

    def _merge_into(self, path: Path) -> None:
        current = json.loads(path.read_text()) if path.exists() else {"variants": {}}
        current.update({key: value for key, value in self.results.items() if key != "variants"})
        mine = self.results["variants"][self.plan.variant]
        variant = current.setdefault("variants", {}).setdefault(self.plan.variant, {"models": {}})
        variant.update({key: value for key, value in mine.items() if key != "models"})
        for model, domain in self.written:
            variant["models"].setdefault(model, {})[domain] = mine["models"][model][domain]
        self.results = current
        write_atomically(path, json.dumps(current, indent=1) + "\n")

    def prepare_data(self) -> None:
        manifest = self.data / "manifest.json"
        argv = [sys.executable, "-m", "research.experiments.domain_data", "--shared", str(self.shared), "--out", str(self.data),
                "--seed", str(self.plan.seed)]
        if not manifest.exists() or json.loads(manifest.read_text())["seed"] != self.plan.seed or any(
                not (self.data / domain / "test.jsonl").exists() for domain in self.plan.domains):
            self.runner.reuse, reuse = False, self.runner.reuse  # the split must match this plan's seed
            self.runner.run(f"data-seed{self.plan.seed}", argv)
            self.runner.reuse = reuse
        self.results["data"] = {"command": "python " + " ".join(argv[1:]),
                                "manifest": json.loads(manifest.read_text())}

    def train(self, recipe: str, model: str, domain: str) -> tuple[Path, dict[str, Any]]:
        plan, folder = self.plan, self.data / domain
        output = self.work / "runs" / plan.variant / short(model) / domain / recipe
        tag = f"{plan.variant}-{short(model)}-{domain}-{recipe}"
        extra = plan.extra.get(recipe, [])
        if recipe in PEERS:
            job = self.runner.run(f"peer-{tag}", [
                sys.executable, "-m", "bench.peers", "--loss", recipe, "--model", model, "--corpus",
                str(folder / "corpus.txt"), "--steps", str(plan.steps), "--batch-size", str(plan.batch_size),
                "--max-length", str(plan.max_length), "--output", str(output), *extra])
            return output, {"kind": "peer", "train_seconds": job.seconds, "peak_rss_mb": job.peak_rss_mb,
                            "command": "python " + " ".join(job.argv[1:]), "log": job.log}
        if recipe == "clsr":
            inputs = [str(self.shared / "data" / name) for name in CLSR_PAIRS]
            sized = ["--set", "min_score=4"]
        else:
            inputs = [str(folder / "corpus.txt")]
            sized = ["--max-length", str(plan.max_length)]
            if recipe == "consert":
                sized += ["--batch-size", str(plan.batch_size)]
        job = self.runner.run(f"adapt-{tag}", sentadapt(
            "adapt", *inputs, "--recipe", recipe, "--base", model, "--dev", str(folder / DEV_SIZES[plan.dev_size]),
            "--max-steps", str(plan.steps), "--eval-every", str(plan.eval_every), "--output", str(output),
            "--overwrite", *sized, *extra))
        return output, run_row(output, job.seconds, job.peak_rss_mb, "python " + " ".join(job.argv[1:]), job.log)

    def train_auto(self, model: str, domain: str) -> tuple[dict[str, Any], list[tuple[str, Path, dict[str, Any]]]]:
        """`adapt --recipe auto` with the three recipes as candidates, each with the settings its own row uses
        (ConSERT at the suite's batch, max length on the text recipes, CLSR on NLI pairs with min_score 4): the
        candidates ARE the single-recipe runs. Returns auto's metrics.json and (recipe, folder, row) per candidate."""
        plan, folder = self.plan, self.data / domain
        output = self.work / "runs" / plan.variant / short(model) / domain / AUTO
        length = f"max_length={plan.max_length}"
        candidates = f"consert:batch_size={plan.batch_size}:{length},sg-opt:{length},clsr:min_score=4"
        job = self.runner.run(f"adapt-{plan.variant}-{short(model)}-{domain}-{AUTO}", sentadapt(
            "adapt", str(folder / "corpus.txt"), *(str(self.shared / "data" / name) for name in CLSR_PAIRS),
            "--recipe", AUTO, "--candidates", candidates, "--base", model,
            "--dev", str(folder / DEV_SIZES[plan.dev_size]), "--max-steps", str(plan.steps),
            "--eval-every", str(plan.eval_every), "--output", str(output), "--overwrite", *plan.extra.get(AUTO, [])))
        metrics = json.loads((output / "metrics.json").read_text())
        command = "python " + " ".join(job.argv[1:])
        rows = []
        for candidate in metrics["candidates"]:
            run = output / candidate["output"]
            row = run_row(run, candidate["seconds"] or 0.0, job.peak_rss_mb, command, job.log)
            rows.append((candidate["recipe"], run, row))
        metrics["train_seconds"], metrics["peak_rss_mb"], metrics["command"] = job.seconds, job.peak_rss_mb, command
        return metrics, rows

    def model_domain(self, model: str, domain: str) -> None:
        plan, folder = self.plan, self.data / domain
        rows: dict[str, dict[str, Any]] = {}
        outputs: list[Path] = []
        auto_metrics = None
        for recipe in plan.recipes:
            if recipe == AUTO:
                auto_metrics, candidates = self.train_auto(model, domain)
                for name, output, row in candidates:
                    rows[name] = row
                    outputs.append(output)
                continue
            output, rows[recipe] = self.train(recipe, model, domain)
            outputs.append(output)
        if plan.train_only:
            return
        dev_file = DEV_SIZES[plan.dev_size]
        files = ["test.jsonl", "test-pairclass.tsv", dev_file]
        out = self.work / "evals" / plan.variant / f"{short(model)}-{domain}.json"
        # the job name lists the models evaluated: a --reuse pass with other recipes must not take an earlier
        # eval of fewer models, whose entries would then be matched to the wrong rows
        job = self.runner.run(f"eval-{plan.variant}-{short(model)}-{domain}-{'+'.join(rows)}", sentadapt(
            "eval", model, *map(str, outputs), *(arg for name in files for arg in ("--pairs", str(folder / name))),
            "--json", str(out)))
        entries = json.loads(out.read_text())
        evaluated = [Path(entry["model"]) for entry in entries[1:]]
        if evaluated != outputs:
            sys.exit(f"{out}: evaluates {[str(p) for p in evaluated]}, not this plan's {[str(p) for p in outputs]}")
        base = entries[0]
        rows = {"base": {"kind": "base", "test": score(base, "test.jsonl", "spearman"),
                         "test_ap": score(base, "test-pairclass.tsv", "ap"),
                         "dev": score(base, dev_file, "spearman")}, **rows}
        for recipe, entry in zip(list(rows)[1:], entries[1:]):
            row = rows[recipe]
            row["test"] = score(entry, "test.jsonl", "spearman")
            row["test_ap"] = score(entry, "test-pairclass.tsv", "ap")
            if row["kind"] == "peer":  # the sentadapt rule applied to the peer's dev Δ from this eval
                row["dev"] = score(entry, dev_file, "spearman")
                dev = row["dev"]
                # a peer has one dev Δ and its CI (no per-step outputs to weigh): the strict rule
                row["decision"] = decide(dev["delta"], dev["ci"], None, rule=DecisionRule(STRICT)).decision
                row["decision_source"] = "dev Δ CI (eval)"
        if auto_metrics is not None:
            rows.update(selection_rows(auto_metrics, rows))
        variant = self.results["variants"][plan.variant]
        self.written.add((short(model), domain))
        variant["models"].setdefault(short(model), {})[domain] = {
            "rows": rows, "eval": {"seconds": job.seconds, "peak_rss_mb": job.peak_rss_mb,
                                   "command": "python -m sentadapt " + " ".join(job.argv[3:])}}
        self.save()

    def run(self) -> None:
        started = time.perf_counter()
        self.prepare_data()
        self.results["machine"] = machine_summary()
        self.save()
        for model in self.plan.models:
            for domain in self.plan.domains:
                self.model_domain(model, domain)
        variant = self.results["variants"][self.plan.variant]
        variant["seconds"] = time.perf_counter() - started
        variant["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        self.save()


def run_row(output: Path, seconds: float, peak_rss_mb: float, command: str, log: str) -> dict[str, Any]:
    """A sentadapt run's row from its metrics.json: dev Δ, its CI and the run's own decision."""
    metrics = json.loads((output / "metrics.json").read_text())
    return {
        "kind": "sentadapt", "train_seconds": seconds, "peak_rss_mb": peak_rss_mb, "command": command, "log": log,
        "dev": {"value": metrics["best_score"], "base": metrics["base_score"], "delta": metrics.get("dev_change"),
                "ci": metrics.get("dev_change_ci"), "ci_excludes_0": metrics.get("dev_change_ci_excludes_0")},
        "best_step": metrics.get("best_step"), "improved": metrics.get("improved"),
        "decision": decision_of(metrics).decision, "decision_source": "metrics.json"}


def selection_rows(auto: dict[str, Any], rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The `auto` row (its recorded choice) and the reference row (the best dev Δ, used when its plain CI excludes
    0: the multiple comparison not paid for), both from the candidates' held-out scores: a chosen candidate's
    model is the candidate's own. When nothing is chosen, the raw test Δ shown is the best-dev candidate's (what
    would have shipped) and the decision keeps the base."""
    candidates = auto["candidates"]
    by_name = {c["name"]: c["recipe"] for c in candidates}
    best = max(candidates, key=lambda c: c["dev_change"])
    reference = best["name"] if best["dev_change"] > 0 and (
        best["dev_change_ci"] is None or best["dev_change_ci"][0] > 0) else None

    def row(chosen: str | None, decision_source: str) -> dict[str, Any]:
        source = rows[by_name[chosen or best["name"]]]
        picked = next(c for c in candidates if c["name"] == (chosen or best["name"]))
        return {"kind": "selection", "train_seconds": auto["train_seconds"], "peak_rss_mb": auto["peak_rss_mb"],
                "test": source["test"], "test_ap": source["test_ap"],
                "dev": {**source["dev"], "ci": picked["dev_change_adjusted_ci"] if decision_source == "auto" else
                        picked["dev_change_ci"]},
                "decision": "use-adapted" if chosen else "keep-base", "chosen": chosen and by_name[chosen],
                "decision_source": decision_source, "command": auto["command"]}

    return {AUTO: row(auto["chosen"], "auto"), REFERENCE: row(reference, "best dev Δ, plain 95 % CI")}


def _names(value: str | None, allowed: list[str] | tuple[str, ...], option: str) -> list[str] | None:
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise SystemExit(f"{option}: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(allowed)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: L3 model, one domain, 3 steps, ConSERT + "
                        "SimCSE; writes runs/domain-quick and its own markdown")
    parser.add_argument("--work", type=Path, help="job folder (default runs/domain or runs/domain-quick)")
    parser.add_argument("--doc", type=Path, help="markdown out (default research/results.md, section domain-suite; "
                        "with --quick or --work: WORK/domain-suite.md)")
    parser.add_argument("--shared", type=Path, default=SHARED)
    parser.add_argument("--models", help="comma list of model folders (default both shared MiniLMs)")
    parser.add_argument("--domains", help=f"comma list (default all: {','.join(DOMAINS)})")
    parser.add_argument("--recipes", help=f"comma list of sentadapt recipes and peers (default "
                        f"{','.join((*SENTADAPT_RECIPES, *PEERS))}; with --variant: the recipes --set-extra names)")
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps of every trained model (default 100)")
    parser.add_argument("--batch-size", type=int, default=64, help="ConSERT and the peers (default 64)")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--eval-every", type=int, help="dev evaluation interval (default steps / 4)")
    parser.add_argument("--dev-size", type=int, default=100, choices=sorted(DEV_SIZES),
                        help="dev pairs selecting checkpoints (default 100; others need --variant)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data split (default 0)")
    parser.add_argument("--variant", default=DEFAULT_VARIANT, help="name of a lever variant (see above)")
    parser.add_argument("--set-extra", action="append", default=[], metavar="RECIPE:SETTING",
                        help="RECIPE:KEY=VALUE (→ --set) or RECIPE:--FLAG[=VALUE]; repeatable")
    parser.add_argument("--reuse", action="store_true", help="skip jobs that finished in an earlier run")
    parser.add_argument("--train-only", action="store_true",
                        help="train only (e.g. one recipe per process in parallel); a later --reuse pass with "
                             "every recipe evaluates them together")
    parser.add_argument("--note", help="a sentence on the conditions of the run (a shared machine, reused runs), "
                                       "kept in results.json and shown under the heading")
    parser.add_argument("--render", action="store_true", help="only re-render the markdown from WORK/results.json")
    parser.add_argument("--section", default=SECTION, help=f"generated section of --doc to write (default {SECTION}; "
                        "e.g. domain-suite-auto for a --recipes auto run beside the default one)")
    args = parser.parse_args()
    os.chdir(REPO)
    work = args.work or Path("runs/domain-quick" if args.quick else "runs/domain")
    # only the default suite writes research/results.md: a sweep in its own --work folder renders beside its runs
    standalone = args.quick or args.work is not None
    doc = args.doc or (work / "domain-suite.md" if standalone else Path("research/results.md"))
    extra = parse_extra(args.set_extra)
    if (extra or args.dev_size != 100) and args.variant == DEFAULT_VARIANT:
        parser.error("--set-extra and --dev-size change the runs: name them with --variant NAME")
    all_recipes = [*SENTADAPT_RECIPES, *PEERS, AUTO]
    recipes = _names(args.recipes, all_recipes, "--recipes")
    if recipes is None:
        recipes = (["consert", "simcse"] if args.quick else
                   list(extra) if args.variant != DEFAULT_VARIANT and extra else [*SENTADAPT_RECIPES, *PEERS])
    if AUTO in recipes and set(recipes) & set(SENTADAPT_RECIPES):
        parser.error(f"--recipes: {AUTO} trains {', '.join(SENTADAPT_RECIPES)} as its candidates; do not list them too")
    steps = 3 if args.quick else args.steps
    plan = Plan(
        models=[name.strip() for name in args.models.split(",") if name.strip()] if args.models
        else ([MODELS[0]] if args.quick else MODELS),
        domains=_names(args.domains, list(DOMAINS), "--domains") or (["forums"] if args.quick else list(DOMAINS)),
        recipes=recipes, steps=steps, batch_size=16 if args.quick else args.batch_size,
        max_length=32 if args.quick else args.max_length,
        eval_every=args.eval_every or max(1, steps // 4), dev_size=args.dev_size, seed=args.seed,
        variant=args.variant, extra=extra, train_only=args.train_only)
    for model in plan.models:
        if not Path(model).is_dir():
            parser.error(f"--models: {model} is not a model folder")
    if not args.render:
        DomainSuite(plan, work, args.shared, args.reuse).run()
    from research.experiments.domain_render import render

    command = "python -m research.experiments.domain_suite" + (" --quick" if args.quick else "")
    if not (work / "results.json").is_file():
        parser.error(f"--render: {work / 'results.json'} not found; run the suite first (without --render)")
    results = json.loads((work / "results.json").read_text())
    results["job_seconds"] = sum(json.loads(path.read_text())["seconds"] for path in (work / "jobs").glob("*.json"))
    if args.note:
        results["note"] = args.note
        write_atomically(work / "results.json", json.dumps(results, indent=1) + "\n")
    markdown = render(results, command)
    if standalone and not args.doc:
        doc.write_text(markdown + "\n", encoding="utf-8")
    else:
        write_section(doc, args.section, markdown)
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
