"""A teacher made from the base itself (issue 28, item 4): Trans-Encoder (Liu et al. 2022) on the domain suite.

Per shared model × domain, one cell:

1. **Mine pairs** from the domain's corpus.txt (a seeded sample of at most `--sentences` unique lines): each
   sentence's `--neighbours` nearest neighbours under the base bi-encoder (cosine), deduplicated, at most half of
   `--pairs`, plus as many uniformly random pairs (so the teacher also sees what "unrelated" looks like).
2. **Bi → cross**: a cross-encoder initialised from the base's own weights
   (`AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)`: a fresh regression head on the base's
   BERT) learns the base bi-encoder's cosines of those pairs (clipped to [0, 1]) with BCE on its logit, as the
   paper's bi-to-cross step does.
3. **Cross → bi**: the cross-encoder labels the same pairs (sigmoid, both orders averaged: a symmetric score) and
   the bi-encoder (`sentadapt.Encoder`, the base's pooling) learns them: MSE between its cosine and the label.
   Dev (dev.jsonl, 100 pairs) is scored `--evals` times per round, as `adapt --eval-every` does.
4. `--rounds 2`: the bi-encoder at the end of round 1 relabels the pairs for the cross-encoder (which continues from
   round 1), and steps 2-3 run again. Every dev evaluation of every round is a checkpoint to choose among.

The checkpoint with the best dev score is kept, and `adapt`'s default decision is applied to it with the library's
own functions: the paired-bootstrap Δ and CI (`Evaluator.compare_outputs`), the selection-aware evidence over every
dev evaluation (`dev_evidence`, max-T) and `decide(..., DecisionRule())` (risk rule, 0.20). Training reads dev only;
`--final` then reads each cell's test.jsonl once: base and chosen model in the same Evaluator (paired CI, 1,000
resamples, seed 0, each model at its own max_seq_length, as `sentadapt eval` scores them). The cross-encoder's own
dev Spearman as a scorer (sigmoid of its logit, both orders averaged) is recorded beside the base bi-encoder's.

    python -m research.experiments.trans_encoder --models L3 --domains news      # one cell, to size the budget
    python -m research.experiments.trans_encoder --models L3                     # the four L3 cells (dev only) ...
    python -m research.experiments.trans_encoder --models L6                     # ... and the four L6 ones (side by side)
    python -m research.experiments.trans_encoder --final                         # every trained cell on test, once
    python -m research.experiments.trans_encoder --table                         # the findings tables (markdown)
    python -m research.experiments.trans_encoder --models L3 --domains news --cross-only --cross-lr 1e-4 --cross-epochs 3 \
        --cross-evals 6 --pairs 6000 --variant probe                    # the teacher alone: its dev curve

`--data` defaults to runs/domain/data (`python -m research.experiments.domain_data --shared ../shared --out runs/domain/data
--seed 0`); the measured runs read another checkout's copy in place (`--data ../main/runs/domain/data`). Outputs in
WORK (runs/transenc): cells/MODEL-DOMAIN[-VARIANT].json (dev, settings, wall times), models/... (the chosen
bi-encoder, a sentence-transformers folder), probes/ (`--cross-only`), results.json (test). Run it under `nice`,
one thread per process (`OMP_NUM_THREADS=1`; the script also sets torch's thread count).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tools.doc_sections import write_atomically

from research.experiments.domain_data import DOMAINS
from research.experiments.domain_suite import MODELS
from research.experiments.results_suite import machine_summary, short

WORK = Path("runs/transenc")
DATA = Path("runs/domain/data")
ALIASES = {"L3": MODELS[0], "L6": MODELS[1]}
# research/results.md, "Domain adaptation suite", rows "sentadapt ConSERT" (100 steps, batch 32, dev every 25; verdicts
# by the strict rule, the default when that suite ran): test Δ per domain and the verdict (all keep-base → applied 0)
CONSERT: dict[str, dict[str, tuple[float, str]]] = {
    "paraphrase-minilm-l3-v2": {"news": (0.57, "keep"), "captions": (0.04, "keep"), "forums": (-0.01, "keep"),
                                "glosses": (0.18, "keep")},
    "all-minilm-l6-v2": {"news": (1.15, "keep"), "captions": (0.08, "keep"), "forums": (0.93, "keep"),
                         "glosses": (0.92, "keep")},
}


@dataclass(frozen=True)
class Settings:
    sentences: int = 3000  # corpus sample cap (captions has 8.3k lines, mostly SNLI premises)
    neighbours: int = 3  # nearest neighbours per sentence under the base
    pairs: int = 2000  # total pairs cap: half neighbours, half random (what 8 cells afforded on 2 shared cores)
    max_length: int = 64  # tokens per sentence in training (the cross-encoder gets 2× for the pair)
    batch_size: int = 32
    # The paper's lr 2e-5 for 1 epoch left the cross-encoder a non-scorer on dev (L3 news: −1.82 Spearman vs the
    # bi-encoder's 81.25; 6k pairs); at 1e-4 it climbed 0.2 → 20.0 → 30.7 over 94/188/282 steps (probe, dev only)
    cross_lr: float = 1e-4
    cross_epochs: int = 2
    bi_lr: float = 5e-5  # the top of the usual range: 63 steps at 2,000 pairs
    bi_epochs: int = 1
    evals: int = 4  # bi-encoder dev evaluations per round (the checkpoints chosen among)
    cross_evals: int = 4  # cross-encoder dev Spearman per round (recorded only)
    rounds: int = 1
    seed: int = 0


class Clock:
    """Wall seconds per stage, summed over rounds."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def time(self, stage: str) -> _Timer:
        return _Timer(self, stage)


class _Timer:
    def __init__(self, clock: Clock, stage: str) -> None:
        self.clock, self.stage = clock, stage

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *_: object) -> None:
        elapsed = time.perf_counter() - self.started
        self.clock.seconds[self.stage] = self.clock.seconds.get(self.stage, 0.0) + elapsed


# --------------------------------------------------------------------------------------------------- mining

def optimizer_step(loss: Any, optimizer: Any, scheduler: Any) -> float:
    """Backward, one optimizer and schedule step, gradients cleared; the loss as a float (both loops' step)."""
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return float(loss.detach())

def read_corpus(path: Path, limit: int, seed: int) -> list[str]:
    """Unique non-empty lines; a seeded sample of `limit` of them (in file order) when there are more."""
    lines = list(dict.fromkeys(line.strip() for line in path.read_text(encoding="utf-8").splitlines()))
    lines = [line for line in lines if line]
    if len(lines) <= limit:
        return lines
    keep = np.sort(np.random.default_rng(seed).choice(len(lines), size=limit, replace=False))
    return [lines[i] for i in keep]


def mine_pairs(units: Any, neighbours: int, limit: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (P, 2) of row indices, is_neighbour (P,) bool) from L2-normalised vectors: each row's nearest
    neighbours (i < j, deduplicated; at most limit // 2, sampled) and as many random pairs that are not among them."""
    sims = units @ units.T
    sims.fill_diagonal_(-float("inf"))  # a sentence is not its own neighbour
    top = sims.topk(min(neighbours, len(units) - 1), dim=1).indices.numpy()
    near = {(min(i, j), max(i, j)) for i, row in enumerate(top) for j in row.tolist()}
    close = np.array(sorted(near), dtype=np.int64).reshape(-1, 2)
    if len(close) > limit // 2:
        close = close[np.sort(rng.choice(len(close), size=limit // 2, replace=False))]
    taken, far = set(map(tuple, close.tolist())), []
    while len(far) < len(close):  # uniform pairs of distinct sentences, none a mined neighbour pair
        i, j = sorted(rng.choice(len(units), size=2, replace=False).tolist())
        if (i, j) not in taken:
            taken.add((i, j))
            far.append((i, j))
    pairs = np.concatenate([close, np.array(far, dtype=np.int64).reshape(-1, 2)])
    return pairs, np.r_[np.ones(len(close), bool), np.zeros(len(far), bool)]


def bi_labels(encoder: Any, texts: list[str], pairs: np.ndarray, max_length: int) -> np.ndarray:
    """The bi-encoder's cosine of each pair, clipped to [0, 1]: a BCE target for the cross-encoder."""
    import torch.nn.functional as F

    vectors = F.normalize(encoder.encode(texts, batch_size=128, max_length=max_length), dim=-1)
    cosines = (vectors[pairs[:, 0]] * vectors[pairs[:, 1]]).sum(-1).numpy()
    return np.clip(cosines, 0.0, 1.0)


# ----------------------------------------------------------------------------------------------- cross-encoder
def load_cross(base: str) -> tuple[Any, Any]:
    """The base's BERT weights under a fresh 1-output head (L3 has no pooler weights: its pooler starts random too)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the "newly initialized head" warning is the point here
    return AutoModelForSequenceClassification.from_pretrained(base, num_labels=1), AutoTokenizer.from_pretrained(base)


def batches(count: int, size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    order = rng.permutation(count)
    for start in range(0, count, size):
        yield order[start:start + size]


def schedule(optimizer: Any, steps: int) -> Any:
    """Linear warm-up over the first 10 % of steps, then linear decay to 0 (sentence-transformers' default)."""
    from transformers import get_linear_schedule_with_warmup

    return get_linear_schedule_with_warmup(optimizer, max(1, steps // 10), steps)


def cross_logits(model: Any, tokenizer: Any, first: list[str], second: list[str], max_length: int) -> Any:
    batch = tokenizer(first, second, truncation=True, max_length=2 * max_length, padding=True, return_tensors="pt")
    return model(**batch).logits.squeeze(-1)


def train_cross(model: Any, tokenizer: Any, texts: list[str], pairs: np.ndarray, labels: np.ndarray,
                settings: Settings, rng: np.random.Generator, dev: DevPairs) -> tuple[float, dict[str, float]]:
    """Bi → cross: BCE between the cross-encoder's logit and the bi-encoder's score; each pair in a random order
    (mined pairs are i < j, and the cross-encoder is not symmetric). Returns the last 10 % of steps' mean loss and
    the cross-encoder's dev Spearman `settings.cross_evals` times along the way (a diagnostic: nothing is chosen
    on it; the cross-encoder after its last step labels the pairs)."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.cross_lr)
    steps = settings.cross_epochs * -(-len(pairs) // settings.batch_size)
    scheduler, losses, curve, step = schedule(optimizer, steps), [], {}, 0
    checkpoints = {round(steps * k / settings.cross_evals) for k in range(1, settings.cross_evals + 1)}
    model.train()
    for _ in range(settings.cross_epochs):
        for rows in batches(len(pairs), settings.batch_size, rng):
            swap = rng.random(len(rows)) < 0.5
            first = [texts[pairs[r, int(s)]] for r, s in zip(rows, swap)]
            second = [texts[pairs[r, 1 - int(s)]] for r, s in zip(rows, swap)]
            logits = cross_logits(model, tokenizer, first, second, settings.max_length)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, torch.as_tensor(labels[rows], dtype=torch.float32))
            losses.append(optimizer_step(loss, optimizer, scheduler))
            step += 1
            if step in checkpoints:
                curve[f"s{step}"] = dev.cross_spearman(model, tokenizer, settings.max_length)
                print(f"    cross-encoder step {step}/{steps}: dev {curve[f's{step}']:.2f}", flush=True)
                model.train()
    model.eval()
    return float(np.mean(losses[-max(1, len(losses) // 10):])), curve


def cross_scores(model: Any, tokenizer: Any, first: list[str], second: list[str], max_length: int,
                 batch_size: int = 128) -> np.ndarray:
    """sigmoid(logit) of each pair, averaged over both orders: a symmetric score in (0, 1). Batches of similar
    length (sorted by characters): padding to the longest of a random batch doubled the labelling time."""
    import torch

    model.eval()
    order = sorted(range(len(first)), key=lambda i: len(first[i]) + len(second[i]))
    scores = np.empty(len(first), dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            a, b = [first[i] for i in rows], [second[i] for i in rows]
            forward = torch.sigmoid(cross_logits(model, tokenizer, a, b, max_length))
            backward = torch.sigmoid(cross_logits(model, tokenizer, b, a, max_length))
            scores[rows] = ((forward + backward) / 2).numpy()
    return scores


@dataclass(frozen=True)
class DevPairs:
    """The dev pairs as the cross-encoder reads them (its own dev Spearman as a scorer)."""

    first: list[str]
    second: list[str]
    gold: list[float]

    @classmethod
    def read(cls, path: Path) -> DevPairs:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return cls([r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [float(r["score"]) for r in rows])

    def cross_spearman(self, model: Any, tokenizer: Any, max_length: int) -> float:
        from sentadapt.evaluation.sts import spearman100

        return spearman100(cross_scores(model, tokenizer, self.first, self.second, max_length), self.gold)


# ------------------------------------------------------------------------------------------------- bi-encoder
class DevTrack:
    """Every dev evaluation of the bi-encoder (per-pair outputs, as `adapt` keeps them) and the best state so far."""

    def __init__(self, evaluator: Any, encoder: Any) -> None:
        self.evaluator, self.encoder = evaluator, encoder
        report = evaluator(encoder, batch_size=128, intervals=False)
        self.base_score, self.base_outputs = report.average, evaluator.outputs_of(report)
        self.scores: dict[str, float] = {}
        self.outputs: dict[str, Any] = {}
        self.best: str | None = None
        self.best_state: dict[str, Any] | None = None

    def evaluate(self, name: str) -> float:
        report = self.evaluator(self.encoder, batch_size=128, intervals=False)
        self.scores[name], self.outputs[name] = report.average, self.evaluator.outputs_of(report)
        if self.best is None or report.average > self.scores[self.best]:  # a tie keeps the earlier checkpoint
            self.best = name
            self.best_state = {k: v.detach().clone() for k, v in self.encoder.state_dict().items()}
        return report.average


def train_bi(encoder: Any, texts: list[str], pairs: np.ndarray, labels: np.ndarray, settings: Settings,
             rng: np.random.Generator, track: DevTrack, round_: int) -> float:
    """Cross → bi: MSE between the bi-encoder's cosine and the cross-encoder's score; dev `settings.evals` times.
    Returns the last 10 % of steps' mean loss."""
    import torch
    import torch.nn.functional as F

    ids = encoder.tokenize_ids(texts, settings.max_length)
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=settings.bi_lr)
    steps = settings.bi_epochs * -(-len(pairs) // settings.batch_size)
    scheduler, losses, step = schedule(optimizer, steps), [], 0
    checkpoints = {round(steps * k / settings.evals) for k in range(1, settings.evals + 1)}
    encoder.train()  # dropout on, as in every sentadapt recipe's training step
    for _ in range(settings.bi_epochs):
        for rows in batches(len(pairs), settings.batch_size, rng):
            left = encoder.collate([ids[i] for i in pairs[rows, 0]])
            right = encoder.collate([ids[j] for j in pairs[rows, 1]])
            cosine = F.cosine_similarity(encoder(left.input_ids, left.attention_mask),
                                         encoder(right.input_ids, right.attention_mask))
            loss = F.mse_loss(cosine, torch.as_tensor(labels[rows], dtype=torch.float32))
            losses.append(optimizer_step(loss, optimizer, scheduler))
            step += 1
            if step in checkpoints:
                score = track.evaluate(f"r{round_}-s{step}")
                print(f"    bi-encoder round {round_} step {step}/{steps}: dev {score:.2f} "
                      f"(base {track.base_score:.2f})", flush=True)
                encoder.train()
    encoder.eval()
    return float(np.mean(losses[-max(1, len(losses) // 10):]))


# --------------------------------------------------------------------------------------------------- decision
def dev_decision(track: DevTrack) -> dict[str, Any]:
    """`adapt`'s decision on the best dev checkpoint: Δ, paired 95 % CI, max-T evidence over every evaluation."""
    from sentadapt.decision.rule import DecisionRule, decide, evidence_record
    from sentadapt.evaluation.evaluator import dev_evidence

    assert track.best is not None
    names, rule = list(track.outputs), DecisionRule()
    change = track.scores[track.best] - track.base_score
    delta = track.evaluator.compare_outputs(track.base_outputs, track.outputs[track.best])
    evidence = dev_evidence(track.evaluator, track.base_outputs, [track.outputs[n] for n in names],
                            names.index(track.best))
    decision = decide(change, delta.interval, "dev.jsonl", evidence, rule)
    return {"base_score": track.base_score, "scores": track.scores, "chosen": track.best,
            "best_score": track.scores[track.best], "dev_change": change,
            "dev_change_ci": list(delta.interval) if delta.interval else None, **decision.to_dict(),
            "decision_settings": rule.to_dict(), "dev_evidence": evidence_record(evidence, rule)}


# ------------------------------------------------------------------------------------------------------ a cell
def cell_name(model: str, domain: str, variant: str) -> str:
    return f"{short(model)}-{domain}" + (f"-{variant}" if variant else "")


def run_cell(model: str, domain: str, data: Path, work: Path, settings: Settings, variant: str,
             cross_only: bool = False) -> dict[str, Any]:
    """Mine, then `settings.rounds` × (bi → cross, cross → bi), dev only; save the chosen bi-encoder and the record.
    `cross_only`: a probe of the teacher (round 1's cross-encoder and its dev curve), into WORK/probes/."""
    import torch
    from sentadapt import Encoder
    from sentadapt.evaluation.sts import StsEvaluator, spearman100

    torch.manual_seed(settings.seed)
    rng, clock = np.random.default_rng(settings.seed), Clock()
    started = time.perf_counter()
    with clock.time("load"):
        encoder = Encoder.load(model, device="cpu")  # the base's pooling, max_seq_length kept for dev and saving
        cross, tokenizer = load_cross(model)
        evaluator = StsEvaluator.from_pairs_file(data / domain / "dev.jsonl")
        track = DevTrack(evaluator, encoder)
    with clock.time("mine"):
        texts = read_corpus(data / domain / "corpus.txt", settings.sentences, settings.seed)
        units = torch.nn.functional.normalize(encoder.encode(texts, batch_size=128, max_length=settings.max_length),
                                              dim=-1)
        pairs, near = mine_pairs(units, settings.neighbours, settings.pairs, rng)
    dev = DevPairs.read(data / domain / "dev.jsonl")
    rounds = []
    for round_ in range(1, settings.rounds + 1):
        with clock.time("label by bi-encoder"):
            targets = bi_labels(encoder, texts, pairs, settings.max_length)
        with clock.time("train cross-encoder"):
            cross_loss, cross_curve = train_cross(cross, tokenizer, texts, pairs, targets, settings, rng, dev)
        with clock.time("label by cross-encoder"):
            labels = cross_scores(cross, tokenizer, [texts[i] for i in pairs[:, 0]], [texts[j] for j in pairs[:, 1]],
                                  settings.max_length)
        cross_dev = dev.cross_spearman(cross, tokenizer, settings.max_length)
        print(f"  round {round_}: cross-encoder dev {cross_dev:.2f} vs bi-encoder dev {track.base_score:.2f} "
              f"(base); labels mean {labels.mean():.3f} (neighbours {labels[near].mean():.3f}, "
              f"random {labels[~near].mean():.3f})", flush=True)
        if cross_only:  # a probe of the teacher alone: no bi-encoder step, no decision
            rounds.append({"round": round_, "cross_dev_spearman": cross_dev, "cross_dev_curve": cross_curve,
                           "cross_loss": cross_loss, "label_agreement_spearman": spearman100(labels, targets)})
            break
        with clock.time("train bi-encoder (dev evals included)"):
            bi_loss = train_bi(encoder, texts, pairs, labels, settings, rng, track, round_)
        rounds.append({"round": round_, "cross_dev_spearman": cross_dev, "cross_dev_curve": cross_curve,
                       "cross_loss": cross_loss, "bi_loss": bi_loss, "bi_targets_mean": float(targets.mean()),
                       "cross_labels_mean": float(labels.mean()),
                       "cross_labels_neighbours": float(labels[near].mean()),
                       "cross_labels_random": float(labels[~near].mean()),
                       "label_agreement_spearman": spearman100(labels, targets)})
    record = {"model": short(model), "base": model, "domain": domain, "variant": variant, "settings": asdict(settings),
              "sentences": len(texts), "pairs": len(pairs), "neighbour_pairs": int(near.sum()),
              "random_pairs": int((~near).sum()), "base_dev": track.base_score, "rounds": rounds,
              "machine": machine_summary(), "threads": torch.get_num_threads()}
    if not cross_only:
        output = work / "models" / cell_name(model, domain, variant)
        with clock.time("save"):
            assert track.best_state is not None
            encoder.load_state_dict(track.best_state)
            encoder.save(output)
        record.update(dev=dev_decision(track), output=str(output))
    record.update(seconds=clock.seconds, total_seconds=time.perf_counter() - started)
    path = work / ("probes" if cross_only else "cells") / f"{cell_name(model, domain, variant)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(record, indent=1) + "\n")
    return record


# ------------------------------------------------------------------------------------------------------ test
def test_cell(record: dict[str, Any], data: Path) -> dict[str, Any]:
    """Base and chosen model on the held-out test pairs (and dev again, as a check), one Evaluator per file."""
    from sentadapt import Encoder
    from sentadapt.evaluation.sts import StsEvaluator

    base, adapted = Encoder.load(record["base"], device="cpu"), Encoder.load(record["output"], device="cpu")
    scored: dict[str, Any] = {}
    for split in ("test", "dev"):
        evaluator = StsEvaluator.from_pairs_file(data / record["domain"] / f"{split}.jsonl")
        first, other = evaluator(base), evaluator(adapted)
        delta = evaluator.compare(first, other).tasks[f"{split}.jsonl"]["spearman"]
        scored[split] = {"base": first.average, "model": other.average, **delta.to_dict()}
    return scored


def final(work: Path, data: Path, variant: str) -> dict[str, Any]:
    path = work / ("results.json" if not variant else f"results-{variant}.json")
    results = json.loads(path.read_text()) if path.is_file() else {"cells": {}}
    for cell_path in sorted((work / "cells").glob("*.json")):
        record = json.loads(cell_path.read_text())
        name = cell_path.stem
        if record["variant"] != variant or name in results["cells"]:
            continue  # test is read once per cell
        started = time.perf_counter()
        record["test"] = test_cell(record, data)
        record["seconds"]["test"] = time.perf_counter() - started
        results["cells"][name] = record
        test = record["test"]["test"]
        print(f"{name}: test {test['base']:.2f} → {test['model']:.2f} (Δ {test['delta']:+.2f} "
              f"[{test['ci'][0]:+.2f}, {test['ci'][1]:+.2f}]); dev Δ {record['dev']['dev_change']:+.2f} "
              f"{record['dev']['decision']}", flush=True)
        results["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_atomically(path, json.dumps(results, indent=1) + "\n")
    return results


# ----------------------------------------------------------------------------------------------------- table
def applied(record: dict[str, Any]) -> float:
    return record["test"]["test"]["delta"] if record["dev"]["decision"] == "use-adapted" else 0.0


def table(results: dict[str, Any]) -> str:
    """Model × domain: base test, test Δ [CI], dev Δ, decision, applied; ConSERT beside; the scorers' dev."""
    verdict = {"use-adapted": "use", "keep-base": "keep"}
    lines = ["| model | domain | base test | test Δ [95 % CI] | dev Δ (risk) | decision | applied | ConSERT test Δ "
             "| ConSERT applied | cross-encoder dev | base bi-encoder dev |", "|---|---|" + "---:|" * 9]
    for model in CONSERT:
        cells = [r for r in results["cells"].values() if r["model"] == model]
        for record in sorted(cells, key=lambda r: list(DOMAINS).index(r["domain"])):
            test, dev = record["test"]["test"], record["dev"]
            consert, consert_verdict = CONSERT[model][record["domain"]]
            risk = f" ({dev['decision_risk']:.2f})" if dev.get("decision_risk") is not None else ""
            cross = " / ".join(f"{r['cross_dev_spearman']:.2f}" for r in record["rounds"])
            lines.append(f"| {model} | {record['domain']} | {test['base']:.2f} | {test['delta']:+.2f} "
                         f"[{test['ci'][0]:+.2f}, {test['ci'][1]:+.2f}]{' *' if test['ci_excludes_0'] else ''} | "
                         f"{dev['dev_change']:+.2f}{risk} | {verdict[dev['decision']]} | {applied(record):+.2f} | "
                         f"{consert:+.2f} | {0.0 if consert_verdict == 'keep' else consert:+.2f} | {cross} | "
                         f"{dev['base_score']:.2f} |")
        if cells:
            raw = np.mean([r["test"]["test"]["delta"] for r in cells])
            used = np.mean([applied(r) for r in cells])
            consert_raw = np.mean([CONSERT[model][r["domain"]][0] for r in cells])
            uses = sum(r["dev"]["decision"] == "use-adapted" for r in cells)
            lines.append(f"| {model} | average | – | {raw:+.2f} | – | {uses} of {len(cells)} use | {used:+.2f} | "
                         f"{consert_raw:+.2f} | +0.00 | – | – |")
    return "\n".join(lines)


def times(results: dict[str, Any]) -> str:
    stages = list(dict.fromkeys(s for r in results["cells"].values() for s in r["seconds"]))
    lines = ["| cell | pairs (near / random) | " + " | ".join(stages) + " | total |",
             "|---|---|" + "---:|" * (len(stages) + 1)]
    for name, r in results["cells"].items():
        total = sum(r["seconds"].values())
        lines.append(f"| {name} | {r['neighbour_pairs']} / {r['random_pairs']} | "
                     + " | ".join(f"{r['seconds'].get(s, 0.0):.0f} s" for s in stages) + f" | {total / 60:.1f} min |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ main
def parse_list(value: str | None, known: list[str], what: str) -> list[str]:
    names = [v.strip() for v in (value or ",".join(known)).split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"--{what}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--data", type=Path, default=DATA, help="the domain suite's splits (default %(default)s)")
    parser.add_argument("--models", help="comma list of L3, L6 (default both)")
    parser.add_argument("--domains", help=f"comma list (default all: {', '.join(DOMAINS)})")
    parser.add_argument("--variant", default="", help="a name for other settings (kept apart: cells/*-NAME.json)")
    parser.add_argument("--final", action="store_true", help="score every trained cell on test.jsonl, once")
    parser.add_argument("--table", action="store_true", help="print the findings tables from WORK/results.json")
    parser.add_argument("--cross-only", action="store_true",
                        help="probe the teacher: train round 1's cross-encoder only, its dev curve into WORK/probes/")
    defaults = Settings()
    for field, value in asdict(defaults).items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # the machine's 2 cores are shared: one thread per process
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = Settings(**{field: getattr(args, field) for field in asdict(defaults)})
    if args.final:
        final(args.work, args.data, args.variant)
    elif args.table:
        path = args.work / ("results.json" if not args.variant else f"results-{args.variant}.json")
        results = json.loads(path.read_text())
        print(table(results), "", times(results), sep="\n")
    else:
        for model in [ALIASES[m] for m in parse_list(args.models, list(ALIASES), "models")]:
            for domain in parse_list(args.domains, list(DOMAINS), "domains"):
                print(f"{short(model)} {domain}:", flush=True)
                record = run_cell(model, domain, args.data, args.work, settings, args.variant, args.cross_only)
                if args.cross_only:
                    continue
                dev = record["dev"]
                print(f"  chosen {dev['chosen']}: dev Δ {dev['dev_change']:+.2f} → {dev['decision']} "
                      f"({dev['decision_reason']}); {record['total_seconds'] / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
