"""A fast in-process probe of distillation settings (issue 33), scored on dev pairs only.

    python -m research.experiments.distill_probe --data runs/dd-s0 --domain news --kind sim-mse --batches neighbours

Loads the student and the teacher with sentadapt's Encoder, takes the teacher's vectors of the domain's corpus
(cached under --cache), trains the student alone on the distillation objective (no recipe loss, no dev
selection inside the run) and prints dev Spearman after each pass. It exists to narrow the grid before the
product runs (`sentadapt adapt --teacher`), which then decide on dev as users' runs do; no test pair is read.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr
from sentadapt.model.encoder import Encoder
from sentadapt.recipes.losses import distillation_loss


def read_pairs(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], np.array([r["score"] for r in rows])


def dev_score(encoder: Encoder, pairs: tuple[list[str], list[str], np.ndarray],
              projection: torch.nn.Module | None = None) -> float:
    first, second, gold = pairs
    encoder.eval()
    a, b = encoder.encode(first, max_length=64), encoder.encode(second, max_length=64)
    if projection is not None:
        with torch.no_grad():
            a, b = projection(a), projection(b)
    cosines = torch.nn.functional.cosine_similarity(a, b).numpy()
    return float(spearmanr(cosines, gold).statistic * 100)


def neighbour_batches(table: torch.Tensor, batch: int, k: int, generator: torch.Generator) -> list[np.ndarray]:
    """One pass: half of each batch random anchors, the other half one of each anchor's k teacher neighbours."""
    unit = torch.nn.functional.normalize(table, dim=-1)
    neighbours = (unit @ unit.T).fill_diagonal_(-2).topk(k, dim=1).indices.numpy()
    order = torch.randperm(len(table), generator=generator).numpy()
    half = batch // 2
    pick = torch.randint(0, k, (len(table),), generator=generator).numpy()
    batches = []
    for start in range(0, len(order) - half + 1, half):
        anchors = order[start:start + half]
        partners = neighbours[anchors, pick[anchors]]
        batches.append(np.concatenate([anchors, partners]))
    return batches


def random_batches(n: int, batch: int, generator: torch.Generator) -> list[np.ndarray]:
    order = torch.randperm(n, generator=generator).numpy()
    return [order[i:i + batch] for i in range(0, n - batch + 1, batch)]


def loss_of(kind: str, student: torch.Tensor, target: torch.Tensor, projection: torch.nn.Module | None,
            temperature: float) -> torch.Tensor:
    if kind in ("kl", "mse") and projection is None:
        return distillation_loss(kind, student, target, temperature)
    if kind == "sim-mse":
        s, t = torch.nn.functional.normalize(student, dim=-1), torch.nn.functional.normalize(target, dim=-1)
        return (s @ s.T - t @ t.T).pow(2).mean()
    projected = projection(student)
    if kind == "cosine":
        return (1 - torch.nn.functional.cosine_similarity(projected, target)).mean()
    return (projected - target).pow(2).sum(-1).mean()


def augmented(corpus: list[str], variants: int, drop: float = 0.2) -> list[str]:
    """`variants` copies of each sentence with words dropped at random (each kept with 1 − drop, 3 at least)."""
    import random

    generator = random.Random(0)
    out = []
    for _ in range(variants):
        for sentence in corpus:
            words = sentence.split()
            kept = [w for w in words if generator.random() > drop]
            out.append(" ".join(kept if len(kept) >= 3 else words[:3]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("runs/dd-s0"))
    parser.add_argument("--domain", default="news")
    parser.add_argument("--student", default="../shared/models/all-minilm-l6-v2")
    parser.add_argument("--teacher", default=str(Path.home() / ".cache/sentadapt/models/all-mpnet-base-v2"))
    parser.add_argument("--kind", default="sim-mse")
    parser.add_argument("--batches", default="random")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.05)
    parser.add_argument("--dev", default="dev-200.jsonl")
    parser.add_argument("--cache", type=Path, default=Path("runs/probe-cache"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ortho", action="store_true")
    parser.add_argument("--augment", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    corpus = [line for line in (args.data / args.domain / "corpus.txt").read_text().splitlines() if line.strip()]
    dev = read_pairs(args.data / args.domain / args.dev)
    if args.augment:
        corpus = corpus + augmented(corpus, args.augment)
    args.cache.mkdir(parents=True, exist_ok=True)
    cache = args.cache / f"{args.data.name}-{args.domain}-{Path(args.teacher).name}-a{args.augment}.pt"
    if cache.is_file():
        table = torch.load(cache)
    else:
        teacher = Encoder.load(args.teacher, device="cpu")
        print(f"teacher dev {dev_score(teacher, dev):.2f}", flush=True)
        started = time.perf_counter()
        table = teacher.encode(corpus, max_length=64)
        print(f"teacher table {len(corpus)} in {time.perf_counter() - started:.0f} s", flush=True)
        torch.save(table, cache)
        del teacher
    student = Encoder.load(args.student, device="cpu")
    ids = student.tokenize_ids(corpus, 64)
    projection = None
    params = list(student.parameters())
    if args.kind in ("cosine", "mse") and table.shape[1] != student.embedding_dim:
        from sentadapt.train.distill import TeacherTargets, fitted_projection

        sample = lambda n: student.encode(corpus[:n], max_length=64)  # noqa: E731
        projection = fitted_projection(sample, TeacherTargets(table), student.embedding_dim)
        if args.ortho:  # an isometry: columns kept orthonormal, started at the orthogonal Procrustes fit
            s_ = sample(4096).double()
            u, _, vt = torch.linalg.svd(s_.T @ torch.as_tensor(table[:len(s_)]).double(), full_matrices=False)
            projection = torch.nn.Linear(student.embedding_dim, table.shape[1], bias=False)
            with torch.no_grad():
                projection.weight.copy_((u @ vt).T.float())
            torch.nn.utils.parametrizations.orthogonal(projection)
        params += list(projection.parameters())
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(0)
    print(f"{args.domain} {args.kind} {args.batches} lr {args.lr} b {args.batch_size}: "
          f"pass 0 dev {dev_score(student, dev):.2f}", flush=True)
    for epoch in range(1, args.passes + 1):
        student.train()
        batches = (neighbour_batches(table, args.batch_size, args.k, generator) if args.batches == "neighbours"
                   else random_batches(len(corpus), args.batch_size, generator))
        started, losses = time.perf_counter(), []
        for rows in batches:
            tokens = student.collate([ids[i] for i in rows])
            with student.dropout(False):
                vectors = student(tokens.input_ids, tokens.attention_mask)
            loss = loss_of(args.kind, vectors, table[torch.from_numpy(rows)], projection, args.temperature)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        projected = f" (through P: {dev_score(student, dev, projection):.2f})" if projection is not None else ""
        print(f"pass {epoch} dev {dev_score(student, dev):.2f}{projected} loss {losses[0]:.4g}→"
              f"{np.mean(losses[-5:]):.4g} ({len(batches)} steps, {time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
