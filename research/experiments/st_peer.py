"""sentence-transformers' own distillation on the suite (issue 60, item 3): the peer's raw Δ per domain beside the
default teacher run's, on the same test draws.

    python -m research.experiments.st_peer --train --variant k3f      # WORK/st-peer/PAIRING-DOMAIN/ (the models)
    python -m research.experiments.st_peer --store --variant k3f      # their pool cosines → research/results/distill/st-peer
    python -m research.experiments.st_peer --table --variant k3f      # raw Δ per domain: the peer, k3f, k3

The peer is sentence-transformers' distillation as its docs train it (examples/sentence_transformer/training/
distillation/model_distillation.py): MSELoss between the student's vector and the teacher's, through
SentenceTransformerTrainer. It gets what our run got: the same corpus sentences in the same order (sentadapt's
reader, duplicates dropped), the teacher vectors our run cached (its teacher table, so no second teacher pass), the
same batch (64), number of steps (our run's), max length (64), lr (5e-5) and 10 % warm-up. A teacher wider than the
student (all-mpnet-base-v2, 768 → 384) is reduced as that example does: PCA of the teacher's vectors, its components
as a bias-free projection of every target. When the targets are unit vectors (a teacher whose last module
normalises, as all-MiniLM-L6-v2's does) and the student does not normalise (paraphrase-MiniLM-L3-v2), a Normalize
module is appended to the student, as a careful user would: with the example as it stands, MSE spent the training
on the vectors' norm and the L3 student fell 31 points on news (Spearman 80.6 → 48.7 on the pool; its cosines are
research/results/distill/st-peer-plain/l3-l6-news.npy). It keeps its last step (the trainer has no dev-based
selection).

Raw Δ: per domain, the mean over the 5 split seeds at 200 dev pairs of Spearman(peer) − Spearman(base) on each
draw's test pairs (distill_suite.drawn_splits; the base's cosines research/results/distill/base-cosines) — the draws
distill_suite.domain_raw averages for our runs, which score their dev-selected step instead.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from research.experiments.decision_runs import pool_file
from research.experiments.decision_study import load_pool, test_change
from research.experiments.distill_suite import (
    ALL_PAIRINGS,
    PAIRINGS,
    WORK,
    base_cosines,
    domain_raw,
    drawn_splits,
    pool_cosines,
    run_folder,
    study_path,
)
from research.experiments.domain_data import DOMAINS

RESULTS = Path("research/results/distill")
BATCH, MAX_LENGTH, LR, SEED = 64, 64, 5e-5, 42
SIZE = 200  # dev pairs of the draws whose test pairs score the peer (domain_raw's size)


def peer_folder(work: Path, pairing: str, domain: str) -> Path:
    return work / "st-peer" / f"{pairing}-{domain}"


def targets(table: np.ndarray, width: int) -> np.ndarray:
    """The teacher's vectors as the peer's MSE targets: as they are when the widths match, else projected on their
    first `width` principal components (fitted on the centred vectors, applied without centring, as the example's
    Dense layer does)."""
    if table.shape[1] == width:
        return table
    centred = table - table.mean(axis=0)
    _, _, components = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
    return (table @ components[:width].T).astype(np.float32)


def unit_length(vectors: np.ndarray) -> bool:
    return bool(np.abs(np.linalg.norm(vectors, axis=1) - 1).max() < 1e-3)


def train(work: Path, pairing: str, domain: str, variant: str) -> None:
    """The peer for one domain, with the corpus, teacher table and step count of our run of `variant`."""
    from datasets import Dataset
    from sentadapt.data.corpus import read_corpus
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Arguments
    from sentence_transformers.models import Normalize
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    ours = run_folder(work, pairing, domain, variant)
    metrics = json.loads((ours / "metrics.json").read_text())
    table = np.load(metrics["teacher"]["cache_file"])
    sentences = read_corpus([str(work / "data" / domain / "corpus.txt")]).sentences
    if len(sentences) != len(table):
        raise SystemExit(f"{ours}: {len(sentences)} corpus sentences but a teacher table of {len(table)} rows")
    set_seed(SEED)
    model = SentenceTransformer(ALL_PAIRINGS[pairing][0], device="cpu")
    model.max_seq_length = MAX_LENGTH
    labels = targets(table, model.get_sentence_embedding_dimension() or table.shape[1])
    if unit_length(labels) and not any(isinstance(module, Normalize) for module in model):
        model.append(Normalize())  # MSE to unit vectors from an unnormalised student spends itself on the norm
    output = peer_folder(work, pairing, domain)
    steps = int(metrics["steps"])
    arguments = Arguments(output_dir=str(output / "trainer"), per_device_train_batch_size=BATCH, max_steps=steps,
                          learning_rate=LR, warmup_steps=max(1, steps // 10), save_strategy="no",
                          logging_steps=10_000, report_to=[], use_cpu=True, seed=SEED, disable_tqdm=True)
    dataset = Dataset.from_dict({"sentence": sentences, "label": labels.tolist()})
    SentenceTransformerTrainer(model=model, args=arguments, train_dataset=dataset,
                               loss=losses.MSELoss(model)).train()
    model.save(str(output / "model"))
    print(f"st-peer {pairing} {domain}: {steps} steps", flush=True)


def store(work: Path, results: Path, pairing: str, domain: str) -> None:
    """The peer's cosine of every pool pair, rounded to 6 places: research/results/distill/st-peer/PAIRING-DOMAIN.npy."""
    pool = load_pool(pool_file(results / "data", domain))
    cosines = pool_cosines(work / "st-peer-cosines", str(peer_folder(work, pairing, domain) / "model"),
                           f"{pairing}-{domain}", pool)
    target = results / "st-peer" / f"{pairing}-{domain}.npy"
    target.parent.mkdir(parents=True, exist_ok=True)
    np.save(target, np.round(cosines, 6))


def peer_raw(results: Path, pairing: str, domain: str, seeds: int = 5) -> float:
    """The peer's mean raw test Δ over the split seeds at SIZE dev pairs (nan without its stored cosines)."""
    path = results / "st-peer" / f"{pairing}-{domain}.npy"
    if not path.is_file():
        return float("nan")
    pool = load_pool(pool_file(results / "data", domain))
    peer, base = np.load(path), base_cosines(results, pairing, domain, pool)
    changes = [test_change(pool, test, base, peer) for size, _seed, _dev, test in drawn_splits(pool, domain, seeds)
               if size == SIZE]
    return float(np.mean(changes))


def table(results: Path, variant: str) -> list[str]:
    studies = {name: json.loads(study_path(results, name).read_text())["cells"] for name in ("k3", variant)
               if study_path(results, name).is_file()}
    lines = [f"| pairing | domain | sentence-transformers MSE | {variant} | k3 |", "|---|---|---:|---:|---:|"]
    for pairing in PAIRINGS:
        for domain in DOMAINS:
            ours = [domain_raw(studies[name], pairing, domain) if name in studies else float("nan")
                    for name in (variant, "k3")]
            lines.append(f"| {pairing} | {domain} | {peer_raw(results, pairing, domain):+.2f} | {ours[0]:+.2f} | "
                         f"{ours[1]:+.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--variant", default="k3f", help="our runs whose inputs and step counts the peer takes")
    parser.add_argument("--pairs", default=",".join(PAIRINGS))
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--store", action="store_true")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for pairing in args.pairs.split(","):
        for domain in args.domains.split(","):
            if args.train:
                train(args.work, pairing, domain, args.variant)
            if args.store:
                store(args.work, args.results, pairing, domain)
    if args.table:
        print("\n".join(table(args.results, args.variant)))


if __name__ == "__main__":
    main()
