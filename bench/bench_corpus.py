"""Benchmark: `sentadapt adapt` on generated corpora of 10k to 10M lines, new (Arrow cache) vs old (in memory).

    python -m bench.bench_corpus --model ../shared/models/paraphrase-minilm-l3-v2            # 10k and 1M lines
    python -m bench.bench_corpus --model ... --big 10000000                                 # + 10M, new path only

Each run is the user's command, a fresh process:
`sentadapt adapt CORPUS --recipe consert --base MODEL --max-steps 2 --dev none --output DIR`.
The old path is the in-memory reader of `--old-ref` (default: ae79395, the last commit before the cache),
extracted with `git archive` into bench/out/corpus/old-src and run the same way in the same session, so both
sides see the same machine load.
Reported per run: seconds until step 1 is logged (train.log), seconds until the corpus is ready (the new
path's "corpus cache:" line), total seconds, and peak RSS (the command's process; and the sum over it and its
worker processes, sampled every 0.1 s). Cold runs start from an empty $SENTADAPT_CACHE (bench/out/corpus/cache);
warm runs reuse it. The generated corpora and the cache are deleted at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS_SEED = 13
OLD_PATH_REF = "ae79395"  # main before the Arrow cache merged: the in-memory reader the issue measured (88 s at 1M)


def write_corpus(path: Path, lines: int, model: str = "") -> Path:
    """`lines` sentences of 4–16 words drawn (Zipf-like) from the model's whole-word vocabulary (else made-up
    words), ~3 % of them repeats of recent lines."""
    if path.is_file():
        return path
    rng = random.Random(WORDS_SEED)
    vocab_file = Path(model) / "vocab.txt"
    words = [w for w in vocab_file.read_text().split() if w.isalpha() and len(w) > 2] if vocab_file.is_file() else []
    vocabulary = words[:5000] or ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                                  for _ in range(5000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        recent: list[str] = []
        for start in range(0, lines, 100_000):
            block = []
            words = rng.choices(vocabulary, weights, k=min(100_000, lines - start) * 10)
            cursor = 0
            for _ in range(min(100_000, lines - start)):
                if recent and rng.random() < 0.03:
                    block.append(rng.choice(recent))
                    continue
                size = rng.randint(4, 16)
                line = " ".join(words[cursor % len(words):cursor % len(words) + size])
                cursor += size
                block.append(line)
            recent = block[-1000:]
            handle.write("\n".join(block) + "\n")
    tmp.rename(path)
    return path


def extract_old(ref: str, folder: Path) -> Path:
    """The `sentadapt` package as it is at git `ref`, extracted once into `folder`."""
    if not (folder / "sentadapt").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", ref, "sentadapt"], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (from /proc)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    stack += [int(child) for child in children.read().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total


def high_water(pid: int) -> int:
    """VmHWM: the process's own peak resident bytes so far."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0


def run_adapt(source: Path, corpus: Path, model: str, cache: Path, label: str, num_proc: int | None) -> dict:
    output = Path(tempfile.mkdtemp(prefix="bench-corpus-run-"))
    command = [sys.executable, "-m", "sentadapt", "adapt", str(corpus), "--recipe", "consert", "--base", model,
               "--max-steps", "2", "--dev", "none", "--output", str(output), "--overwrite"]
    if num_proc is not None and "new" in label:
        command += ["--num-proc", str(num_proc)]
    env = {**os.environ, "PYTHONPATH": str(source), "SENTADAPT_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    # cwd outside the repository: `python -m` puts the cwd first on sys.path, before PYTHONPATH
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=output.parent)
    result: dict = {"run": label, "lines": None, "ready_s": None, "step1_s": None}
    stderr_lines: list[str] = []

    def read_stderr() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            stderr_lines.append(line.rstrip())
            if "corpus cache:" in line and result["ready_s"] is None:
                result["ready_s"] = time.perf_counter() - started
            if line.startswith("read ") and result["lines"] is None:
                result["lines"] = line.strip()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    peak = own_peak = 0
    log = output / "train.log"
    while child.poll() is None:
        peak = max(peak, tree_rss(child.pid))
        own_peak = max(own_peak, high_water(child.pid))
        if result["step1_s"] is None and log.is_file() and log.stat().st_size:
            result["step1_s"] = time.perf_counter() - started
        time.sleep(0.1)
    child.communicate()
    reader.join()
    result["total_s"] = time.perf_counter() - started
    if result["step1_s"] is None and log.is_file():
        result["step1_s"] = result["total_s"]
    result["peak_tree_rss_mb"] = peak / 1e6
    result["peak_rss_mb"] = own_peak / 1e6
    result["returncode"] = child.returncode
    if child.returncode != 0:
        result["stderr_tail"] = stderr_lines[-5:]
    shutil.rmtree(output, ignore_errors=True)
    return result


_PREP_OLD = """
import resource, sys, time
from transformers import AutoTokenizer
from sentadapt.data.corpus import read_corpus
tokenizer = AutoTokenizer.from_pretrained(sys.argv[2])
started = time.perf_counter()
texts = read_corpus([sys.argv[1]]).sentences
limit = int(sys.argv[3])
call = dict(truncation=True, padding=False, return_attention_mask=False, return_token_type_ids=False)
ids = tokenizer(texts, max_length=limit, **call)["input_ids"]  # Encoder.tokenize_ids, as the old path did
full = [t for t, row in zip(texts, ids) if len(row) >= limit]  # count_truncated
truncated = sum(len(row) > limit for row in tokenizer(full, max_length=limit + 1, **call)["input_ids"]) if full else 0
lengths = [len(row) for row in ids]
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

_PREP_NEW = """
import resource, sys, time
from transformers import AutoTokenizer
from sentadapt.data.prepare import prepare_sentences
tokenizer = AutoTokenizer.from_pretrained(sys.argv[2])
started = time.perf_counter()
examples = prepare_sentences([sys.argv[1]], tokenizer, int(sys.argv[3])).examples
lengths = examples.lengths()
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def compare_preparation(old: Path, new: Path, corpus: Path, model: str, cache: Path, rounds: int) -> None:
    """Data preparation alone (read, dedup, tokenize, lengths), old and new alternated in fresh processes."""
    import statistics

    times: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(rounds):
        for label, source, code in (("old", old, _PREP_OLD), ("new", new, _PREP_NEW)):
            shutil.rmtree(cache, ignore_errors=True)
            env = {**os.environ, "PYTHONPATH": str(source), "SENTADAPT_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
            done = subprocess.run([sys.executable, "-c", code, str(corpus), model, "64"], env=env, cwd=cache.parent,
                                  capture_output=True, text=True, check=True)
            seconds, peak = done.stdout.split()
            times[label].append(float(seconds))
            print(json.dumps({"prep": label, "seconds": float(seconds), "peak_rss_mb": int(peak) / 1e6}), flush=True)
    old_s, new_s = statistics.mean(times["old"]), statistics.mean(times["new"])
    print(f"preparation of {corpus.name}: old {old_s:.1f} s, new (cold) {new_s:.1f} s: new is "
          f"{old_s / new_s:.2f}× the old speed (mean of {rounds} alternated rounds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--sizes", default="10000,1000000", help="Corpus sizes measured old and new.")
    parser.add_argument("--big", type=int, default=0, help="Also this many lines, new path only (e.g. 10000000).")
    parser.add_argument("--old-ref", default=OLD_PATH_REF,
                        help="Git ref of the in-memory path (default: the last commit before the cache).")
    parser.add_argument("--new-ref", default="", help="Git ref of the new path (default: this working tree; a "
                                                       "ref keeps a long run immune to edits made meanwhile).")
    parser.add_argument("--num-proc", type=int, default=None)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "corpus")
    parser.add_argument("--keep", action="store_true", help="Keep the generated corpora and the cache.")
    parser.add_argument("--prep-only", type=int, default=0, metavar="LINES",
                        help="Only compare data preparation (no model, no training) on LINES lines, old and new "
                             "alternated --rounds times.")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if Path(args.model).exists():
        args.model = str(Path(args.model).resolve())
    old = extract_old(args.old_ref, args.out / "old-src")
    new = extract_old(args.new_ref, args.out / "new-src") if args.new_ref else REPO
    cache = args.out / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    if args.prep_only:
        corpus = write_corpus(args.out / f"corpus-{args.prep_only}.txt", args.prep_only, args.model)
        try:
            compare_preparation(old, new, corpus, args.model, cache, args.rounds)
        finally:
            if not args.keep:
                shutil.rmtree(cache, ignore_errors=True)
                corpus.unlink()
        return
    results = []
    sizes = [int(size) for size in args.sizes.split(",") if size]
    try:
        for size in sizes + ([args.big] if args.big else []):
            corpus = write_corpus(args.out / f"corpus-{size}.txt", size, args.model)
            runs = [("new cold", new), ("new warm", new)]
            if size in sizes:
                runs.insert(0, ("old", old))
            for label, source in runs:
                result = run_adapt(source, corpus, args.model, cache, label, args.num_proc)
                result["size"] = size
                results.append(result)
                print(json.dumps(result), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(cache, ignore_errors=True)
            for corpus in args.out.glob("corpus-*.txt"):
                corpus.unlink()
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print_table(results)


def print_table(results: list[dict]) -> None:
    print("\n| lines | run | corpus ready s | step 1 s | total s | peak RSS | + workers | step 1 vs old |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    old_step1 = {r["size"]: r["step1_s"] for r in results if r["run"] == "old" and r["step1_s"]}
    for r in results:
        ratio = (f"{old_step1[r['size']] / r['step1_s']:.2f}×" if r["size"] in old_step1 and r["step1_s"]
                 else "–")
        ready = f"{r['ready_s']:.1f}" if r["ready_s"] else "–"
        step1 = f"{r['step1_s']:.1f}" if r["step1_s"] else "failed"
        print(f"| {r['size']:,} | {r['run']} | {ready} | {step1} | {r['total_s']:.1f} | "
              f"{r['peak_rss_mb']:.0f} MB | {r['peak_tree_rss_mb']:.0f} MB | {ratio} |")
    smallest = min(r["size"] for r in results)
    base = {r["run"]: r for r in results if r["size"] == smallest}
    for r in results:
        if r["size"] != smallest and r["run"] in base:
            print(f"peak RSS, {r['size']:,} lines, {r['run']}: {r['peak_rss_mb'] - base[r['run']]['peak_rss_mb']:+.0f} "
                  f"MB (with workers {r['peak_tree_rss_mb'] - base[r['run']]['peak_tree_rss_mb']:+.0f} MB) vs "
                  f"{smallest:,} lines")


if __name__ == "__main__":
    main()
