"""The peers sentadapt is measured against: unsupervised SimCSE, Contrastive Tension and TSDAE, run through
sentence-transformers' own trainer on the same base model, sentences, batch, max length and steps.

    python -m bench.peers --loss simcse --model ../shared/models/all-minilm-l6-v2 --corpus runs/sts-corpus.txt \
        --steps 100 --batch-size 64 --output runs/results/peer-simcse

- simcse: MultipleNegativesRankingLoss on (s, s) pairs, dropout as the only augmentation (the recipe in
  the sentence-transformers docs for unsupervised SimCSE); scale 20 = 1 / τ with SimCSE's τ 0.05.
- ct: ContrastiveTensionLossInBatchNegatives (two copies of the model, in-batch negatives); the final
  model is the second copy, as in sentence-transformers.
- tsdae: DenoisingAutoEncoderLoss (decoder tied to the encoder, cross-attention added) on (damaged, original)
  pairs, 60 % of the words deleted (the TSDAE paper's best noise). The damage splits on whitespace, not
  nltk's word_tokenize: the punkt data nltk needs cannot be downloaded offline, and sentence-transformers'
  DenoisingAutoEncoderDataset belongs to the old `fit` API. Each of the steps × batch training items gets
  its own seeded deletion (a sentence repeated to fill the steps is damaged differently each time). The
  model keeps its own pooling (the paper uses CLS on raw BERT; these bases are mean-pooled).

The peers keep the model after the last step (sentence-transformers has no dev-based selection
unless one wires an evaluator and checkpointing), which the results tables say next to them.
Prints one `RESULT {json}` line: training seconds (loop only), the steps they cover and their wall-clock
window, sentences/s and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time
from pathlib import Path
from typing import Any

# learning rates from each method's own documentation: SimCSE (BERT-base, unsupervised) 3e-5;
# sentence-transformers' CT in-batch-negatives example 5e-5
# and TSDAE 3e-5 (the paper and the sentence-transformers example)
PEER_LR = {"simcse": 3e-5, "ct": 5e-5, "tsdae": 3e-5}
TSDAE_DELETION = 0.6  # TSDAE paper §4: deleting 60 % of the words was the best noise
SEED = 42  # every random draw of a peer run: its model-side initialisations, the data order, the deletions


def delete_words(sentences: list[str], ratio: float = TSDAE_DELETION, seed: int = SEED) -> list[str]:
    """Each sentence with `ratio` of its whitespace-separated words deleted (at least one word kept)."""
    rng = random.Random(seed)
    damaged = []
    for text in sentences:
        words = text.split()
        kept = [word for word in words if rng.random() >= ratio]
        if not kept and words:
            kept = [rng.choice(words)]
        damaged.append(" ".join(kept))
    return damaged


def read_sentences(corpus: Path, limit: int) -> list[str]:
    sentences = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    # repeat a small corpus so every run does the same number of steps (few-shot settings)
    while len(sentences) < limit:
        sentences = sentences + sentences
    return sentences[:limit]


def train_peer(loss_name: str, model_dir: str, sentences: list[str], *, steps: int, batch_size: int,
               max_length: int, lr: float, bf16: bool, output: str, save: bool, fp16: bool = False,
               tf32: bool | None = None, device: str = "cpu", warmup_steps: int = 0) -> dict[str, Any]:
    """Train with sentence-transformers' trainer; returns the loop's seconds (model loading excluded) over the
    steps after the first `warmup_steps`, and when they started and ended (time.time()). `tf32`: the
    trainer's own TF32 switch (None leaves torch's default); `device` "cuda" trains on the GPU."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    # before the loss is built: TSDAE's decoder gets freshly initialised cross-attention layers, which drew from
    # torch's unseeded generator, so two TSDAE runs of the same command differed (the trainer's seed comes later)
    set_seed(SEED)
    model = SentenceTransformer(model_dir, device=device)
    model.max_seq_length = max_length
    loss: Any
    if loss_name == "simcse":
        dataset = Dataset.from_dict({"anchor": sentences, "positive": sentences})
        loss = losses.MultipleNegativesRankingLoss(model, scale=20.0)
    elif loss_name == "ct":
        dataset = Dataset.from_dict({"sentence": sentences})
        loss = losses.ContrastiveTensionLossInBatchNegatives(model)
    elif loss_name == "tsdae":
        dataset = Dataset.from_dict({"damaged": delete_words(sentences), "original": sentences})
        loss = losses.DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)
    else:
        raise ValueError(f"unknown peer loss {loss_name!r}: simcse | ct | tsdae")
    arguments = SentenceTransformerTrainingArguments(
        output_dir=output, per_device_train_batch_size=batch_size, max_steps=steps, learning_rate=lr,
        warmup_steps=max(1, steps // 10), save_strategy="no", logging_steps=10_000, report_to=[], bf16=bf16,
        fp16=fp16, tf32=tf32, use_cpu=device == "cpu", dataloader_drop_last=True, seed=SEED, disable_tqdm=True,
    )
    timer = loop_timer(warmup_steps)
    trainer = SentenceTransformerTrainer(model=model, args=arguments, train_dataset=dataset, loss=loss,
                                         callbacks=[timer])
    trainer.train()
    if save:
        model.save(output)
    return {"seconds": timer.seconds, "timed_steps": steps - warmup_steps, "window": [timer.wall_start,
                                                                                      timer.wall_end]}


def loop_timer(warmup_steps: int = 0) -> Any:
    """A trainer callback timing the optimizer steps (transformers is imported only when a peer runs)."""
    import torch
    from transformers import TrainerCallback

    def synchronize() -> None:  # GPU work is queued: the host clock must wait for it at both ends
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    class _LoopTimer(TrainerCallback):
        """Times the optimizer steps only, from the start of step `warmup_steps` + 1 to the end of the last
        step, like sentadapt's own loop timer: the trainer's train_runtime also counts its model-card work at
        the start (it encodes example sentences), which is not training."""

        def __init__(self) -> None:
            self.started: float | None = None
            self.ended = False
            self.seconds = self.wall_start = self.wall_end = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.started is None and state.global_step >= warmup_steps:
                synchronize()
                self.started, self.wall_start = time.perf_counter(), time.time()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == state.max_steps:
                self._stop()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not self.ended:  # stopped before max_steps
                self._stop()

        def _stop(self) -> None:
            assert self.started is not None, f"training ended before step {warmup_steps + 1}"
            synchronize()
            self.seconds, self.wall_end, self.ended = time.perf_counter() - self.started, time.time(), True

    return _LoopTimer()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loss", choices=sorted(PEER_LR), required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--lr", type=float, help="default: the method's own (simcse 3e-5, ct 5e-5, tsdae 3e-5)")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--output", required=True)
    parser.add_argument("--no-save", action="store_true", help="throughput only: do not write the model")
    args = parser.parse_args()
    sentences = read_sentences(args.corpus, args.batch_size * args.steps)
    result = train_peer(args.loss, args.model, sentences, steps=args.steps, batch_size=args.batch_size,
                        max_length=args.max_length, lr=args.lr or PEER_LR[args.loss], bf16=args.bf16,
                        output=args.output, save=not args.no_save)
    result["sentences_per_s"] = args.batch_size * args.steps / result["seconds"]
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()


def isa_environment(isa: str) -> dict[str, str]:
    """The environment that keeps a process's CPU kernels to one instruction set (avx2, avx512, or default: no
    vector instructions beyond SSE4): PyTorch's own (ATEN_CPU_CAPABILITY) and its matrix libraries', MKL and oneDNN,
    which pick their kernels themselves — with only the first, the matmuls still ran AVX-512 code on an Intel machine
    (fp32 1024×384 · 384×1536: 356 GFLOP/s, 224 with all three). MKL on an AMD CPU ignores its variable (157 GFLOP/s
    either way on an AVX2 EPYC), so there `default` slows PyTorch's own kernels alone."""
    return {"ATEN_CPU_CAPABILITY": isa, "MKL_ENABLE_INSTRUCTIONS": {"default": "SSE4_2"}.get(isa, isa.upper()),
            "ONEDNN_MAX_CPU_ISA": {"avx2": "AVX2", "avx512": "AVX512_CORE", "default": "SSE41"}[isa]}
