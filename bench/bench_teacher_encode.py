"""Benchmark: the teacher's table (what `adapt --teacher MODEL` encodes before training) against
sentence-transformers' `encode` of the same sentences with the same model, device and dtype, in one process.

    python -m bench.bench_teacher_encode     # the tokenizer and corpus of bench/out/gpu-carry (bench_gpu --prepare)
    python -m bench.bench_teacher_encode --smoke        # a tiny model and 2,000 sentences on whatever device there is

The model is randomly initialised (seed 0) with all-mpnet-base-v2's shape (MPNet-base: 12 layers, 768 wide, mean
pooling, normalised; the real weights are 438 MB and cannot travel to a lent GPU), saved once as a
sentence-transformers folder that both sides load. The sentences are the corpus's lines and numbered variants of
them (`line 1`, `line 2`, ...), all distinct, so no side can skip a repeat.

Rows, each after a warm-up over 2,048 of the sentences, in the order peer, sentadapt, peer, sentadapt (a slow
drift of the card's clocks then cancels out of the ratio), each timed with the GPU synchronised at both ends:

  st encode          SentenceTransformer.encode(texts, batch_size, convert_to_numpy=True)
  sentadapt encode   Encoder.encode(texts, batch_size, max_length): the call the table makes per 8,192-text block
  sentadapt table    embedding_cache.cached_table: the whole path, texts hashed for the cache key, blocks encoded
                     and appended to the .npy file on disk (a fresh cache folder each time)

Prints sentences/s and the ratios; writes --out (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 37}


def build_model(tokenizer_dir: Path, out: Path, tiny: bool, max_length: int) -> Path:
    """A random MPNet of all-mpnet-base-v2's shape (tiny: 2 layers, 32 wide) with mean pooling and Normalize,
    saved as a sentence-transformers folder."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    # all-mpnet-base-v2's vocabulary has 30,527 tokens; any WordPiece vocabulary of at most that size fits it
    config = MPNetConfig(**(TINY if tiny else {}), vocab_size=max(len(tokenizer), 30527))
    torch.manual_seed(0)
    shutil.rmtree(out, ignore_errors=True)
    hf = out / "hf"
    MPNetModel(config, add_pooling_layer=False).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    transformer = models.Transformer(str(hf), max_seq_length=max_length)
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), "mean")
    SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu").save(str(out / "st"))
    return out / "st"


def sentences(corpus: Path, count: int) -> list[str]:
    lines = list(dict.fromkeys(line.strip() for line in corpus.read_text(encoding="utf-8").splitlines()
                               if line.strip()))
    texts, round_ = [], 0
    while len(texts) < count:
        texts.extend(line if round_ == 0 else f"{line} {round_}" for line in lines[: count - len(texts)])
        round_ += 1
    return texts


def timed(device: torch.device, work: Any) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", type=Path, default=Path("bench/out/gpu-carry/tokenizer"))
    parser.add_argument("--corpus", type=Path, default=Path("bench/out/gpu-carry/corpus.txt"))
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=128, help="sentadapt's eval_batch_size default")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                        help="fp32: what the teacher's table is encoded in; bf16: both sides' weights cast")
    parser.add_argument("--smoke", action="store_true", help="tiny model, 2,000 sentences")
    parser.add_argument("--work", type=Path, default=Path("bench/out/teacher-encode"))
    parser.add_argument("--out", type=Path, default=Path("bench/out/teacher-encode.json"))
    args = parser.parse_args()
    if not (args.tokenizer / "tokenizer_config.json").is_file():
        sys.exit(f"--tokenizer: {args.tokenizer} has no tokenizer_config.json; run python -m bench.bench_gpu "
                 "--prepare bench/out/gpu-carry first")
    if not args.corpus.is_file():
        sys.exit(f"--corpus: {args.corpus} does not exist")
    count = 2_000 if args.smoke else args.sentences

    from sentence_transformers import SentenceTransformer

    from sentadapt.model.embedding_cache import cached_table
    from sentadapt.model.encoder import Encoder

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    began = time.perf_counter()

    def stage(what: str) -> None:  # a lent GPU's call may be cut at its limit: say how far it got
        print(f"[{time.perf_counter() - began:6.1f} s] {what}", flush=True)

    folder = build_model(args.tokenizer, args.work / "model", args.smoke, args.max_length)
    stage("model built")
    texts = sentences(args.corpus, count)
    warm = texts[:2048]
    peer = SentenceTransformer(str(folder), device=str(device))
    ours = Encoder.load(folder, device=str(device))
    if args.dtype == "bf16":
        peer = peer.to(torch.bfloat16)

    def peer_encode(batch: list[str]) -> None:
        peer.encode(batch, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)

    def ours_encode(batch: list[str]) -> None:
        ours.encode(batch, batch_size=args.batch_size, max_length=args.max_length, dtype=args.dtype)

    runs = 0

    def ours_table() -> None:
        nonlocal runs
        runs += 1
        os.environ["SENTADAPT_CACHE"] = str(args.work / f"cache-{runs}")
        cached_table(ours, lambda start, stop: texts[start:stop], len(texts), args.max_length, args.batch_size)

    stage("both loaded")
    peer_encode(warm)
    ours_encode(warm)
    stage("warmed up")
    # the same function on both sides: the vectors of the first 256 sentences
    same = texts[:256]
    difference = float((torch.as_tensor(peer.encode(same, batch_size=args.batch_size, convert_to_numpy=True))
                        - ours.encode(same, batch_size=args.batch_size, max_length=args.max_length,
                                      dtype=args.dtype)).abs().max())
    seconds: dict[str, list[float]] = {"st encode": [], "sentadapt encode": [], "sentadapt table": []}
    for _ in range(2):
        seconds["st encode"].append(timed(device, lambda: peer_encode(texts)))
        stage(f"st encode: {seconds['st encode'][-1]:.2f} s")
        seconds["sentadapt encode"].append(timed(device, lambda: ours_encode(texts)))
        stage(f"sentadapt encode: {seconds['sentadapt encode'][-1]:.2f} s")
        if args.dtype == "fp32":  # the table is always encoded in fp32
            seconds["sentadapt table"].append(timed(device, ours_table))
            stage(f"sentadapt table: {seconds['sentadapt table'][-1]:.2f} s")
    for run in range(1, runs + 1):
        shutil.rmtree(args.work / f"cache-{run}", ignore_errors=True)

    card = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    peer_rate = count / min(seconds["st encode"])
    rows = {name: {"seconds": values, "sentences_per_s": count / min(values), "vs_st": count / min(values) / peer_rate}
            for name, values in seconds.items() if values}
    print(f"\n{card}, torch {torch.__version__}, {count:,} sentences, batch {args.batch_size}, max length "
          f"{args.max_length}, dtype {args.dtype}, {'tiny' if args.smoke else 'MPNet-base (random)'} model; "
          f"best of 2 runs each; max |Δ| between the two sides' vectors (256 sentences): {difference:.1e}")
    print(f"{'row':<18} {'sentences/s':>12} {'vs st':>7}   seconds")
    for name, row in rows.items():
        print(f"{name:<18} {row['sentences_per_s']:12,.0f} {row['vs_st']:6.2f}×   "
              f"{', '.join(f'{value:.2f}' for value in row['seconds'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"card": card, "torch": torch.__version__, "sentences": count,
                                    "batch_size": args.batch_size, "max_length": args.max_length,
                                    "dtype": args.dtype, "smoke": args.smoke, "max_abs_difference": difference,
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
