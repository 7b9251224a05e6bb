"""Regenerate research/results.md from scratch: every recipe and two sentence-transformers peers on the same
base models, data and steps; ConSERT's few-shot and temperature curves; speed against the peers.

    python -m research.experiments.results_suite             # full: ~45-60 min on 2 CPU cores, writes runs/results/results.md
    python -m research.experiments.results_suite --quick     # ~5 min smoke run, writes runs/results-quick/results.md
    python -m research.experiments.results_suite --render    # re-render the markdown from the last run's results.json

research/results.md's `suite` section is drawn by research/experiments/suite_stored.py, which runs these jobs keeping every pair's
cosine in the tracked research/results/suite/ and redraws the section from them (the other sections are other studies').

Every job is a fresh subprocess (`python -m sentadapt ...`, `python -m bench.peers`, the speed benchmarks),
so the peak RSS of each is its own (from `os.wait4`). Logs of every job go to WORK/logs/ and every
figure in the document comes from WORK/results.json; `--reuse` skips jobs that already finished (an
interrupted suite continues where it stopped).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sentadapt.evaluation.tasks import TASKS

REPO = Path(__file__).resolve().parents[2]  # the repository root (research/experiments/ is two below)
SHARED = Path("../shared")  # relative: main() runs from the repository root, so logged commands are portable
DEFAULT_TEMPERATURE = 0.1  # recipes/consert.yaml


@dataclass(frozen=True)
class Plan:
    """What one suite run trains and measures."""

    models: list[str]
    steps: int  # optimizer steps for every trained model, ours and the peers
    batch_size: int  # ConSERT and the peers (SG-OPT and CLSR keep their papers' batches, 16 and 512)
    max_length: int
    eval_every: int
    corpus_size: int  # unlabeled STS sentences (ConSERT's transductive setting, paper §4.1)
    tasks: list[str]
    curve_model: str
    few_shot_sizes: list[int]
    temperatures: list[float]
    speed_steps: int
    speed_eval_tasks: str
    clsr_pairs: list[str]  # positive-pair files for CLSR, relative to the data root (../shared/data)
    # issue 13: the base models and these adapted runs on pair classification, reranking and retrieval
    eval_task_recipes: list[str] = field(default_factory=lambda: ["consert", "sg-opt"])
    eval_task_retrieval: bool = True  # the ~55k-document retrieval collection (minutes per model on CPU)


def full_plan() -> Plan:
    l6, l3 = str(SHARED / "models/all-minilm-l6-v2"), str(SHARED / "models/paraphrase-minilm-l3-v2")
    return Plan(models=[l6, l3], steps=100, batch_size=64, max_length=64, eval_every=25, corpus_size=10_000,
                tasks=list(TASKS), curve_model=l3, few_shot_sizes=[100, 1_000, 10_000],
                temperatures=[0.05, 0.1, 0.2], speed_steps=30, speed_eval_tasks="all",
                clsr_pairs=["nli/allnli.dev.jsonl.gz", "nli/snli.test.jsonl.gz", "sts/stsb.train.jsonl"],
                eval_task_recipes=["consert", "sg-opt"], eval_task_retrieval=True)


def quick_plan() -> Plan:
    l3 = str(SHARED / "models/paraphrase-minilm-l3-v2")
    return Plan(models=[l3], steps=6, batch_size=16, max_length=32, eval_every=3, corpus_size=1_000,
                tasks=["stsb", "sickr"], curve_model=l3, few_shot_sizes=[100, 1_000], temperatures=[0.05, 0.1],
                speed_steps=3, speed_eval_tasks="stsb", clsr_pairs=["sts/stsb.train.jsonl"],
                eval_task_recipes=["consert"], eval_task_retrieval=False)


@dataclass
class JobRecord:
    name: str
    argv: list[str]
    seconds: float
    peak_rss_mb: float
    log: str
    output: dict[str, Any] = field(default_factory=dict)


class Runner:
    """Runs each job as a subprocess, logs it, records wall time and its own peak RSS."""

    def __init__(self, work: Path, reuse: bool) -> None:
        self.work, self.reuse = work, reuse
        (work / "logs").mkdir(parents=True, exist_ok=True)
        (work / "jobs").mkdir(parents=True, exist_ok=True)

    def run(self, name: str, argv: list[str]) -> JobRecord:
        done = self.work / "jobs" / f"{name}.json"
        if self.reuse and done.is_file():
            return JobRecord(**json.loads(done.read_text()))
        log = self.work / "logs" / f"{name}.log"
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(argv)}", flush=True)
        started = time.perf_counter()
        with log.open("w", encoding="utf-8") as handle:
            process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO)
            _, status, usage = os.wait4(process.pid, 0)  # rusage of this child alone (Linux: KB)
            process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        if process.returncode != 0:
            tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
            sys.exit(f"{name} failed with exit {process.returncode}; log {log}:\n{tail}")
        record = JobRecord(name, argv, seconds, usage.ru_maxrss / 1024, str(log))
        result_lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("RESULT ")]
        if result_lines:
            record.output = json.loads(result_lines[-1][len("RESULT "):])
        print(f"    done in {seconds:.0f} s, peak RSS {record.peak_rss_mb:.0f} MB", flush=True)
        done.write_text(json.dumps(asdict(record), indent=1) + "\n")
        return record


JOBS = ("quality", "curves", "speed", "eval-tasks")


def sentadapt(*args: str) -> list[str]:
    return [sys.executable, "-m", "sentadapt", *args]


def short(model: str) -> str:
    return Path(model).name


class Suite:
    def __init__(self, plan: Plan, work: Path, data_dir: Path, reuse: bool) -> None:
        self.plan, self.work, self.data_dir = plan, work, data_dir
        self.runner = Runner(work, reuse)
        self.results: dict[str, Any] = {"plan": asdict(plan), "quality": {}, "curves": {}, "speed": {},
                                        "eval_tasks": {}}

    # ------------------------------------------------------------------ building blocks
    def corpus(self, size: int) -> Path:
        path = self.work / f"sts-corpus-{size}.txt"
        self.runner.run(f"corpus-{size}", [sys.executable, "-m", "bench.make_sts_corpus", "--data-dir",
                                           str(self.data_dir), "--limit", str(size), "--out", str(path)])
        return path

    def evaluate(self, tag: str, model: Path | str, dev: float | None = None) -> dict[str, Any]:
        """7-task test scores; STS-B dev too unless known (an adapt run's metrics.json has its model's)."""
        test_json, dev_json = self.work / "evals" / f"{tag}.json", self.work / "evals" / f"{tag}.dev.json"
        test = self.runner.run(f"eval-{tag}", sentadapt("eval", str(model), "--sts", ",".join(self.plan.tasks),
                                                        "--data-dir", str(self.data_dir), "--json", str(test_json)))
        if dev is None:
            self.runner.run(f"dev-{tag}", sentadapt("eval", str(model), "--sts", "stsb", "--split", "dev",
                                                    "--data-dir", str(self.data_dir), "--json", str(dev_json)))
            dev = json.loads(dev_json.read_text())[0]["reports"][0]["average"]
        report = json.loads(test_json.read_text())[0]["reports"][0]
        return {"tasks": {t: v["spearman"] for t, v in report["tasks"].items()}, "average": report["average"],
                "pooling": report["pooling"], "dev": dev, "eval_seconds": test.seconds, "eval_log": test.log}

    def adapt(self, tag: str, recipe: str, model: str, corpus: list[Path], *extra: str) -> dict[str, Any]:
        output = self.work / tag
        job = self.runner.run(f"adapt-{tag}", sentadapt(
            "adapt", *map(str, corpus), "--recipe", recipe, "--base", model, "--output", str(output),
            "--max-steps", str(self.plan.steps), "--dev", "stsb", "--data-dir", str(self.data_dir),
            "--eval-every", str(self.plan.eval_every), "--overwrite", *extra))
        metrics = json.loads((output / "metrics.json").read_text())
        scores = self.evaluate(tag, output, dev=metrics["best_score"])
        return {**scores, "train_seconds": job.seconds, "peak_rss_mb": job.peak_rss_mb, "train_log": job.log,
                "command": " ".join(job.argv[2:]), "dev_base": metrics["base_score"],
                "dev_best": metrics["best_score"], "best_step": metrics["best_step"], "improved": metrics["improved"]}

    def peer(self, tag: str, loss: str, model: str, corpus: Path) -> dict[str, Any]:
        output = self.work / tag
        job = self.runner.run(f"peer-{tag}", [
            sys.executable, "-m", "bench.peers", "--loss", loss, "--model", model, "--corpus", str(corpus),
            "--steps", str(self.plan.steps), "--batch-size", str(self.plan.batch_size), "--max-length",
            str(self.plan.max_length), "--output", str(output)])
        return {**self.evaluate(tag, output), "train_seconds": job.seconds, "peak_rss_mb": job.peak_rss_mb,
                "train_log": job.log, "command": "python " + " ".join(job.argv[1:]),
                "sentences_per_s": job.output.get("sentences_per_s")}

    # ------------------------------------------------------------------ sections
    def quality(self, corpus: Path) -> None:
        sized = ["--batch-size", str(self.plan.batch_size), "--max-length", str(self.plan.max_length)]
        pairs = [self.data_dir.parent / name for name in self.plan.clsr_pairs]
        for model in self.plan.models:
            name = short(model)
            rows = {"base": self.evaluate(f"{name}-base", model)}
            rows["consert"] = self.adapt(f"{name}-consert", "consert", model, [corpus], *sized)
            rows["sg-opt"] = self.adapt(f"{name}-sg-opt", "sg-opt", model, [corpus], "--max-length",
                                        str(self.plan.max_length))
            rows["clsr"] = self.adapt(f"{name}-clsr", "clsr", model, pairs, "--set", "min_score=4")
            rows["simcse"] = self.peer(f"{name}-simcse", "simcse", model, corpus)
            rows["ct"] = self.peer(f"{name}-ct", "ct", model, corpus)
            self.results["quality"][name] = rows
            self.save()

    def curves(self) -> None:
        model, name = self.plan.curve_model, short(self.plan.curve_model)
        quality = self.results["quality"].get(name, {})
        rows: dict[str, Any] = {"base": quality.get("base") or self.evaluate(f"{name}-base", model),
                                "few_shot": {}, "temperature": {}}
        # ConSERT at the suite's corpus size and the default τ is the quality table's run: reuse it
        runs: dict[tuple[int, float], dict[str, Any]] = {}
        if "consert" in quality:
            runs[(self.plan.corpus_size, DEFAULT_TEMPERATURE)] = quality["consert"]
        largest = max(self.plan.few_shot_sizes)
        for size in self.plan.few_shot_sizes:
            rows["few_shot"][size] = self.consert_run(runs, model, size, DEFAULT_TEMPERATURE)
        for temperature in self.plan.temperatures:
            rows["temperature"][temperature] = self.consert_run(runs, model, largest, temperature)
        self.results["curves"][name] = rows
        self.save()

    def consert_run(self, runs: dict[tuple[int, float], dict[str, Any]], model: str, size: int,
                    temperature: float) -> dict[str, Any]:
        if (size, temperature) not in runs:
            sized = ["--batch-size", str(self.plan.batch_size), "--max-length", str(self.plan.max_length)]
            runs[(size, temperature)] = self.adapt(
                f"{short(model)}-consert-n{size}-t{temperature}", "consert", model, [self.corpus(size)], *sized,
                "--set", f"temperature={temperature}")
        return runs[(size, temperature)]

    def speed(self, corpus: Path) -> None:
        model = self.plan.curve_model
        train_json, eval_json = self.work / "speed-train.json", self.work / "speed-eval.json"
        train = self.runner.run("speed-train", [
            sys.executable, "-m", "bench.bench_train", "--model", model, "--corpus", str(corpus), "--steps",
            str(self.plan.speed_steps), "--recipes", "consert,sg-opt", "--out", str(train_json)])
        evaluation = self.runner.run("speed-eval", [
            sys.executable, "-m", "bench.bench_eval", "--model", model, "--data-dir", str(self.data_dir), "--tasks",
            self.plan.speed_eval_tasks, "--out", str(eval_json)])
        self.results["speed"] = {
            "model": short(model), "train": json.loads(train_json.read_text()), "train_command": train.argv,
            "eval": json.loads(eval_json.read_text()), "eval_command": evaluation.argv,
        }
        self.save()

    def eval_tasks(self) -> None:
        """Each shared model and its adapted runs on the domain-style tasks, one `sentadapt eval` per model
        (paired CIs of each run against its base)."""
        data = self.work / "eval-tasks"
        self.runner.run("eval-tasks-data", [sys.executable, "-m", "research.experiments.make_eval_tasks", "--shared",
                                            str(self.data_dir.parent.parent), "--out", str(data)])
        files = ["--pairs", str(data / "pairclass/sickr.test.tsv"), "--pairs", str(data / "pairclass/stsb.test.tsv"),
                 "--rerank", str(data / "rerank/snli.test.jsonl")]
        if self.plan.eval_task_retrieval:
            files += ["--retrieval", str(data / "retrieval/sts-nli")]
        for model in self.plan.models:
            name = short(model)
            runs = [recipe for recipe in self.plan.eval_task_recipes if (self.work / f"{name}-{recipe}").is_dir()]
            out = self.work / "evals" / f"{name}-tasks.json"
            job = self.runner.run(f"eval-tasks-{name}", sentadapt(
                "eval", model, *(str(self.work / f"{name}-{recipe}") for recipe in runs), *files,
                "--json", str(out)))
            self.results["eval_tasks"][name] = {
                "rows": ["base", *runs], "report": json.loads(out.read_text()), "seconds": job.seconds,
                "peak_rss_mb": job.peak_rss_mb, "command": " ".join(job.argv[2:]),
                "data_command": f"python -m research.experiments.make_eval_tasks --shared {self.data_dir.parent.parent} "
                                "--out DIR"}
            self.save()

    def save(self) -> None:
        (self.work / "results.json").write_text(json.dumps(self.results, indent=1) + "\n")

    def run(self, jobs: tuple[str, ...] = JOBS) -> None:
        started = time.perf_counter()
        self.results["machine"] = machine_summary()
        if {"quality", "speed"} & set(jobs):
            corpus = self.corpus(self.plan.corpus_size)
        if "quality" in jobs:
            self.quality(corpus)
        if "curves" in jobs:
            self.curves()
        if "speed" in jobs:
            self.speed(corpus)
        if "eval-tasks" in jobs:
            self.eval_tasks()
        self.results["seconds"] = time.perf_counter() - started
        self.results["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        self.save()

    def keep_earlier(self) -> None:
        """Start from an earlier results.json in the work folder (a `--jobs` subset adds to it)."""
        path = self.work / "results.json"
        if path.exists():
            self.results = {**self.results, **json.loads(path.read_text())}


def machine_summary() -> str:
    import torch

    cores = os.cpu_count()
    return f"{platform.machine()}, {cores} cores, torch {torch.__version__}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few minutes: one small model, a few steps")
    parser.add_argument("--work", type=Path, help="job folder (default runs/results or runs/results-quick)")
    parser.add_argument("--doc", type=Path, help="markdown out (default WORK/results.md)")
    parser.add_argument("--data-dir", type=Path, default=SHARED / "data/sts")
    parser.add_argument("--reuse", action="store_true", help="skip jobs that finished in an earlier run")
    parser.add_argument("--render", action="store_true", help="only re-render the markdown from WORK/results.json")
    parser.add_argument("--jobs", default=",".join(JOBS),
                        help=f"comma-separated jobs to run ({', '.join(JOBS)}); a subset replaces only its own "
                             "section of the doc and keeps the other results")
    parser.add_argument("--note", help="a sentence on the run's conditions (e.g. a shared machine), kept in results")
    args = parser.parse_args()
    plan = quick_plan() if args.quick else full_plan()
    os.chdir(REPO)
    work = args.work or Path("runs/results-quick" if args.quick else "runs/results")
    doc = args.doc or work / "results.md"  # research/results.md's section: research/experiments/suite_stored.py
    jobs = tuple(name.strip() for name in args.jobs.split(",") if name.strip())
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        parser.error(f"--jobs: unknown {', '.join(unknown)}; choose from {', '.join(JOBS)}")
    subset = set(jobs) != set(JOBS)
    if subset and jobs != ("eval-tasks",):
        parser.error(f"--jobs {args.jobs}: only eval-tasks can replace its section alone; run every job "
                     f"(the default) to regenerate {doc}")
    if not args.render:
        suite = Suite(plan, work, args.data_dir, args.reuse)
        if subset:
            suite.keep_earlier()
        suite.run(jobs)
    from research.experiments.results_render import render

    command = "python -m research.experiments.results_suite" + (" --quick" if args.quick else "")
    results = json.loads((work / "results.json").read_text())
    # with --reuse a process runs only part of the suite: the sum over every job's record is what a
    # from-scratch run takes under the same conditions
    results["job_seconds"] = sum(json.loads(path.read_text())["seconds"] for path in (work / "jobs").glob("*.json"))
    if args.note:
        results["note"] = args.note
    if subset and jobs == ("eval-tasks",) and doc.exists():
        # one section regenerated on its own: the rest of the doc keeps what its own run wrote
        from tools.doc_sections import write_section

        from research.experiments.results_render import eval_tasks_section

        results["eval_tasks_generated"] = (
            f"generated by `{command} --jobs eval-tasks`, finished {results['finished']} ({results['machine']}), "
            f"{results['seconds'] / 60:.0f} min" + (f"; {args.note}" if args.note else ""))
        (work / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        write_section(doc, "eval-tasks", eval_tasks_section(results))
        print(f"updated the eval-tasks section of {doc}")
        return
    (work / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    doc.write_text(render(results, command), encoding="utf-8")
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
