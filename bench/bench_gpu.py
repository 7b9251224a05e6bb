"""The GPU training benchmark (issue 21): sentadapt vs a bare PyTorch loop vs sentence-transformers' SimCSE,
all in one run on one card, same model and data.

    python -m bench.bench_gpu --plan               # --quick's chunks: issue 21's deciding rows first, ≤ 20 min
    python -m bench.bench_gpu --quick --chunk 1    # one chunk (≤ 8 min estimated), resumable; README rewritten
    python -m bench.bench_gpu --quick --smoke      # every chunk on the CPU with a tiny model
    python -m bench.bench_gpu                      # every row (~45 min on an H100, estimated)
    python -m bench.bench_gpu --only 'consert-bf16-*,bare-bf16-*,peer-bf16-*'
    python -m bench.bench_gpu --prepare bench/out/gpu-inputs  # tokenizer + corpus to carry
    python -m bench.bench_gpu --smoke              # every row, tiny model, CPU too: checks the script
    python -m bench.bench_gpu --render a.json b.json               # one table from several runs' results

Rows are SYSTEM-PRECISION-BATCH: `consert` (`sentadapt adapt --recipe consert --preset paper`), `bare` (the
~50-line loop of bare_loop.py: two dropout views, mean pooling, InfoNCE, fused AdamW), `peer` (sentence-
transformers' trainer, MultipleNegativesRankingLoss on (s, s): unsupervised SimCSE, peers.py) at batch 96
and 512, and `sgopt` (`--recipe sg-opt --preset paper`) at its paper's batch 16, and (--quick) `eval`: sentadapt's
`Encoder.encode` of the corpus, the path `sentadapt eval --dtype` runs, at its batch 128; precisions fp32 (TF32 off),
tf32 (fp32 with TF32 matmuls), fp16 (autocast + GradScaler), bf16 (autocast). `--compile` adds
`consert_compiled` and `bare_compiled` rows (torch.compile). Each row is a fresh process.

The model is a randomly initialised BERT-base (`transformers.BertConfig()`, bert-base-uncased's
architecture; throughput does not depend on the weights) saved with the tokenizer of --tokenizer
(all-MiniLM-L6-v2's is the same 30,522-token uncased vocabulary); the corpus is one sentence per line
(default: the 29,511 unique sentences of --sts-dir's *.jsonl). ConSERT's paper settings: max length 64;
every row --steps optimizer steps (300), `--dev none --eval-every 0 --checkpoint-every 0`.

Per row: examples/s over the steps after --warmup-steps (sentadapt: from its train.log, each line stamped as
it appears; the others: synchronised host clocks), useful-token MFU against the card's matmul peak measured
at the start in the row's precision (FLOP count: gpu_measure.py), peak GPU memory
(torch.cuda.max_memory_allocated of the row's process), median GPU utilisation (nvidia-smi every 500 ms
during the timed steps), and the ratios to the bare loop and the peer of the same run. Without CUDA it
prints why and exits 0 (--smoke runs on the CPU). Writes --out (JSON) and the same table as markdown beside it.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
MIXED_PRECISION = {"fp32": "no", "tf32": "no", "fp16": "fp16", "bf16": "bf16"}  # sentadapt's --mixed-precision
BATCHES = (96, 512)  # ConSERT's paper batch, and a large one that fills the GPU
SGOPT_BATCH = 16  # SG-OPT's paper batch
MAX_LENGTH = 64  # ConSERT's paper max length (SG-OPT keeps its own, 128)
SYSTEMS = {  # row prefix → what it is
    "peer": "sentence-transformers SimCSE (MNRL on (s, s))",
    "bare": "bare PyTorch loop",
    "bare_compiled": "bare PyTorch loop, torch.compile",
    "consert": "sentadapt ConSERT",
    "consert_compiled": "sentadapt ConSERT --set compile=on",
    "sgopt": "sentadapt SG-OPT",
    "eval": "sentadapt eval (Encoder.encode)",
}
SENTADAPT = {"consert": "consert", "consert_compiled": "consert", "sgopt": "sg-opt"}  # row system → recipe
EVAL_BATCH = 128  # Encoder.encode's default batch, which `sentadapt eval` uses
EVAL_WARMUP_SENTENCES = 2048  # encoded once before the timed pass (kernel selection, the cast copy of fp16/bf16)
REPO = Path(__file__).resolve().parents[1]
TINY_BERT = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}
SMOKE = {"steps": 4, "warmup_steps": 1, "batches": (8, 16), "sgopt_batch": 8, "corpus_lines": 512, "matmul": 256}
NO_CUDA = ("no CUDA device: skipping the GPU benchmark (--smoke runs every row on the CPU with a tiny model, to "
           "check the script)")


@dataclass(frozen=True)
class Row:
    system: str
    precision: str
    batch: int

    @property
    def name(self) -> str:
        return f"{self.system}-{self.precision}-{self.batch}"

    @property
    def recipe(self) -> str | None:
        return SENTADAPT.get(self.system)


def plan_rows(batches: tuple[int, ...], sgopt_batch: int, compiled: bool) -> list[Row]:
    """Every row, the three systems of one precision and batch back to back (their ratios are read together)."""
    systems = ["peer", "bare", *(["bare_compiled"] if compiled else []), "consert",
               *(["consert_compiled"] if compiled else [])]
    rows = [Row(system, precision, batch) for batch in batches for precision in PRECISIONS for system in systems]
    return rows + [Row("sgopt", precision, sgopt_batch) for precision in PRECISIONS]


def select_rows(rows: list[Row], only: str | None) -> list[Row]:
    """--only: comma-separated shell patterns over row names, e.g. 'consert-bf16-*,bare-*', run in the order the
    patterns name them (a short GPU lease measures what matters most first); one pattern's rows in plan order."""
    if not only:
        return rows
    patterns = [pattern.strip() for pattern in only.split(",") if pattern.strip()]
    chosen: list[Row] = []
    for pattern in patterns:
        matched = [row for row in rows if fnmatch.fnmatchcase(row.name, pattern)]
        if not matched:
            sys.exit(f"--only: {pattern!r} matches no row; rows are SYSTEM-PRECISION-BATCH, e.g. "
                     f"{rows[0].name} (systems: {', '.join(SYSTEMS)})")
        chosen += [row for row in matched if row not in chosen]
    return chosen


def skip_reason(row: Row, cuda: bool, flags: set[str]) -> str | None:
    """Why a row cannot run here, or None."""
    if not cuda and row.precision in ("tf32", "fp16"):
        return f"{row.precision} needs a CUDA GPU"
    if row.recipe and row.precision == "tf32" and "--tf32" not in flags:
        return "this sentadapt has no --tf32: its fp32 (TF32 off) is the fp32 row"
    return None


# ---------------------------------------------------------------------- inputs


def build_random_bert(tokenizer_dir: Path, out: Path, tiny: bool) -> Path:
    """A randomly initialised BertConfig() model (seed 0) saved with `tokenizer_dir`'s tokenizer; reused when
    `out` already holds the same build."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    recipe = {"tokenizer": str(tokenizer_dir.resolve()), "config": TINY_BERT if tiny else {}, "seed": 0}
    marker = out / "bench_gpu_build.json"
    if marker.is_file() and json.loads(marker.read_text()) == recipe and (out / "config.json").is_file():
        return out
    if not (tokenizer_dir / "tokenizer_config.json").is_file():
        sys.exit(f"--tokenizer: {tokenizer_dir} has no tokenizer_config.json; give a folder with a BERT "
                 "tokenizer (e.g. ../shared/models/all-minilm-l6-v2), or --prepare DIR here and carry DIR")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    # the tiny smoke model takes the tokenizer's vocabulary, whatever it is; the measured one must be BERT-base
    config = BertConfig(**recipe["config"], **({"vocab_size": len(tokenizer)} if tiny else {}))
    if len(tokenizer) != config.vocab_size:
        sys.exit(f"--tokenizer: {tokenizer_dir} has {len(tokenizer)} tokens, BERT-base {config.vocab_size}; "
                 "use a bert-base-uncased vocabulary (all-MiniLM-L6-v2's)")
    torch.manual_seed(0)
    shutil.rmtree(out, ignore_errors=True)
    BertModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    marker.write_text(json.dumps(recipe) + "\n")
    return out


def prepare_corpus(corpus: Path | None, sts_dir: Path, work: Path, limit: int = 0) -> Path:
    """--corpus as given, or the unique sentences of sts_dir/*.jsonl written to work/; `limit` keeps the first."""
    from bench.make_sts_corpus import unique_sentences

    work.mkdir(parents=True, exist_ok=True)
    if corpus is None:
        files = sorted(path.name.removesuffix(".jsonl") for path in sts_dir.glob("*.jsonl"))
        if not files:
            sys.exit(f"--sts-dir: no *.jsonl in {sts_dir}; give --corpus FILE (one sentence per line)")
        corpus = work / "sts-corpus.txt"
        corpus.write_text("\n".join(unique_sentences(sts_dir, files)) + "\n", encoding="utf-8")
    elif not corpus.is_file():
        sys.exit(f"--corpus: {corpus} does not exist")
    if limit:
        lines = corpus.read_text(encoding="utf-8").splitlines()[:limit]
        corpus = work / f"corpus-first-{limit}.txt"
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus


def prepare_carry(folder: Path, tokenizer_dir: Path, corpus: Path) -> None:
    """--prepare: the tokenizer files and the corpus in one folder, to carry to a machine without ../shared."""
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder / "tokenizer")
    shutil.copyfile(corpus, folder / "corpus.txt")
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    print(f"wrote {folder}/tokenizer and {folder}/corpus.txt ({size / 2**20:.1f} MiB); on the GPU machine: "
          f"python -m bench.bench_gpu --quick --chunk 1 --tokenizer {folder}/tokenizer --corpus {folder}/corpus.txt "
          "(bench/README.md: the lent machine's commands)")


@functools.cache  # one `--help` per process: --quick's chunks in one run share it
def sentadapt_flags() -> set[str]:
    """Which of the newer `adapt` flags this sentadapt has (--tf32), read from its --help."""
    done = subprocess.run([sys.executable, "-m", "sentadapt", "adapt", "--help"], capture_output=True, text=True,
                          env={**worker_env(), "COLUMNS": "300", "NO_COLOR": "1"})
    if done.returncode:
        sys.exit("cannot run `python -m sentadapt adapt --help` (set PYTHONPATH to the repository root, or "
                 f"pip install -e .): {done.stderr.strip().splitlines()[-1:]}")
    return {flag for flag in ("--tf32",) if re.search(rf"(?<![\w-]){flag}(?![\w-])", done.stdout)}


# ---------------------------------------------------------------------- workers (each row's own process)


def peak_gpu_mb() -> float | None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return None


def sentadapt_worker(cli_args: list[str]) -> None:
    """`sentadapt CLI_ARGS` in this process (the same entry point as the console script), then the peak GPU
    memory the run allocated, which its run record does not hold."""
    from bench.gpu_measure import tf32_state
    from sentadapt.cli import app as sentadapt_main

    sys.argv = ["sentadapt", *cli_args]
    code: int | str | None = 0
    try:
        sentadapt_main()
    except SystemExit as stop:
        code = stop.code
    print("RESULT " + json.dumps({"exit_code": code or 0, "peak_gpu_mb": peak_gpu_mb(), "tf32": tf32_state()}))
    sys.exit(code or 0)


def loop_worker(args: argparse.Namespace) -> None:
    """--worker bare|peer|eval: one row of the bare loop, the sentence-transformers peer or sentadapt's encode."""
    from bench.gpu_measure import tf32_state

    if args.worker == "eval":
        result = eval_worker(args)
    elif args.worker == "peer":
        from bench.peers import PEER_LR, read_sentences, train_peer

        cuda = torch.cuda.is_available()
        sentences = read_sentences(args.corpus, args.batch_size * args.steps)
        result = train_peer("simcse", str(args.model), sentences, steps=args.steps, batch_size=args.batch_size,
                            max_length=args.max_length, lr=PEER_LR["simcse"], bf16=args.precision == "bf16",
                            fp16=args.precision == "fp16", tf32=(args.precision != "fp32") if cuda else None,
                            device="cuda" if cuda else "cpu", output=str(args.output), save=False,
                            warmup_steps=args.warmup_steps)
        result["examples_per_s"] = result["timed_steps"] * args.batch_size / result["seconds"]
    else:
        from bench.bare_loop import train_bare

        sentences = [line for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
        result = train_bare(str(args.model), sentences, steps=args.steps, batch_size=args.batch_size,
                            max_length=args.max_length, precision=args.precision, warmup_steps=args.warmup_steps,
                            compile_model=args.compile)
    result.update(peak_gpu_mb=peak_gpu_mb(), tf32=tf32_state())
    print("RESULT " + json.dumps(result))


def eval_worker(args: argparse.Namespace) -> dict[str, Any]:
    """--worker eval: `Encoder.encode` of the whole corpus in --precision (what `sentadapt eval --dtype` runs for
    each unique sentence), after a warm-up pass over its first sentences; the host clock synchronised at both
    ends. TF32 is left as sentadapt leaves it and recorded."""
    from bench.bare_loop import StepClock
    from sentadapt.model.encoder import Encoder

    cuda = torch.cuda.is_available()
    encoder = Encoder.load(str(args.model), device="cuda" if cuda else "cpu")
    sentences = [line for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    encoder.encode(sentences[:EVAL_WARMUP_SENTENCES], batch_size=args.batch_size, dtype=args.precision)
    clock = StepClock(cuda)
    clock.start()
    encoder.encode(sentences, batch_size=args.batch_size, dtype=args.precision)
    clock.stop()
    return {"seconds": clock.seconds, "timed_steps": -(-len(sentences) // args.batch_size),
            "sentences": len(sentences), "examples_per_s": len(sentences) / clock.seconds,
            "window": [clock.wall_start, clock.wall_end], "max_length": encoder.max_length}


# ---------------------------------------------------------------------- one row


@dataclass
class Context:
    smoke: bool
    model: Path
    corpus: Path
    work: Path
    cuda: bool
    gpu: str | None  # nvidia-smi --id
    flags: set[str]
    steps: int
    warmup_steps: int
    peaks: dict[str, float]  # precision → measured matmul FLOP/s
    token_stats: dict[int, Any] = field(default_factory=dict)  # max length → TokenStats
    shape: Any = None  # EncoderShape
    timeouts: dict[str, float] = field(default_factory=dict)  # row name → seconds its process may run (--quick)
    settings: list[str] = field(default_factory=list)  # --set KEY=VALUE for every sentadapt row (an A/B)


def row_command(row: Row, ctx: Context, run_dir: Path) -> list[str]:
    script = str(Path(__file__).resolve())
    if row.recipe:
        command = [sys.executable, script, "--sentadapt-worker", "adapt", str(ctx.corpus), "--recipe", row.recipe,
                   "--base", str(ctx.model), "--preset", "paper", "--output", str(run_dir), "--dev", "none",
                   "--eval-every", "0", "--checkpoint-every", "0", "--max-steps", str(ctx.steps),
                   "--batch-size", str(row.batch), "--mixed-precision", MIXED_PRECISION[row.precision]]
        if row.recipe == "consert":
            command += ["--max-length", str(MAX_LENGTH)]
        if "--tf32" in ctx.flags and ctx.cuda:
            command += ["--tf32", "off" if row.precision == "fp32" else "on"]
        if row.system == "consert_compiled":  # sentadapt/model/compiling.py: its transformer layers, torch.compile
            command += ["--set", "compile=on"]
        for setting in ctx.settings:
            command += ["--set", setting]
        if ctx.smoke:
            command += ["--set", "log_every=1"]  # a few steps: every one logged, so a rate can be read
        return command
    if row.system == "eval":
        return [sys.executable, script, "--worker", "eval", "--model", str(ctx.model), "--corpus", str(ctx.corpus),
                "--precision", row.precision, "--batch-size", str(row.batch)]
    return [sys.executable, script, "--worker", row.system.removesuffix("_compiled"), "--model", str(ctx.model),
            "--corpus", str(ctx.corpus), "--precision", row.precision, "--batch-size", str(row.batch),
            "--max-length", str(MAX_LENGTH), "--steps", str(ctx.steps), "--warmup-steps", str(ctx.warmup_steps),
            "--output", str(run_dir), *(["--compile"] if row.system.endswith("_compiled") else [])]


def run_row(row: Row, ctx: Context) -> dict[str, Any]:
    run_dir = ctx.work / "runs" / row.name
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        return measure_row(row, ctx, run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)  # a saved BERT-base is 420 MiB; the logs are kept


def measure_row(row: Row, ctx: Context, run_dir: Path) -> dict[str, Any]:
    """Run the row's process with nvidia-smi sampling and (sentadapt) its train.log watched; read the figures."""
    from bench.gpu_measure import GpuSampler, TrainLogWatcher, median_utilisation

    logs = ctx.work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    command = row_command(row, ctx, run_dir)
    print(f"\n[{time.strftime('%H:%M:%S')}] {row.name}: {' '.join(command[2:])}", flush=True)
    with GpuSampler(ctx.gpu) as sampler, TrainLogWatcher(run_dir / "train.log") as watcher:
        started = time.time()
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=worker_env(),
                                  timeout=ctx.timeouts.get(row.name))
        except subprocess.TimeoutExpired as late:
            done = subprocess.CompletedProcess(command, -9, _text(late.stdout), _text(late.stderr) +
                                               f"\nkilled after {late.timeout:.0f} s (the row's timeout)")
        ended = time.time()
    log = logs / f"{row.name}.log"
    log.write_text(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}", encoding="utf-8")
    if (run_dir / "train.log").is_file():
        shutil.copyfile(run_dir / "train.log", logs / f"{row.name}.train.log")
    out: dict[str, Any] = {"row": row.name, "system": row.system, "precision": row.precision, "batch": row.batch,
                           "process_seconds": ended - started}
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not results:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        return {**out, "error": f"exit {done.returncode}: {' | '.join(tail)} (full log: {log})"}
    result = json.loads(results[-1][len("RESULT "):])
    timed = timed_part(row, ctx, result, watcher.steps)
    if "error" in timed:
        return {**out, **timed}
    max_length = read_max_length(run_dir / "config.yaml") if row.recipe else result.get("max_length", MAX_LENGTH)
    out.update(timed, max_length=max_length, peak_gpu_mb=result.get("peak_gpu_mb"), tf32=result.get("tf32"),
               median_gpu_utilisation=median_utilisation(sampler.samples, *timed["window"]),
               smi_peak_memory_mb=max((s.memory_mb for s in sampler.samples), default=None),
               smi_problem=sampler.problem)
    out.update(useful_flops(row, ctx, max_length, out["examples_per_s"]))
    return out


def worker_env() -> dict[str, str]:
    """A row's process imports `bench` and this checkout's `sentadapt` however this script was started."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path}


def _text(value: str | bytes | None) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value or ""


def timed_part(row: Row, ctx: Context, result: dict[str, Any], logged: list[Any]) -> dict[str, Any]:
    """examples/s over the steps after the warm-up and when they ran: sentadapt's from its train.log lines, the
    others' as their process measured them."""
    from bench.gpu_measure import steady_window

    if not row.recipe:
        return {"examples_per_s": result["examples_per_s"], "timed_steps": result["timed_steps"],
                "window": result["window"]}
    window = steady_window(logged, ctx.warmup_steps, row.batch)
    if window is None:
        return {"error": f"train.log gave no timed window after step {ctx.warmup_steps}: fewer than two lines after "
                         "it, or they appeared at once (raise --steps)"}
    return {"examples_per_s": window.examples_per_s, "timed_steps": window.steps, "window": [window.start, window.end],
            "train_log_examples_per_s": logged[-1].examples_per_s}


def read_max_length(config_yaml: Path) -> int:
    import yaml

    return int(yaml.safe_load(config_yaml.read_text(encoding="utf-8"))["train"]["max_length"])


def useful_flops(row: Row, ctx: Context, max_length: int, examples_per_s: float) -> dict[str, float]:
    from bench.gpu_measure import TokenStats, flops_per_example, mfu

    if max_length not in ctx.token_stats:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(ctx.model)
        sentences = [line for line in ctx.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
        lengths = [len(ids) for ids in tokenizer(sentences, truncation=True, max_length=max_length)["input_ids"]]
        ctx.token_stats[max_length] = TokenStats.of(lengths)
    tokens = ctx.token_stats[max_length]
    # SG-OPT: one forward + backward of the tuned copy, one no-grad forward of the guide; eval: one no-grad
    # forward; the rest: two views
    passes = {"sgopt": (1, 1), "eval": (0, 1)}.get(row.system, (2, 0))
    example = flops_per_example(ctx.shape, tokens, *passes)
    peak = ctx.peaks[row.precision]
    return {"tokens_per_example": tokens.mean, "flops_per_example": example,
            "achieved_tflops": examples_per_s * example / 1e12, "peak_tflops": peak / 1e12,
            "useful_mfu": mfu(examples_per_s, example, peak)}


# ---------------------------------------------------------------------- the table


def find(rows: list[dict[str, Any]], system: str, precision: str, batch: int, run_id: str) -> dict[str, Any] | None:
    for row in rows:
        if (row["system"], row["precision"], row["batch"], row.get("run_id")) == (system, precision, batch, run_id) \
                and "examples_per_s" in row:
            return row
    return None


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Each row against the bare loop, the peer and its own system's strict fp32, measured in the same run."""
    for row in rows:
        if "examples_per_s" not in row:
            continue
        references = [("vs_fp32", row["system"], "fp32")]
        # SG-OPT: another recipe at another batch, eval: no training; neither compares with the two-view loops
        if row["system"] not in ("sgopt", "eval"):
            references += [("vs_bare", "bare", row["precision"]), ("vs_peer", "peer", row["precision"])]
        for key, system, precision in references:
            reference = find(rows, system, precision, row["batch"], row.get("run_id", ""))
            row[key] = row["examples_per_s"] / reference["examples_per_s"] if reference else None


def acceptance(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Issue 21's targets, each with what this run measured: (target, measured, met)."""

    def rate(name: str) -> float | None:
        row = next((r for r in rows if r["row"] == name and "examples_per_s" in r), None)
        return row["examples_per_s"] if row else None

    def get(name: str, key: str) -> float | None:
        row = next((r for r in rows if r["row"] == name and "examples_per_s" in r), None)
        return row.get(key) if row else None

    checks: list[tuple[str, float | None, float, str]] = [
        ("ConSERT bf16, batch 96 ≥ 1,500 examples/s", rate("consert-bf16-96"), 1500, "{:,.0f}"),
        ("ConSERT fp16, batch 96 ≥ 1,500 examples/s", rate("consert-fp16-96"), 1500, "{:,.0f}"),
        ("ConSERT bf16, batch 96 ≥ the bare loop", get("consert-bf16-96", "vs_bare"), 1.0, "{:.2f}×"),
        ("ConSERT fp16, batch 96 ≥ the bare loop", get("consert-fp16-96", "vs_bare"), 1.0, "{:.2f}×"),
        ("ConSERT bf16, batch 96 ≥ fp32 (TF32)", _ratio(rate("consert-bf16-96"), rate("consert-tf32-96")), 1.0,
         "{:.2f}×"),
        ("ConSERT fp16, batch 96 ≥ fp32 (TF32)", _ratio(rate("consert-fp16-96"), rate("consert-tf32-96")), 1.0,
         "{:.2f}×"),
        ("ConSERT fp32 with TF32, batch 96 ≥ 2,000 examples/s", rate("consert-tf32-96"), 2000, "{:,.0f}"),
        ("ConSERT bf16, batch 512 ≥ 3,300 examples/s (moonshot 5,000)", rate("consert-bf16-512"), 3300, "{:,.0f}"),
        ("ConSERT bf16, batch 512: median GPU utilisation ≥ 80 %",
         get("consert-bf16-512", "median_gpu_utilisation"), 80, "{:.0f} %"),
        ("ConSERT bf16, batch 96 ≥ 2.5× the sentence-transformers peer", get("consert-bf16-96", "vs_peer"), 2.5,
         "{:.2f}×"),
        ("ConSERT fp16, batch 96 ≥ 2.5× the sentence-transformers peer", get("consert-fp16-96", "vs_peer"), 2.5,
         "{:.2f}×"),
        ("SG-OPT fp16, batch 16 ≥ 170 examples/s", rate("sgopt-fp16-16"), 170, "{:,.0f}"),
        ("eval fp16 faster than fp32 (Encoder.encode, batch 128)", _ratio(rate("eval-fp16-128"),
                                                                          rate("eval-fp32-128")), 1.0, "{:.2f}×"),
    ]
    strict = {checks[-1][0]}  # "faster": equal is not enough

    def met(target: str, value: float, bar: float) -> bool:
        return value > bar if target in strict else value >= bar

    return [(target, "not measured" if value is None else form.format(value),
             "–" if value is None else ("yes" if met(target, value, bar) else "**no**"))
            for target, value, bar, form in checks]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def render(results: dict[str, Any]) -> str:
    """The markdown table (one header line per run; a `run` column when rows come from several runs)."""
    rows = results["rows"]
    add_ratios(rows)
    several = len(results["runs"]) > 1
    lines = []
    for run in results["runs"]:
        peaks = ", ".join(f"{name} {value:,.0f}" if value >= 10 else f"{name} {value:.2f}"
                          for name, value in run["peak_tflops"].items())
        lines += [(f"Run {run['run_id']}: " if several else "") +
                  f"**{run['card']}** ({run['started']}; {run['versions']}): {run['steps']} steps per row, "
                  f"timed after {run['warmup_steps']}; measured matmul peak TFLOP/s: {peaks}. "
                  f"sentadapt flags present: {', '.join(run['sentadapt_flags']) or 'no --tf32'}." +
                  "".join(f" Every sentadapt row: `--set {setting}`." for setting in run.get("settings", [])),
                  ""]
    run_column = ("run | ", "---|") if several else ("", "")
    lines += [f"| {run_column[0]}row | system | precision | batch | examples/s | vs bare loop | vs peer | vs own fp32 "
              "| useful MFU | peak GPU memory | median GPU util. |",
              f"|{run_column[1]}---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "examples_per_s" not in row:
            continue
        lines.append(f"| {row['run_id'] + ' | ' if several else ''}{row['row']} | {SYSTEMS[row['system']]} | "
                     f"{row['precision']} | {row['batch']} | {row['examples_per_s']:,.0f} | "
                     f"{_times(row.get('vs_bare'))} | {_times(row.get('vs_peer'))} | {_times(row.get('vs_fp32'))} | "
                     f"{row['useful_mfu']:.1%} | {_mib(row.get('peak_gpu_mb'))} | "
                     f"{_percent(row.get('median_gpu_utilisation'))} |")
    missing = [row for row in rows if "examples_per_s" not in row]
    if missing:
        lines += ["", "Not measured:", *[f"- {row['row']}: {row.get('skipped') or row.get('error')}"
                                         for row in missing]]
    lines += ["", "Ratios pair rows of one run only; the targets compare the rows' own rates.", "",
              *targets_markdown(rows)]
    return "\n".join(lines) + "\n"


def targets_markdown(rows: list[dict[str, Any]]) -> list[str]:
    return ["| issue 21 target | measured | met |", "|---|---:|:---:|",
            *[f"| {target} | {value} | {met} |" for target, value, met in acceptance(rows)]]


def _times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _mib(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} MiB"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} %"


def write_results(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(render(results), encoding="utf-8")


def merge(paths: list[Path]) -> dict[str, Any]:
    """--render: several runs' results in one table; a row measured twice keeps its later run's figures."""
    runs: list[dict[str, Any]] = []
    rows: dict[str, dict[str, Any]] = {}
    for path in paths:
        if not path.is_file():
            sys.exit(f"--render: {path} does not exist")
        data = json.loads(path.read_text(encoding="utf-8"))
        runs += data["runs"]
        for row in data["rows"]:
            if row["row"] not in rows or row["run_id"] >= rows[row["row"]]["run_id"]:  # run ids are start times
                rows[row["row"]] = row
    return {"runs": sorted(runs, key=lambda run: run["run_id"]), "rows": list(rows.values())}


# ---------------------------------------------------------------------- --quick: what fits one lent session

# Issue 21's measured rates, examples/s: one H100 80GB, torch 2.11.0+cu130, sentadapt before the hot-path work,
# the random BERT-base, the 29,511 unique STS sentences, max length 64, 300 steps (bench/README.md keeps them
# beside today's figures). The plan's estimates are steps × batch / rate: a row that got faster since finishes
# sooner, so the plan errs long.
ISSUE21_RATES: dict[str, float] = {
    "consert-fp32-96": 1108, "consert-fp16-96": 683, "consert-bf16-96": 713, "consert-bf16-512": 1327,
    "bare-tf32-96": 2060, "bare-fp16-96": 1527, "bare-bf16-96": 1464, "bare-bf16-512": 3332,
    "peer-fp16-96": 519, "peer-bf16-96": 493, "sgopt-fp16-16": 57,
}
# Per row process, besides its timed steps: Python with torch, transformers and sentadapt imported (~10 s), the
# corpus tokenized (sentadapt prepares it through `datasets`), BERT-base loaded onto the card, CUDA's start, the
# warm-up steps. Issue 21 recorded rates only, so this is an estimate (the ~40 s issue 27 gives), above the
# 20-30 s one tiny-model smoke row takes on this project's 2 loaded CPU cores. Each record keeps its
# `process_seconds` and each chunk its wall time, and the README's chunk table puts them beside the estimate.
ROW_OVERHEAD_S = 40.0
# Per chunk call, before its first row: `sentadapt adapt --help` (which flags it has), building and saving the
# random BERT-base (110M parameters, 420 MiB) unless the machine still holds it, the corpus, the matmul peaks of
# the chunk's precisions (≤ 60 products of 8192³ each, ~1 s in strict fp32). Estimated, not measured.
CHUNK_OVERHEAD_S = 45.0
# Eval rows have no issue-21 rate. Assumed: 3,000 sentences/s for BERT-base fp32 encode on an H100. A corpus
# sentence (14.6 tokens on average, bench_padding.py) is ~2.5 GFLOP forward (gpu_measure.py), so 7.5 TFLOP/s,
# about 15 % of strict fp32's ~50 TFLOP/s matmul peak: slow enough to be an upper bound on the time.
EVAL_RATE = 3000.0
EVAL_SENTENCES = 29_511  # the corpus
# `pytest -m gpu`: 12 tests in 2 files (9 tiny-model training runs, 3 encode checks, of which the one that needs
# ../shared skips on the lent machine). Collecting them took 10 s on this CPU, where all skip; ≤ 10 s is assumed
# for each training run on the GPU. Estimated.
TESTS_ESTIMATE_S = 120.0
TESTS_TIMEOUT_S = 300.0
TESTS_ROW = "tests-gpu"
CHUNK_LIMIT_S = 480.0  # 8 of the device tool's 10 minutes per command: a margin for rows slower than estimated
SESSION_LIMIT_S = 1200.0  # 20 of a session's 30 device minutes: the rest pays machine starts (1-2 min) and copies
QUICK_SECTION = "bench_gpu --quick"  # the generated section of bench/README.md (tools/doc_sections.py)
SMOKE_COST = {"eval": 0, "bare": 1, "bare_compiled": 2, "peer": 3, "consert": 4, "consert_compiled": 5, "sgopt": 6}


def estimate_rate(row: Row) -> float:
    """Issue 21's rate of the row, or of its nearest measured relative: the same system's fp32 for tf32 (TF32 only
    speeds fp32 matmuls up), else the slowest rate of the same system at the same batch, else at any batch."""
    system = row.system.removesuffix("_compiled")
    for name in (f"{system}-{row.precision}-{row.batch}", f"{system}-fp32-{row.batch}" if row.precision == "tf32"
                 else ""):
        if name in ISSUE21_RATES:
            return ISSUE21_RATES[name]
    same = {name: rate for name, rate in ISSUE21_RATES.items() if name.startswith(f"{system}-")}
    return min([rate for name, rate in same.items() if name.endswith(f"-{row.batch}")] or same.values())


# What a torch.compile'd row may spend compiling before its first step, beyond its estimate: sentadapt's
# `compile` compiles one BERT layer's forward and backward twice (the first padded length, then one dynamic-length
# graph); on this machine's CPU the tiny model's took 13-29 s. Not yet measured on a card: a generous allowance.
COMPILE_ALLOWANCE_S = 150.0


def compile_allowance_s(row: Row, settings: list[str]) -> float:
    """COMPILE_ALLOWANCE_S for a row that compiles (a `_compiled` system, or a sentadapt row under
    `--set compile=on|graphs`), else 0."""
    compiled_by_setting = bool(row.recipe) and any(
        setting.startswith("compile=") and setting != "compile=off" for setting in settings)
    return COMPILE_ALLOWANCE_S if row.system.endswith("_compiled") or compiled_by_setting else 0.0


def row_estimate_s(row: Row, steps: int = 300) -> float:
    """Estimated seconds of a row's process on an H100: ROW_OVERHEAD_S + its examples at its estimated rate."""
    if row.system == "eval":  # a warm-up pass, then the whole corpus
        return ROW_OVERHEAD_S + (EVAL_SENTENCES + EVAL_WARMUP_SENTENCES) / EVAL_RATE
    return ROW_OVERHEAD_S + steps * row.batch / estimate_rate(row)


def quick_units(compiled: bool = False) -> list[tuple[Row, ...]]:
    """Every row in --quick's order: the ones that decide issue 21's targets, then the sentence-transformers peer,
    then the rest in the full run's order. A tuple stays in one chunk."""
    deciding: list[tuple[Row, ...]] = [
        (Row("consert", "bf16", 96),), (Row("consert", "fp16", 96),), (Row("consert", "tf32", 96),),
        (Row("bare", "bf16", 96),), (Row("bare", "fp16", 96),),  # "ConSERT bf16 / fp16 ≥ the bare loop"
        (Row("consert", "bf16", 512), Row("bare", "bf16", 512)),
        (Row("sgopt", "fp16", SGOPT_BATCH),),
        (Row("eval", "fp32", EVAL_BATCH), Row("eval", "fp16", EVAL_BATCH)),  # fp16 against fp32 on one machine
        (Row("peer", "bf16", 96),), (Row("peer", "fp16", 96),),
    ]
    listed = {row for unit in deciding for row in unit}
    rest = [*plan_rows(BATCHES, SGOPT_BATCH, compiled), Row("eval", "bf16", EVAL_BATCH)]
    return deciding + [(row,) for row in rest if row not in listed]


@dataclass(frozen=True)
class Chunk:
    number: int
    rows: tuple[Row, ...]  # none in the tests chunk
    estimate_s: float
    tests: bool = False
    later: bool = False  # beyond one session's SESSION_LIMIT_S

    @property
    def label(self) -> str:
        return "pytest -m gpu (the GPU-marked tests)" if self.tests else ", ".join(row.name for row in self.rows)


def plan_chunks(units: list[tuple[Row, ...]], steps: int = 300) -> list[Chunk]:
    """The units in order, in chunks of at most CHUNK_LIMIT_S (CHUNK_OVERHEAD_S + their rows' estimates). The
    chunks that fit SESSION_LIMIT_S together with the tests chunk are this session's and the tests chunk follows
    them; the first unit that would not fit, and every one after it, go to `later` chunks (another session)."""
    groups: list[tuple[list[Row], float, bool]] = []
    rows: list[Row] = []
    seconds, spent, later = CHUNK_OVERHEAD_S, 0.0, False
    for unit in units:
        cost = sum(row_estimate_s(row, steps) for row in unit)
        if rows and seconds + cost > CHUNK_LIMIT_S:
            groups.append((rows, seconds, later))
            spent += seconds
            rows, seconds = [], CHUNK_OVERHEAD_S
        if not later and spent + seconds + cost + TESTS_ESTIMATE_S > SESSION_LIMIT_S:
            if rows:
                groups.append((rows, seconds, later))
                rows, seconds = [], CHUNK_OVERHEAD_S
            later = True
        rows, seconds = [*rows, *unit], seconds + cost
    if rows:
        groups.append((rows, seconds, later))
    chunks = [Chunk(len(groups[:index]) + 1, tuple(rows), seconds)
              for index, (rows, seconds, later) in enumerate(groups) if not later]
    chunks.append(Chunk(len(chunks) + 1, (), TESTS_ESTIMATE_S, tests=True))
    for rows, seconds, later in groups:
        if later:
            chunks.append(Chunk(len(chunks) + 1, tuple(rows), seconds, later=True))
    return chunks


def smoke_twin(row: Row) -> Row:
    """The --smoke row standing for a planned one: batches 8 and 16 for 96 and 512, SG-OPT at 8; eval keeps 128."""
    if row.system == "eval":
        return row
    batch = SMOKE["sgopt_batch"] if row.system == "sgopt" else dict(zip(BATCHES, SMOKE["batches"]))[row.batch]
    return Row(row.system, row.precision, batch)


def quick_plan(smoke: bool = False, compiled: bool = False, steps: int = 300) -> list[Chunk]:
    """--quick's chunks; with --smoke the same chunks (and H100 estimates) over the smoke rows."""
    chunks = plan_chunks(quick_units(compiled), steps)
    if smoke:
        chunks = [Chunk(chunk.number, tuple(smoke_twin(row) for row in chunk.rows), chunk.estimate_s, chunk.tests,
                        chunk.later) for chunk in chunks]
    return chunks


def plan_text(chunks: list[Chunk], steps: int = 300, smoke: bool = False) -> str:
    session = [chunk for chunk in chunks if not chunk.later]
    total = sum(chunk.estimate_s for chunk in session)
    lines = [f"--quick plan: {len(session)} chunks, {total:,.0f} s estimated on an H100 (a chunk ≤ "
             f"{CHUNK_LIMIT_S:.0f} s, the session ≤ {SESSION_LIMIT_S:,.0f} s): per row {ROW_OVERHEAD_S:.0f} s + "
             f"{steps} steps × batch / issue 21's rate, per chunk {CHUNK_OVERHEAD_S:.0f} s to start" +
             (" (the smoke rows stand for these H100 rows)" if smoke else "")]
    calls = "; ".join(f"--chunk {','.join(map(str, call))}" for call in device_calls(chunks))
    lines.append(f"device calls (consecutive chunks that fit {CHUNK_LIMIT_S:.0f} s together share one): {calls}")
    for chunk in chunks:
        if chunk.later and not chunks[chunk.number - 2].later:
            later = [c for c in chunks if c.later]
            lines.append(f"later, beyond one session ({sum(c.estimate_s for c in later):,.0f} s; --chunk K in "
                         "another session):")
        lines.append(f"chunk {chunk.number}: {chunk.estimate_s:,.0f} s" +
                     ("" if chunk.tests else f" ({CHUNK_OVERHEAD_S:.0f} s start + {len(chunk.rows)} "
                                             f"row{'s' * (len(chunk.rows) > 1)})"))
        if chunk.tests:
            lines.append(f"    {TESTS_ROW:<26}{chunk.estimate_s:5.0f} s  pytest -m gpu over "
                         f"{', '.join(gpu_test_files())}")
        for row in chunk.rows:
            planned = _planned(row) if smoke else row
            how = ("eval: (29,511 + 2,048 warm-up) sentences / 3,000 per s" if row.system == "eval" else
                   f"{steps} × {planned.batch} / {estimate_rate(planned):,.0f}")
            lines.append(f"    {row.name:<26}{row_estimate_s(planned, steps):5.0f} s  {how} + "
                         f"{ROW_OVERHEAD_S:.0f}")
    return "\n".join(lines)


def _planned(smoke_row: Row) -> Row:
    """The H100 row a smoke row stands for (smoke_twin's inverse)."""
    return next(row for unit in quick_units(True) for row in unit if smoke_twin(row) == smoke_row)


# ---------------------------------------------------------------------- --quick: the results file


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file; a line cut short by a kill is left out."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def append_record(path: Path, record: dict[str, Any]) -> None:
    """One line appended and flushed to disk: a kill loses at most the line being written, never the others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        if handle.tell() and path.read_bytes()[-1:] != b"\n":  # a cut line before: end it, so this one parses
            handle.write(b"\n")
        handle.write((json.dumps(record) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def finished(records: list[dict[str, Any]], retry_failed: bool = False) -> set[str]:
    """Names a rerun skips: rows measured or skipped, the tests chunk; failed ones too unless retry_failed."""
    done = set()
    for record in records:
        if record.get("kind") in ("row", "tests"):
            failed = "error" in record or record.get("returncode", 0) != 0
            if not (failed and retry_failed):
                done.add(record["row"])
    return done


def quick_results(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The records as render() takes them: one run per card (its chunks' rows are compared with each other: the
    same card, software and settings), a row measured twice keeps its last record."""
    runs: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("kind") == "run":
            run = runs.setdefault(record["card"], {**record, "run_id": record["card"], "chunks": set()})
            run["chunks"].add(record["chunk"])
            run["peak_tflops"] = {**record["peak_tflops"], **run["peak_tflops"]}  # the first measured of each
    for run in runs.values():
        chunks = sorted(run.pop("chunks"))
        run["started"] = f"chunk{'s' * (len(chunks) > 1)} {', '.join(map(str, chunks))}, from {run['started']}"
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("kind") == "row":
            rows.pop(record["row"], None)  # the last record of a row, in its own place in the order
            rows[record["row"]] = {**record, "run_id": record.get("card", "")}
    return {"runs": list(runs.values()), "rows": list(rows.values())}


def quick_section(records: list[dict[str, Any]], plan: list[Chunk], source: str) -> str:
    """The README's generated section: the plan with what each chunk recorded, the table, the targets, issue 21's
    rates beside today's, the GPU-marked tests."""
    results = quick_results(records)
    rows = {row["row"]: row for row in results["rows"]}
    tests = next((r for r in reversed(records) if r.get("kind") == "tests"), None)
    taken: dict[int, float] = {}
    for record in records:
        if record.get("kind") == "chunk":
            taken[record["chunk"]] = taken.get(record["chunk"], 0.0) + record["seconds"]
    lines = [f"Generated by `python -m bench.bench_gpu --quick` from `{source}` "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); each chunk rewrites this section. The plan "
             "(`--plan`: estimates from issue 21's rates) and what each chunk recorded:", "",
             "| chunk | rows | estimated | recorded | taken |", "|---:|---|---:|---|---:|"]

    def recorded(names: list[str]) -> str:
        got = [rows[name] for name in names if name in rows]
        counts = {"measured": sum("examples_per_s" in r for r in got), "skipped": sum("skipped" in r for r in got),
                  "failed": sum("error" in r for r in got)}
        return ", ".join(f"{n} {what}" for what, n in counts.items() if n) + f" of {len(names)}" if got else "–"

    later = [chunk for chunk in plan if chunk.later]
    for chunk in plan:
        if chunk.later:
            continue
        if chunk.tests:
            state = (f"{tests['summary']} (exit {tests['returncode']})" if tests else "–")
            lines.append(f"| {chunk.number} | `pytest -m gpu` | {chunk.estimate_s:,.0f} s | {state} | "
                         f"{_seconds(taken.get(chunk.number))} |")
        else:
            lines.append(f"| {chunk.number} | {chunk.label} | {chunk.estimate_s:,.0f} s | "
                         f"{recorded([row.name for row in chunk.rows])} | {_seconds(taken.get(chunk.number))} |")
    if later:
        names = [row.name for chunk in later for row in chunk.rows]
        spent = sum(taken.get(chunk.number, 0.0) for chunk in later)
        lines.append(f"| {later[0].number}–{later[-1].number} | a later session: {len(names)} rows | "
                     f"{sum(c.estimate_s for c in later):,.0f} s | {recorded(names)} | {_seconds(spent or None)} |")
    lines.append("")
    if results["rows"] and results["runs"]:
        lines.append(render(results).rstrip("\n"))
    else:
        lines += ["No row measured yet.", "", *targets_markdown([])]
    lines += ["", "Issue 21's rates (one H100 80GB, sentadapt before the hot-path work) beside this table's:", "",
              "| row | issue 21 (examples/s) | now | now / issue 21 |", "|---|---:|---:|---:|"]
    for name, rate in ISSUE21_RATES.items():
        now = rows.get(name, {}).get("examples_per_s")
        lines.append(f"| {name} | {rate:,.0f} | {'not measured' if now is None else f'{now:,.0f}'} | "
                     f"{'–' if now is None else f'{now / rate:.2f}×'} |")
    lines.append("")
    if tests:
        lines.append(f"**The suite with CUDA** (`{tests['command']}`) on {tests['card']}: {tests['summary']}, exit "
                     f"{tests['returncode']}" + (" (green)." if tests["returncode"] == 0 else " (**not green**)."))
    else:
        lines.append("**The suite with CUDA** (`pytest -m gpu`, the GPU-marked tests): not run yet.")
    return "\n".join(lines) + "\n"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} s"


def publish(records: list[dict[str, Any]], plan: list[Chunk], source: Path, readme: Path | None) -> None:
    """The section into `source`'s .md beside it and, unless None, into `readme` between its markers."""
    from tools.doc_sections import write_atomically, write_section

    section = quick_section(records, plan, str(source))
    source.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(source.with_suffix(".md"), section)
    written = [str(source.with_suffix(".md"))]
    if readme is not None:
        write_section(readme, QUICK_SECTION, section)
        written.append(f"{readme} (section '{QUICK_SECTION}')")
    print(f"wrote {' and '.join(written)}", flush=True)


# ---------------------------------------------------------------------- --quick: running a chunk


def gpu_test_files() -> list[str]:
    """The test files that hold GPU-marked tests (`pytest.mark.gpu`): collecting only them takes seconds."""
    return sorted(path.relative_to(REPO).as_posix() for path in (REPO / "tests").rglob("test_*.py")
                  if re.search(r"\bmark\.gpu\b", path.read_text(encoding="utf-8")))


def run_gpu_tests(logs: Path, card: str) -> dict[str, Any]:
    """`pytest -m gpu` over gpu_test_files() in its own process; its summary line and exit code."""
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *gpu_test_files()]
    print(f"\n[{time.strftime('%H:%M:%S')}] {TESTS_ROW}: {' '.join(command[1:])}", flush=True)
    started = time.time()
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=worker_env(),
                              timeout=TESTS_TIMEOUT_S)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as late:
        code, stdout, stderr = -9, _text(late.stdout), _text(late.stderr) + f"\nkilled after {late.timeout:.0f} s"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{TESTS_ROW}.log").write_text(f"$ {' '.join(command)}\n{stdout}\n{stderr}", encoding="utf-8")
    summary = next((line.strip("= ") for line in reversed(stdout.splitlines())
                    if re.search(r"\d+ (passed|failed|skipped|errors?|deselected)", line)),
                   (stderr.strip() or stdout.strip() or "no output").splitlines()[-1])
    return {"kind": "tests", "row": TESTS_ROW, "command": "pytest -m gpu " + " ".join(gpu_test_files()),
            "returncode": code, "summary": summary, "seconds": time.time() - started, "card": card}


def run_chunk(chunk: Chunk, args: argparse.Namespace, cuda: bool, results: Path) -> list[str]:
    """One chunk: the rows (or tests) not yet in `results`, each appended as it ends. Returns what failed."""
    started = time.time()
    done = finished(read_records(results), args.retry_failed)
    print(f"\n=== chunk {chunk.number} ({chunk.estimate_s:,.0f} s estimated): {chunk.label}", flush=True)
    card = torch.cuda.get_device_name() if cuda else "CPU (smoke run)"
    failed: list[str] = []
    if chunk.tests:
        if TESTS_ROW in done:
            print(f"already recorded in {results}: {TESTS_ROW}")
        else:
            record = {**run_gpu_tests(args.work / ("smoke" if args.smoke else "") / "logs", card),
                      "chunk": chunk.number, "estimate_s": chunk.estimate_s}
            append_record(results, record)
            print(f"  {TESTS_ROW}: {record['summary']} (exit {record['returncode']})", flush=True)
            failed += [TESTS_ROW] if record["returncode"] else []
    else:
        recorded = [row.name for row in chunk.rows if row.name in done]
        if recorded:
            print(f"already recorded in {results}, skipped: {', '.join(recorded)}")
        pending = [row for row in chunk.rows if row.name not in done]
        if pending:
            failed += run_rows(chunk, pending, args, cuda, results)
    append_record(results, {"kind": "chunk", "chunk": chunk.number, "seconds": time.time() - started,
                            "estimate_s": chunk.estimate_s, "card": card})
    return failed


def run_rows(chunk: Chunk, pending: list[Row], args: argparse.Namespace, cuda: bool, results: Path) -> list[str]:
    ctx, rows, skipped, run = set_up(args, cuda, pending)
    planned = {row.name: _planned(row) if args.smoke else row for row in rows}
    estimates = {name: row_estimate_s(row, args.steps or 300) for name, row in planned.items()}
    # a row that hangs is stopped at twice its estimate + a minute, so the chunk's call can still end in time
    ctx.timeouts = {name: min(2 * estimate + 60, CHUNK_LIMIT_S) for name, estimate in estimates.items()}
    runnable = [row for row in rows if row.name not in skipped]
    if args.smoke_rows:  # the cheapest on the CPU first; the others stay for a later call
        runnable = sorted(runnable, key=lambda row: SMOKE_COST[row.system])[:args.smoke_rows]
    append_record(results, {"kind": "run", "chunk": chunk.number, **run})
    failed = []
    for row in rows:
        if row.name in skipped:
            result: dict[str, Any] = {"row": row.name, "system": row.system, "precision": row.precision,
                                      "batch": row.batch, "skipped": skipped[row.name]}
        elif row in runnable:
            result = run_row(row, ctx)
        else:
            continue
        result.update(kind="row", chunk=chunk.number, run_id=run["run_id"], card=run["card"],
                      estimate_s=estimates[row.name])
        append_record(results, result)
        print(f"  {_summary(result)}", flush=True)
        failed += [row.name] if "error" in result else []
    return failed


def chunk_numbers(text: str) -> list[int]:
    """--chunk: '1' or '3,4'."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: chunk numbers, e.g. 1 or 3,4") from None


def device_calls(chunks: list[Chunk]) -> list[list[int]]:
    """This session's chunks as device calls: consecutive chunks share a call while together ≤ CHUNK_LIMIT_S
    (fewer calls, fewer machine starts of 1-2 minutes each)."""
    calls: list[list[Chunk]] = []
    for chunk in (c for c in chunks if not c.later):
        if calls and sum(c.estimate_s for c in calls[-1]) + chunk.estimate_s <= CHUNK_LIMIT_S:
            calls[-1].append(chunk)
        else:
            calls.append([chunk])
    return [[chunk.number for chunk in call] for call in calls]


def quick_main(args: argparse.Namespace) -> None:
    """--quick / --plan / --chunk K: the plan, one chunk or every session chunk, or (--render) the section again."""
    if args.only:
        sys.exit("--only: not with --quick, whose rows are its plan's (--plan lists them)")
    steps = args.steps or 300
    plan = quick_plan(args.smoke, args.compile, steps)
    results = args.results or Path("bench/out/gpu-quick-smoke.jsonl" if args.smoke else "bench/out/gpu-quick.jsonl")
    readme = args.readme if args.readme is not None else (None if args.smoke else REPO / "bench" / "README.md")
    print(plan_text(plan, steps, args.smoke), flush=True)
    if args.plan:
        return
    if args.render:
        publish([record for path in args.render for record in read_records(path)], plan, args.render[0], readme)
        return
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print(NO_CUDA)
        return
    missing = [number for number in args.chunk or [] if not 1 <= number <= len(plan)]
    if missing:
        sys.exit(f"--chunk: {missing[0]} is not in the plan (chunks 1 to {len(plan)})")
    chunks = [chunk for chunk in plan if (chunk.number in args.chunk if args.chunk else not chunk.later)]
    failed = []
    for chunk in chunks:
        failed += run_chunk(chunk, args, cuda, results)
        publish(read_records(results), plan, results, readme)
    if failed:
        sys.exit(f"{len(failed)} failed: {', '.join(failed)} (logs in {args.work / ('smoke' if args.smoke else '')}"
                 "/logs; --retry-failed runs them again)")


# ---------------------------------------------------------------------- main


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("torch", "transformers", "accelerate", "sentence-transformers"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} missing")
    try:  # the GPU machine may get the working tree without .git, or have no git
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent)
        found += [f"sentadapt {commit.stdout.strip()}"] if commit.returncode == 0 else []
    except OSError:
        pass
    return ", ".join(found)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", type=Path, default=Path("../shared/models/all-minilm-l6-v2"),
                        help="folder whose tokenizer files the random BERT-base is saved with")
    parser.add_argument("--model", type=Path, help="a prepared model folder (default: build the random BERT-base "
                        "into --work)")
    parser.add_argument("--corpus", type=Path, help="one sentence per line (default: the unique sentences of "
                        "--sts-dir/*.jsonl)")
    parser.add_argument("--sts-dir", type=Path, default=Path("../shared/data/sts"))
    parser.add_argument("--steps", type=int, help="optimizer steps per row (default 300; --smoke 4)")
    parser.add_argument("--warmup-steps", type=int, help="steps before the clock starts (default 20; --smoke 1)")
    parser.add_argument("--only", help="comma-separated patterns over row names, e.g. 'consert-bf16-*,bare-*'")
    parser.add_argument("--compile", action="store_true",
                        help="also the torch.compile rows (sentadapt --set compile=on)")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to every sentadapt row as `--set KEY=VALUE` (repeatable), e.g. pad_multiple=1 "
                        "for an A/B of one setting; recorded in the results")
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--smoke", action="store_true", help="every row end to end with a tiny random BERT, a "
                        "few steps and small batches; on the CPU too (fp32 and bf16 there)")
    parser.add_argument("--prepare", type=Path, metavar="DIR", help="write the tokenizer and the corpus into DIR "
                        "(to carry to a machine without ../shared) and exit")
    parser.add_argument("--render", type=Path, nargs="+", metavar="JSON", help="redraw one table from these "
                        "results files into --out and exit (with --quick: results JSON lines into --readme)")
    quick = parser.add_argument_group("--quick: what fits one lent session (10 min a command, 30 device minutes)")
    quick.add_argument("--quick", action="store_true", help="issue 21's deciding rows first, in chunks of ≤ 8 min "
                       "estimated, ≤ 20 min in all, then the GPU-marked tests; without --chunk: every session chunk")
    quick.add_argument("--plan", action="store_true", help="print --quick's chunks (rows, estimated seconds) and exit")
    quick.add_argument("--chunk", type=chunk_numbers, metavar="K[,K2...]", help="run these chunks of the plan only "
                       "(implies --quick), e.g. 1 or 3,4")
    quick.add_argument("--results", type=Path, help="JSON lines each chunk appends to, and skips what it holds "
                       "(default bench/out/gpu-quick.jsonl; --smoke: gpu-quick-smoke.jsonl); .md beside it")
    quick.add_argument("--readme", type=Path, help="the markdown whose generated section each chunk rewrites "
                       "(default bench/README.md; --smoke: none)")
    quick.add_argument("--retry-failed", action="store_true", help="run recorded failures again (default: skipped)")
    quick.add_argument("--smoke-rows", type=int, metavar="N", help="with --smoke: at most N rows per chunk, the "
                       "cheapest on the CPU first (the test's short smoke)")
    parser.add_argument("--work", type=Path, default=Path("bench/out/gpu"), help="models, runs and logs")
    parser.add_argument("--out", type=Path, help="results JSON, markdown beside it (default bench/out/gpu.json; "
                        "--smoke: gpu-smoke.json)")
    # a row's own process (started by this script)
    parser.add_argument("--worker", choices=["bare", "peer", "eval"], help=argparse.SUPPRESS)
    parser.add_argument("--precision", choices=PRECISIONS, help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--max-length", type=int, default=MAX_LENGTH, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--sentadapt-worker":
        sentadapt_worker(sys.argv[2:])
        return
    args = parse_args()
    if args.worker:
        loop_worker(args)
        return
    if args.quick or args.plan or args.chunk is not None:
        quick_main(args)
        return
    out = args.out or Path("bench/out/gpu-smoke.json" if args.smoke else "bench/out/gpu.json")
    if args.render:
        results = merge(args.render)
        write_results(results, out)
        print(render(results), end="")
        print(f"wrote {out} and {out.with_suffix('.md')}")
        return
    if args.prepare:
        prepare_carry(args.prepare, args.tokenizer, prepare_corpus(args.corpus, args.sts_dir, args.work))
        return
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print(NO_CUDA)
        return
    measure(args, cuda, out)


def measure(args: argparse.Namespace, cuda: bool, out: Path) -> None:
    """Every selected row, one after the other; the results are rewritten after each."""
    ctx, rows, skipped, run = set_up(args, cuda)
    if not args.smoke:  # a row that hangs is stopped, so the rows after it still run within a lease
        ctx.timeouts = {row.name: min(2 * row_estimate_s(row, ctx.steps) + 60 + compile_allowance_s(row, ctx.settings),
                                      CHUNK_LIMIT_S) for row in rows}
    results: dict[str, Any] = {"runs": [run], "rows": []}
    for row in rows:
        if row.name in skipped:
            result = {"row": row.name, "system": row.system, "precision": row.precision, "batch": row.batch,
                      "skipped": skipped[row.name]}
        else:
            result = run_row(row, ctx)
        result["run_id"] = run["run_id"]
        results["rows"].append(result)
        write_results(results, out)  # an interrupted run keeps what it measured
        print(f"  {_summary(result)}", flush=True)
    print("\n" + render(results), end="")
    print(f"wrote {out} and {out.with_suffix('.md')}")
    failed = [row["row"] for row in results["rows"] if "error" in row]
    if failed:
        sys.exit(f"{len(failed)} row(s) failed: {', '.join(failed)} (logs in {ctx.work / 'logs'})")


def set_up(args: argparse.Namespace, cuda: bool, chosen: list[Row] | None = None,
           ) -> tuple[Context, list[Row], dict[str, str], dict[str, Any]]:
    """Inputs, rows (`chosen`, or every row --only selects), the card's peaks and the run's header: everything
    before the first row."""
    from transformers import AutoConfig, AutoModel

    from bench.gpu_measure import EncoderShape, matmul_peak_flops, smi_gpu_id

    steps = args.steps or (SMOKE["steps"] if args.smoke else 300)
    warmup = args.warmup_steps if args.warmup_steps is not None else (SMOKE["warmup_steps"] if args.smoke else 20)
    if not 0 <= warmup < steps - 1:
        sys.exit(f"--warmup-steps: {warmup} leaves too few of --steps {steps} to time (at least 2)")
    work = args.work / ("smoke" if args.smoke else "")
    corpus = prepare_corpus(args.corpus, args.sts_dir, work, SMOKE["corpus_lines"] if args.smoke else 0)
    model = args.model or build_random_bert(args.tokenizer, work / ("tiny-bert" if args.smoke else "bert-base-random"),
                                            tiny=args.smoke)
    flags = sentadapt_flags()
    batches, sgopt_batch = (SMOKE["batches"], SMOKE["sgopt_batch"]) if args.smoke else (BATCHES, SGOPT_BATCH)
    rows = chosen if chosen is not None else select_rows(plan_rows(batches, sgopt_batch, args.compile), args.only)
    skipped = {row.name: reason for row in rows if (reason := skip_reason(row, cuda, flags))}
    card = torch.cuda.get_device_name() if cuda else "CPU (smoke run)"
    print(f"card: {card}; {len(rows) - len(skipped)} rows of {steps} steps; sentadapt flags: "
          f"{', '.join(sorted(flags)) or 'no --tf32'}", flush=True)
    size = SMOKE["matmul"] if args.smoke and not cuda else args.matmul_size
    needed = sorted({row.precision for row in rows if row.name not in skipped}, key=PRECISIONS.index)
    peaks = {precision: matmul_peak_flops("cuda" if cuda else "cpu", precision, size=size) for precision in needed}
    print("matmul peak TFLOP/s: " + ", ".join(f"{p} {v / 1e12:,.1f}" for p, v in peaks.items()), flush=True)
    if cuda:
        torch.cuda.empty_cache()  # the peak's matrices must not sit on the card during the rows
    with torch.device("meta"):  # the shape only: no weights allocated
        shape = EncoderShape.of_bert(AutoModel.from_config(AutoConfig.from_pretrained(model)))
    gpu = smi_gpu_id(str(getattr(torch.cuda.get_device_properties(0), "uuid", ""))) if cuda else None
    ctx = Context(args.smoke, model, corpus, work, cuda, gpu, flags, steps, warmup, peaks, shape=shape,
                  settings=args.settings)
    run = {"run_id": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # sorts by start: --render keeps the later
           "card": card, "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "versions": versions(),
           "steps": steps, "warmup_steps": warmup, "peak_tflops": {p: v / 1e12 for p, v in peaks.items()},
           "sentadapt_flags": sorted(flags), "settings": args.settings, "model": str(model), "corpus": str(corpus),
           "encoder_parameters": shape.parameters}
    return ctx, rows, skipped, run


def _summary(row: dict[str, Any]) -> str:
    if "examples_per_s" not in row:
        return f"{row['row']}: {row.get('skipped') or row.get('error')}"
    return (f"{row['row']}: {row['examples_per_s']:,.1f} examples/s, useful MFU {row['useful_mfu']:.1%}, "
            f"peak {_mib(row.get('peak_gpu_mb'))}, median util {_percent(row.get('median_gpu_utilisation'))}")


if __name__ == "__main__":
    main()
