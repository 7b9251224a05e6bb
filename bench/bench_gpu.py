"""The GPU training benchmark (issue 21): sentadapt vs a bare PyTorch loop vs sentence-transformers' SimCSE,
all in one run on one card, same model and data.

    python -m bench.bench_gpu                      # every row (~45 min on an H100, estimated)
    python -m bench.bench_gpu --only 'consert-bf16-*,bare-bf16-*,peer-bf16-*'
    python -m bench.bench_gpu --prepare bench/out/gpu-inputs  # tokenizer + corpus to carry
    python -m bench.bench_gpu --smoke              # every row, tiny model, CPU too: checks the script
    python -m bench.bench_gpu --render a.json b.json               # one table from several runs' results

Rows are SYSTEM-PRECISION-BATCH: `consert` (`sentadapt adapt --recipe consert --preset paper`), `bare` (the
~50-line loop of bare_loop.py: two dropout views, mean pooling, InfoNCE, fused AdamW), `peer` (sentence-
transformers' trainer, MultipleNegativesRankingLoss on (s, s): unsupervised SimCSE, peers.py) at batch 96
and 512, and `sgopt` (`--recipe sg-opt --preset paper`) at its paper's batch 16; precisions fp32 (TF32 off),
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
    "consert_compiled": "sentadapt ConSERT --compile",
    "sgopt": "sentadapt SG-OPT",
}
SENTADAPT = {"consert": "consert", "consert_compiled": "consert", "sgopt": "sg-opt"}  # row system → recipe
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
    """--only: comma-separated shell patterns over row names, e.g. 'consert-bf16-*,bare-*'."""
    if not only:
        return rows
    patterns = [pattern.strip() for pattern in only.split(",") if pattern.strip()]
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(row.name, pattern) for row in rows):
            sys.exit(f"--only: {pattern!r} matches no row; rows are SYSTEM-PRECISION-BATCH, e.g. "
                     f"{rows[0].name} (systems: {', '.join(SYSTEMS)})")
    return [row for row in rows if any(fnmatch.fnmatchcase(row.name, pattern) for pattern in patterns)]


def skip_reason(row: Row, cuda: bool, flags: set[str]) -> str | None:
    """Why a row cannot run here, or None."""
    if not cuda and row.precision in ("tf32", "fp16"):
        return f"{row.precision} needs a CUDA GPU"
    if row.recipe and row.precision == "tf32" and "--tf32" not in flags:
        return "this sentadapt has no --tf32: its fp32 (TF32 off) is the fp32 row"
    if row.system == "consert_compiled" and "--compile" not in flags:
        return "this sentadapt has no --compile"
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
          f"python -m bench.bench_gpu --tokenizer {folder}/tokenizer --corpus {folder}/corpus.txt")


def sentadapt_flags() -> set[str]:
    """Which of the newer `adapt` flags this sentadapt has (--tf32, --compile), read from its --help."""
    done = subprocess.run([sys.executable, "-m", "sentadapt", "adapt", "--help"], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "300", "NO_COLOR": "1"})
    if done.returncode:
        sys.exit("cannot run `python -m sentadapt adapt --help` (set PYTHONPATH to the repository root, or "
                 f"pip install -e .): {done.stderr.strip().splitlines()[-1:]}")
    return {flag for flag in ("--tf32", "--compile") if re.search(rf"(?<![\w-]){flag}(?![\w-])", done.stdout)}


# ---------------------------------------------------------------------- workers (each row's own process)


def peak_gpu_mb() -> float | None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return None


def sentadapt_worker(cli_args: list[str]) -> None:
    """`sentadapt CLI_ARGS` in this process (the same entry point as the console script), then the peak GPU
    memory the run allocated, which its run record does not hold."""
    from bench.gpu_measure import tf32_state
    from sentadapt.cli import main as sentadapt_main

    sys.argv = ["sentadapt", *cli_args]
    code: int | str | None = 0
    try:
        sentadapt_main()
    except SystemExit as stop:
        code = stop.code
    print("RESULT " + json.dumps({"exit_code": code or 0, "peak_gpu_mb": peak_gpu_mb(), "tf32": tf32_state()}))
    sys.exit(code or 0)


def loop_worker(args: argparse.Namespace) -> None:
    """--worker bare|peer: one row of the bare loop or the sentence-transformers peer."""
    from bench.gpu_measure import tf32_state

    if args.worker == "peer":
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
        if row.system == "consert_compiled":
            command += ["--compile"]
        if ctx.smoke:
            command += ["--set", "log_every=1"]  # a few steps: every one logged, so a rate can be read
        return command
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
        done = subprocess.run(command, capture_output=True, text=True)
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
    max_length = read_max_length(run_dir / "config.yaml") if row.recipe else MAX_LENGTH
    out.update(timed, max_length=max_length, peak_gpu_mb=result.get("peak_gpu_mb"), tf32=result.get("tf32"),
               median_gpu_utilisation=median_utilisation(sampler.samples, *timed["window"]),
               smi_peak_memory_mb=max((s.memory_mb for s in sampler.samples), default=None),
               smi_problem=sampler.problem)
    out.update(useful_flops(row, ctx, max_length, out["examples_per_s"]))
    return out


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
    # SG-OPT: one forward + backward of the tuned copy, one no-grad forward of the guide; the rest: two views
    passes = (1, 1) if row.system == "sgopt" else (2, 0)
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
        if row["system"] != "sgopt":  # another recipe at another batch: not comparable with the two-view loops
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
    ]
    return [(target, "not measured" if value is None else form.format(value),
             "–" if value is None else ("yes" if value >= bar else "**no**")) for target, value, bar, form in checks]


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
                  f"sentadapt flags present: {', '.join(run['sentadapt_flags']) or 'neither --tf32 nor --compile'}.",
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
              "| issue 21 target | measured | met |", "|---|---:|:---:|",
              *[f"| {target} | {value} | {met} |" for target, value, met in acceptance(rows)]]
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--compile", action="store_true", help="also the torch.compile rows (sentadapt --compile)")
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--smoke", action="store_true", help="every row end to end with a tiny random BERT, a "
                        "few steps and small batches; on the CPU too (fp32 and bf16 there)")
    parser.add_argument("--prepare", type=Path, metavar="DIR", help="write the tokenizer and the corpus into DIR "
                        "(to carry to a machine without ../shared) and exit")
    parser.add_argument("--render", type=Path, nargs="+", metavar="JSON", help="redraw one table from these "
                        "results files into --out and exit")
    parser.add_argument("--work", type=Path, default=Path("bench/out/gpu"), help="models, runs and logs")
    parser.add_argument("--out", type=Path, help="results JSON, markdown beside it (default bench/out/gpu.json; "
                        "--smoke: gpu-smoke.json)")
    # a row's own process (started by this script)
    parser.add_argument("--worker", choices=["bare", "peer"], help=argparse.SUPPRESS)
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


def set_up(args: argparse.Namespace, cuda: bool) -> tuple[Context, list[Row], dict[str, str], dict[str, Any]]:
    """Inputs, rows, the card's peaks and the run's header: everything before the first row."""
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
    rows = select_rows(plan_rows(batches, sgopt_batch, args.compile), args.only)
    skipped = {row.name: reason for row in rows if (reason := skip_reason(row, cuda, flags))}
    card = torch.cuda.get_device_name() if cuda else "CPU (smoke run)"
    print(f"card: {card}; {len(rows) - len(skipped)} rows of {steps} steps; sentadapt flags: "
          f"{', '.join(sorted(flags)) or 'no --tf32, no --compile'}", flush=True)
    size = SMOKE["matmul"] if args.smoke and not cuda else args.matmul_size
    needed = sorted({row.precision for row in rows if row.name not in skipped}, key=PRECISIONS.index)
    peaks = {precision: matmul_peak_flops("cuda" if cuda else "cpu", precision, size=size) for precision in needed}
    print("matmul peak TFLOP/s: " + ", ".join(f"{p} {v / 1e12:,.1f}" for p, v in peaks.items()), flush=True)
    if cuda:
        torch.cuda.empty_cache()  # the peak's matrices must not sit on the card during the rows
    with torch.device("meta"):  # the shape only: no weights allocated
        shape = EncoderShape.of_bert(AutoModel.from_config(AutoConfig.from_pretrained(model)))
    gpu = smi_gpu_id(str(getattr(torch.cuda.get_device_properties(0), "uuid", ""))) if cuda else None
    ctx = Context(args.smoke, model, corpus, work, cuda, gpu, flags, steps, warmup, peaks, shape=shape)
    run = {"run_id": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # sorts by start: --render keeps the later
           "card": card, "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "versions": versions(),
           "steps": steps, "warmup_steps": warmup, "peak_tflops": {p: v / 1e12 for p, v in peaks.items()},
           "sentadapt_flags": sorted(flags), "model": str(model), "corpus": str(corpus),
           "encoder_parameters": shape.parameters}
    return ctx, rows, skipped, run


def _summary(row: dict[str, Any]) -> str:
    if "examples_per_s" not in row:
        return f"{row['row']}: {row.get('skipped') or row.get('error')}"
    return (f"{row['row']}: {row['examples_per_s']:,.1f} examples/s, useful MFU {row['useful_mfu']:.1%}, "
            f"peak {_mib(row.get('peak_gpu_mb'))}, median util {_percent(row.get('median_gpu_utilisation'))}")


if __name__ == "__main__":
    main()
