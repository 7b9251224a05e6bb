"""First look (issue 84): a teacher run's encoder pass *packed* — every row's real tokens in one sequence, so the
linear layers, LayerNorms and GELUs compute no padding and run once a step whatever the rows' lengths — against one
padded pass and the length chunks (one whole backbone pass per chunk, what sentadapt does on a CPU today).

    python -m bench.bench_packed_pass [--steps 5] [--rounds 3]

Attention is the one operation that needs rows apart: sentadapt.model.packed_pass's attention, registered with
transformers' AttentionInterface (its extension point for attention kernels: nothing patched), runs it per length
chunk of the rows (each chunk padded to its own longest row, as the length chunks are), gathering its queries, keys
and values from the packed tokens and putting the output back (the first look's figures were made with this
script's own copy of it, before the product had one). Position ids restart at each row; a row's vector is the mean of
its tokens (all-MiniLM-L6-v2's pooling). So the cost of one more pass that the length chunks trade against padding
(`PASS_OVERHEAD_TOKENS`, timed per CPU since issue 84) buys only a smaller attention call here: on a CPU where a pass
costs much, packing keeps its gain where the chunks lose theirs.

Measured: forward + backward (the vectors' squared sum) of `--steps` stacked batches of 3 × 64 rows (the teacher
run's two ConSERT views and its distillation student), 192 sentences drawn at random from the corpus (not the
neighbour batches of a real run), all-MiniLM-L6-v2's tokenizer, max length 64, dropout off; each mode the best of
`--rounds`, the modes alternating. Parity: each mode's vectors against the padded pass's, max |Δ|.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from sentadapt.model.length_chunks import plan_chunks
from sentadapt.model.packed_pass import PackedRows, packed_attention_on

SHARED = Path("../shared")
STUDENT = SHARED / "models/all-minilm-l6-v2"
ROWS, MAX_LENGTH = 192, 64  # the stacked batch of a teacher run step (3 × 64) and its max length


def padded(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """One pass of the batch padded to its longest row; each row's mean token."""
    return padded_mean(model(input_ids=ids, attention_mask=mask).last_hidden_state, mask)


def padded_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1)


def chunked(model: Any, ids: torch.Tensor, mask: torch.Tensor, overhead: int) -> torch.Tensor:
    """A whole pass per length chunk (plan_chunks at `overhead`), the rows put back in the batch's order."""
    lengths = mask.sum(1)
    vectors = torch.empty(ids.shape[0], model.config.hidden_size)
    for rows in plan_chunks(lengths.numpy(), overhead):
        rows_tensor = torch.as_tensor(rows)
        width = int(lengths[rows_tensor].max())
        vectors = vectors.index_put((rows_tensor,), padded(model, ids[rows_tensor, :width], mask[rows_tensor, :width]))
    return vectors


def packed(model: Any, ids: torch.Tensor, mask: torch.Tensor, overhead: int) -> torch.Tensor:
    """One pass of the real tokens packed (sentadapt.model.packed_pass, as the Encoder runs it), attention in length
    chunks at `overhead`; each row's mean token."""
    lengths = mask.sum(1)
    chunks = [(torch.as_tensor(rows), int(lengths[rows].max())) for rows in plan_chunks(lengths.numpy(), overhead)]
    rows = PackedRows.plan(mask, chunks)
    with packed_attention_on(model):
        hidden = model(**rows.backbone_inputs(ids)).last_hidden_state
    return padded_mean(rows.unpack(hidden), mask)


def load_model(path: Path) -> Any:
    """The model with PyTorch's attention (packed passes switch it for theirs), dropout off."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(path), attn_implementation="sdpa")
    model.eval()
    return model


def batches(corpus: Path, tokenizer_path: Path, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path))
    lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    draw = random.Random(0)
    found = []
    for _ in range(steps):
        encoded = tokenizer(draw.sample(lines, ROWS), truncation=True, max_length=MAX_LENGTH, padding=True,
                            return_tensors="pt")
        found.append((encoded["input_ids"], encoded["attention_mask"]))
    return found


def modes(model: Any) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    return {"padded": lambda ids, mask: padded(model, ids, mask),
            "chunked 100": lambda ids, mask: chunked(model, ids, mask, 100),
            "chunked 1000": lambda ids, mask: chunked(model, ids, mask, 1000),
            "packed 100": lambda ids, mask: packed(model, ids, mask, 100),
            "packed 1000": lambda ids, mask: packed(model, ids, mask, 1000)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path("runs/teacher-run/corpus.txt"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = load_model(STUDENT)
    steps = batches(args.corpus, STUDENT, args.steps)
    real = sum(int(mask.sum()) for _, mask in steps)
    computed = sum(mask.numel() for _, mask in steps)
    print(f"{args.steps} batches of {ROWS} rows: {real} real tokens of {computed} padded ({1 - real / computed:.0%} "
          f"padding); torch {torch.__version__}, {torch.get_num_threads()} threads")
    ways = modes(model)
    with torch.no_grad():
        reference = [ways["padded"](ids, mask) for ids, mask in steps]
        for name, way in ways.items():
            largest = max(float((way(ids, mask) - vectors).abs().max()) for (ids, mask), vectors
                          in zip(steps, reference, strict=True))
            print(f"parity {name:<13} max |Δ| against padded {largest:.1e}")
    best = dict.fromkeys(ways, float("inf"))
    for _ in range(args.rounds):
        for name, way in ways.items():
            started = time.perf_counter()
            for ids, mask in steps:
                way(ids, mask).pow(2).sum().backward()
            best[name] = min(best[name], time.perf_counter() - started)
            model.zero_grad(set_to_none=True)
    print(f"{'mode':<13} {'s (best)':>9} {'÷ padded':>9} {'÷ chunked 100':>14}")
    for name, seconds in best.items():
        print(f"{name:<13} {seconds:9.2f} {seconds / best['padded']:8.2f}× {seconds / best['chunked 100']:13.2f}×")


if __name__ == "__main__":
    main()
