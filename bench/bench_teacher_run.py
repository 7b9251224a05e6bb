"""Benchmark (issue 60): the faster teacher run as a whole process, paired against an older checkout of sentadapt and
against sentence-transformers' own distillation on the same teacher vectors, model, batches and steps.

    python -m bench.bench_teacher_run --prepare runs/teacher-run        # 3,000 STS sentences + a 384-wide vectors file
    python -m bench.bench_teacher_run --inputs runs/teacher-run --rounds 3 [--old /path/to/checkout]

The run measured (`default`) is the issue's: `sentadapt adapt corpus.txt --base all-MiniLM-L6-v2 --teacher
vectors.jsonl --max-steps 30 --dev none` with the teacher run's defaults (ConSERT, tuned-base preset, distillation kl,
batch 64, neighbour batches, and since issue 60 `mixed_precision: auto`: bf16 autocast where the CPU multiplies bf16
natively). `views` adds the opt-in lever `--set views=none,feature-cutoff` (the clean view serves the distillation
term: two encoder passes per step instead of three), which cost all-MiniLM-L6-v2 ← all-mpnet-base-v2 0.16-0.74 of
raw Δ per domain on the suite (research/findings.md, "A faster teacher run").
The vectors are paraphrase-MiniLM-L3-v2's (384 wide) of the same
sentences, so both students see the same targets. `--old` runs the same command with an older checkout first on
PYTHONPATH (e.g. `git worktree add ../old a62588b`); each process gets its own corpus cache, warmed by one
unmeasured run, so every measured run reads its tokens and teacher table from the cache as a user's second run does
(and, since issue 84, this CPU's timing of the training pass: the default's choice of precision and pass cost is
printed and recorded). `--today` runs a second older checkout the same way (the commit before a change measured).
`one-pass` is the default with one padded pass a step (its cache's timings flattened: the length chunks out),
`fixed-cost` the default with the pass cost fixed before issue 84 (100 tokens: its cache's timings put on that line)
and `malloc` the default with glibc's mmap and trim thresholds raised (bench/README.md, issue 84). `--pass-penalty S`
runs every command on a stand-in for a CPU where a pass costs more: each backbone forward first sleeps S seconds
(bench/pass_penalty). Since the pass is packed (a BERT student's: sentadapt/model/packed_pass.py), a pass cost plans
only its attention chunks: `fixed-cost` is then the packed pass with attention cut at 100 tokens, and `one-pass`
still one padded pass (one chunk is never packed).

The peer (`st`): sentence-transformers' distillation as its docs train it — MSELoss between the student's vector
and the teacher's (the "model distillation" example: the teacher's embeddings as labels), through
SentenceTransformerTrainer, batch 64, 30 steps, max length 64, lr 5e-5 with 10 % warm-up (our run's). It is run
in fp32 (its CPU default) and with `bf16=True` (the same autocast our `mixed_precision auto` picks here).

Rounds alternate the commands (default, views, old, st fp32, st bf16, ...), so drift hits all alike; reported are
each command's median whole-process seconds and peak RSS (wait4), the training loop's examples/s (ours: train.log's
last running rate; the peer: a callback timing its steps), and the ratios against `default` in the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.peers import isa_environment
from sentadapt.options import PASS_OVERHEAD_TOKENS
from sentadapt.train.pass_costs import SHAPES

SHARED = Path("../shared")
STUDENT = SHARED / "models/all-minilm-l6-v2"
TEACHER = SHARED / "models/paraphrase-minilm-l3-v2"
SENTENCES = 3000
VIEWS = ["--set", "views=none,feature-cutoff"]  # the opt-in lever above the defaults
SHORT_WORDS = 20  # the issue's "short sentences": at most 20 words (the STS sentences' median is 9)
# glibc's largest mmap threshold (32 MiB on 64-bit: larger blocks are always mapped afresh) and a trim threshold of
# 1 GiB (freed heap is kept for the next step instead of returned and faulted in again)
MALLOC_THRESHOLDS = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
STEPS, BATCH, MAX_LENGTH, LR = 30, 64, 64, 5e-5  # the teacher run's batch, max length and tuned-base lr
PASS_PENALTY = Path(__file__).resolve().parent / "pass_penalty"  # its sitecustomize sleeps before each pass


def prepare(folder: Path) -> None:
    """FOLDER/corpus.txt: 3,000 distinct STS sentences of at most 20 words (a seeded sample, bench.make_sts_corpus);
    FOLDER/vectors.jsonl: the teacher's vector of each (`text`, `embedding`), as `--teacher FILE.jsonl` reads it."""
    import random

    from bench.make_sts_corpus import unique_sentences
    from sentadapt.model.encoder import Encoder

    sentences = [text for text in unique_sentences(SHARED / "data/sts") if len(text.split()) <= SHORT_WORDS]
    random.Random(0).shuffle(sentences)
    sentences = sentences[:SENTENCES]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.txt").write_text("".join(f"{text}\n" for text in sentences), encoding="utf-8")
    vectors = Encoder.load(str(TEACHER), device="cpu").encode(sentences, max_length=128)
    with (folder / "vectors.jsonl").open("w", encoding="utf-8") as handle:
        for text, vector in zip(sentences, vectors.tolist(), strict=True):
            handle.write(json.dumps({"text": text, "embedding": [round(x, 6) for x in vector]}) + "\n")
    print(f"wrote {folder}/corpus.txt and vectors.jsonl ({len(sentences)} sentences)")


def peer(inputs: Path, bf16: bool, output: Path) -> None:
    """sentence-transformers' MSELoss distillation on the vectors file; prints `RESULT {json}`."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    from bench.peers import SEED, loop_timer

    rows = [json.loads(line) for line in (inputs / "vectors.jsonl").read_text(encoding="utf-8").splitlines()]
    set_seed(SEED)
    model = SentenceTransformer(str(STUDENT), device="cpu")
    model.max_seq_length = MAX_LENGTH
    dataset = Dataset.from_dict({"sentence": [row["text"] for row in rows],
                                 "label": [row["embedding"] for row in rows]})
    arguments = Arguments(output_dir=str(output), per_device_train_batch_size=BATCH, max_steps=STEPS, learning_rate=LR,
                          warmup_steps=max(1, STEPS // 10), save_strategy="no", logging_steps=10_000, report_to=[],
                          bf16=bf16, use_cpu=True, dataloader_drop_last=True, seed=SEED, disable_tqdm=True)
    timer = loop_timer()
    SentenceTransformerTrainer(model=model, args=arguments, train_dataset=dataset, loss=losses.MSELoss(model),
                               callbacks=[timer]).train()
    model.save(str(output))  # as our run publishes its model
    print("RESULT " + json.dumps({"examples_per_s": BATCH * STEPS / timer.seconds}))


def commands(inputs: Path, old: Path | None, work: Path, isa: str | None = None, today: Path | None = None,
             penalty: float | None = None) -> dict[str, tuple[list[str], dict[str, str], Path]]:
    """Each measured command, its environment (offline; its own cache folder) and the folder it runs in: `python -m`
    puts that folder first on sys.path, so the old checkout's runs start in it. `isa` (e.g. avx2): every command runs
    with kernels of that instruction set alone (bench.peers.isa_environment) and ours in fp32 (`--mixed-precision no`):
    a CPU without native bf16, where `auto` is fp32, stood in for on one that has it (issue 70). `penalty` (seconds):
    every command sleeps that long before each backbone forward (bench/pass_penalty)."""
    inputs, work = inputs.resolve(), work.resolve()
    precision = ("--mixed-precision", "no") if isa else ()

    def ours(name: str, extra: tuple[str, ...] = ()) -> list[str]:
        return [sys.executable, "-m", "sentadapt", "adapt", str(inputs / "corpus.txt"), "--base", str(STUDENT),
                "--teacher", str(inputs / "vectors.jsonl"), "--max-steps", str(STEPS), "--dev", "none",
                "--output", str(work / name), "--overwrite", *precision, *extra]

    def env(name: str, checkout: Path | None = None, **extra: str) -> dict[str, str]:
        kernels = isa_environment(isa) if isa else {}
        found = {**os.environ, "HF_HUB_OFFLINE": "1", "SENTADAPT_CACHE": str(work / f"cache-{name}"), **kernels,
                 **extra}
        paths = [str(checkout.resolve())] if checkout is not None else []
        if penalty is not None:  # its sitecustomize first: python imports the first one on the path
            found["PASS_PENALTY_S"] = str(penalty)
            paths.insert(0, str(PASS_PENALTY))
        if paths:
            found["PYTHONPATH"] = os.pathsep.join(paths)
        return found

    here = Path.cwd()
    found = {"default": (ours("default"), env("default"), here),
             "views": (ours("views", tuple(VIEWS)), env("views"), here),
             # each precision named (issue 84): the default is `auto`, so one of these is the default's twin
             "fp32": (ours("fp32", ("--mixed-precision", "no")), env("fp32"), here),
             "bf16": (ours("bf16", ("--mixed-precision", "bf16")), env("bf16"), here),
             # the default with one padded pass a step: what is left of a step's cost once the chunks are out
             "one-pass": (ours("one-pass"), env("one-pass"), here),
             # the default with the pass cost fixed before issue 84: what the timing changed, on this CPU
             "fixed-cost": (ours("fixed-cost"), env("fixed-cost"), here),
             # the default with glibc's allocator told to keep large blocks: the tensors of a pass reuse freed heap
             # instead of new pages (bench/README.md, "glibc's allocator thresholds")
             "malloc": (ours("malloc"), env("malloc", **MALLOC_THRESHOLDS), here)}
    for name, checkout in (("old", old), ("today", today)):  # a62588b; the commit before a change measured
        if checkout is not None:
            found[name] = (ours(name), env(name, checkout), checkout.resolve())
    for precision in ("fp32", "bf16"):
        argv = [sys.executable, "-m", "bench.bench_teacher_run", "--peer", precision, "--inputs", str(inputs),
                "--output", str(work / f"st-{precision}")]
        found[f"st {precision}"] = (argv, env("st"), here)
    return found


def machine(isa: str | None = None) -> dict[str, Any]:
    """The CPU the figures come from (a stand-in's kernels named: a stand-in is not the CPU) and the instruction sets
    that decide the matmuls."""
    import torch

    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    return {"cpu": model, "cores": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "isa": {flag: flag in flags for flag in ("avx2", "avx512f", "avx512_bf16", "amx_tile")},
            "kernels": isa_environment(isa) if isa else "native"}


def chosen_arithmetic(work: Path) -> dict[str, Any]:
    """What the default run's `--mixed-precision auto` chose on this CPU, why, and the pass cost its timing gave
    the length chunks (its metrics.json: the run decides, timed once per CPU in its warm-up; issue 84)."""
    env = json.loads((work.resolve() / "default" / "metrics.json").read_text())["environment"]
    return {"precision": env["mixed_precision"], "reason": env.get("precision_reason"),
            "pass_cost": env.get("pass_cost")}


def flat(seconds: list[float]) -> list[float]:
    """`one-pass`'s timings: each shape the mean, so the fitted line is flat (a pass costs the most: one padded pass
    a step)."""
    return [statistics.mean(seconds)] * len(seconds)


def on_fixed_cost(seconds: list[float]) -> list[float]:
    """`fixed-cost`'s timings: on the line seconds = b · (tokens + PASS_OVERHEAD_TOKENS) through the same sum, so the
    fitted cost is the one fixed before issue 84."""
    tokens = [rows * length for rows, length in SHAPES]
    per_token = sum(seconds) / sum(count + PASS_OVERHEAD_TOKENS for count in tokens)
    return [per_token * (count + PASS_OVERHEAD_TOKENS) for count in tokens]


RESHAPED = {"one-pass": flat, "fixed-cost": on_fixed_cost}  # the commands whose cache is the default's, reshaped


def reshaped_timings(default_cache: Path, cache: Path, command: str) -> None:
    """`command`'s cache: the default's timings of the training pass (its warm-up ran first), each precision's
    reshaped by RESHAPED[command] with the same sum, so `auto` compares the same sums and picks what the default
    picked while the length chunks get another pass cost. A default that timed nothing (a GPU, several processes)
    chunks nothing: the bench stops rather than measure the default twice."""
    records = sorted((default_cache / "pass-costs").glob("pass-*.json"))
    if not records:
        sys.exit(f"{command}: the default's run timed no training pass (nothing in {default_cache / 'pass-costs'}): "
                 f"on a GPU or with several processes nothing is chunked, so there is no {command} run to compare")
    for record_file in records:
        record = json.loads(record_file.read_text())
        record["seconds"] = {precision: RESHAPED[command](seconds) for precision, seconds in record["seconds"].items()}
        (cache / "pass-costs").mkdir(parents=True, exist_ok=True)
        (cache / "pass-costs" / record_file.name).write_text(json.dumps(record))


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """One whole process: wall seconds, its peak RSS (wait4), its output."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"{' '.join(argv[:4])} failed:\n{output[-3000:]}")
    return {"seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024, "output": output}


def loop_rate(name: str, result: dict[str, Any], work: Path) -> float:
    if name.startswith("st"):
        line = next(line for line in result["output"].splitlines() if line.startswith("RESULT "))
        return float(json.loads(line[len("RESULT "):])["examples_per_s"])
    # the loop's running rate at its last step
    last = (work.resolve() / name / "train.log").read_text().splitlines()[-1]
    return float(json.loads(last)["examples_per_s"])


def measure(inputs: Path, old: Path | None, rounds: int, work: Path, isa: str | None = None,
            only: list[str] | None = None, today: Path | None = None, penalty: float | None = None) -> dict[str, Any]:
    runs = commands(inputs, old, work, isa, today, penalty)
    if only:
        unknown = sorted(set(only) - set(runs))
        if unknown:
            sys.exit(f"--only: no command {', '.join(unknown)}; choose among {', '.join(runs)}")
        runs = {name: runs[name] for name in runs if name in only or name == "default"}
    for name, (argv, env, cwd) in runs.items():  # warm-up: caches filled, files read once
        if name in RESHAPED:
            reshaped_timings(work / "cache-default", work / f"cache-{name}", name)
        timed(argv, env, cwd)
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
    for round_index in range(rounds):
        for name, (argv, env, cwd) in runs.items():
            result = timed(argv, env, cwd)
            figures[name].append({"seconds": result["seconds"], "peak_rss_mb": result["peak_rss_mb"],
                                  "examples_per_s": loop_rate(name, result, work)})
            print(f"round {round_index + 1} {name}: {result['seconds']:.1f} s", flush=True)
    return figures


def report(figures: dict[str, list[dict[str, float]]]) -> list[str]:
    ours = figures["default"]
    lines = [f"{'command':<10} {'wall s':>8} {'loop ex/s':>10} {'peak RSS MB':>12} {'wall ÷ default':>15} "
             f"{'ex/s default ÷ it':>18}"]
    for name, runs in figures.items():
        def median(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(run[key] for run in runs)
        wall = statistics.median(run["seconds"] / mine["seconds"] for run, mine in zip(runs, ours, strict=True))
        rate = statistics.median(mine["examples_per_s"] / run["examples_per_s"]
                                 for run, mine in zip(runs, ours, strict=True))
        lines.append(f"{name:<10} {median('seconds'):8.1f} {median('examples_per_s'):10.1f} "
                     f"{median('peak_rss_mb'):12.0f} {wall:14.2f}× {rate:17.2f}×")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", type=Path, metavar="FOLDER")
    parser.add_argument("--inputs", type=Path, default=Path("runs/teacher-run"))
    parser.add_argument("--old", type=Path, help="an older checkout of sentadapt, run the same way")
    parser.add_argument("--today", type=Path, help="a second older checkout (the commit before the change measured)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("bench/out/teacher-run"))
    parser.add_argument("--out", type=Path, default=Path("bench/out/teacher-run.json"))
    parser.add_argument("--isa", choices=["avx2", "avx512", "default"],
                        help="kernels of this instruction set alone (PyTorch's, MKL's, oneDNN's), ours in fp32")
    parser.add_argument("--only", help="comma-separated commands besides default (views, fp32, bf16, one-pass, "
                        "fixed-cost, malloc, old, today, st fp32, st bf16)")
    parser.add_argument("--pass-penalty", type=float, metavar="SECONDS",
                        help="every command sleeps this long before each backbone forward (passes cost more)")
    parser.add_argument("--peer", choices=["fp32", "bf16"], help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        prepare(args.prepare)
        return
    if args.peer:
        peer(args.inputs, args.peer == "bf16", args.output)
        return
    here = machine(args.isa)
    here["pass_penalty_s"] = args.pass_penalty
    print(f"machine: {here['cpu']}, {here['cores']} cores, torch {here['torch']} ({here['threads']} threads), "
          f"{', '.join(flag for flag, has in here['isa'].items() if has)}; kernels {here['kernels']}", flush=True)
    figures = measure(args.inputs, args.old, args.rounds, args.work, args.isa,
                      args.only.split(",") if args.only else None, args.today, args.pass_penalty)
    here["auto"] = chosen = chosen_arithmetic(args.work)
    print(f"the default run trained in {chosen['precision']} ({chosen['reason'] or 'as given'}), length chunks where "
          f"they save over {chosen['pass_cost']} tokens")
    print("\n".join(report(figures)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**figures, "machine": here}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
