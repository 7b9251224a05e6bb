"""Benchmark: peak memory of `adapt --teacher` on a large corpus against the same run without a teacher.

    python -m bench.bench_teacher_memory                  # 1,000,000 sentences, teacher 768 wide, 20 steps
    python -m bench.bench_teacher_memory --sentences 100000 --steps 10

The teacher's table is what grows with the corpus (1M sentences × 768 dims × 4 B = 3.07 GB), so both models are
tiny and cheap to run: the student is BERT 32 wide, 2 layers; the teacher is BERT 768 wide with no transformer
layer (embeddings, LayerNorm, mean pooling: a real 768-dim vector per sentence at a fraction of a real model's
cost). The corpus is synthetic (sentences of 6–14 words drawn from the tiny vocabulary, seeded, all distinct).
Each run is `sentadapt adapt` in a fresh subprocess whose peak RSS (getrusage of the child, ru_maxrss) is its own:

  (prepare)     one step, unmeasured: it writes the corpus cache every measured run reads
  no teacher    ConSERT, --max-steps STEPS, --dev none
  teacher       the same with --teacher TINY-768 --set recipe_weight=0 (the table computed and written, then read
                a batch's rows at a time)
  teacher again the same once more: the table read back from the cache (a second run, or --resume)

Prints each run's seconds and peak RSS and the ratio to the run without a teacher; writes bench/out/teacher-memory.json.
$SENTADAPT_CACHE is pointed at bench/out/teacher-memory/cache so the first teacher run computes its table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

OUT = Path("bench/out/teacher-memory")
ASSETS = Path("tests/assets")


def build_models(folder: Path) -> tuple[Path, Path]:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = (ASSETS / "vocab.txt").read_text().split()
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(vocab)}, do_lower_case=True)
    paths = []
    for name, width, layers, heads in (("student-32", 32, 2, 2), ("teacher-768", 768, 0, 12)):
        torch.manual_seed(0)
        config = BertConfig(vocab_size=len(vocab), hidden_size=width, num_hidden_layers=layers,
                            num_attention_heads=heads, intermediate_size=37, max_position_embeddings=64)
        path = folder / name
        BertModel(config, add_pooling_layer=False).save_pretrained(path, safe_serialization=True)
        tokenizer.save_pretrained(path)
        paths.append(path)
    return paths[0], paths[1]


def build_corpus(path: Path, sentences: int, seed: int = 0) -> None:
    words = [w for w in (ASSETS / "vocab.txt").read_text().split() if w.isalpha()]
    generator = random.Random(seed)
    with path.open("w") as handle:
        for index in range(sentences):  # the index keeps every line distinct (dedup keeps all of them)
            length = generator.randint(6, 14)
            handle.write(" ".join(generator.choices(words, k=length)) + f" {index}\n")


def run(label: str, arguments: list[str], env: dict[str, str]) -> dict[str, object]:
    """`sentadapt ARGUMENTS` in a child reaped with wait4, whose rusage is that child's own peak RSS."""
    log = OUT / f"{label.split()[0]}-{len(arguments)}.log"
    started = time.perf_counter()
    with log.open("w") as handle:
        process = subprocess.Popen([sys.executable, "-m", "sentadapt", *arguments], env=env, stdout=handle,
                                   stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    if process.returncode:
        sys.exit(f"{label}: sentadapt exited {process.returncode}:\n{log.read_text()[-3000:]}")
    seconds = round(time.perf_counter() - started, 1)
    return {"run": label, "seconds": seconds, "peak_rss_mb": round(usage.ru_maxrss / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    student, teacher = build_models(OUT / "models")
    corpus = OUT / "corpus.txt"
    build_corpus(corpus, args.sentences)
    env = {**os.environ, "SENTADAPT_CACHE": str(OUT / "cache"), "HF_HUB_OFFLINE": "1"}
    common = ["adapt", str(corpus), "--recipe", "consert", "--base", str(student), "--dev", "none", "--max-steps",
              str(args.steps), "--batch-size", str(args.batch_size), "--max-length", "32", "--eval-every", "0",
              "--checkpoint-every", "0", "--overwrite"]
    # one run first prepares the corpus cache (tokenized Arrow), which every measured run then reads: the runs
    # differ only by the teacher
    run("prepare", [*common, "--output", str(OUT / "prepare"), "--max-steps", "1"], env)
    rows = []
    for label, extra in (("no teacher", []),
                         ("teacher", ["--teacher", str(teacher), "--set", "recipe_weight=0"]),
                         ("teacher again (cached table)", ["--teacher", str(teacher), "--set", "recipe_weight=0"])):
        rows.append(run(label, [*common, "--output", str(OUT / label.split()[0]), *extra], env))
        print(json.dumps(rows[-1]), flush=True)
    table_bytes = args.sentences * 768 * 4
    base = rows[0]["peak_rss_mb"]
    print(f"\n{args.sentences:,} sentences; teacher table {table_bytes / 1e9:.2f} GB on disk")
    print(f"{'run':<30} {'seconds':>8} {'peak RSS MB':>12} {'vs no teacher':>14}")
    for row in rows:
        print(f"{row['run']:<30} {row['seconds']:>8} {row['peak_rss_mb']:>12} "
              f"{row['peak_rss_mb'] / base:>13.2f}x")
    (OUT.parent / "teacher-memory.json").write_text(json.dumps(
        {"sentences": args.sentences, "steps": args.steps, "table_bytes": table_bytes, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
