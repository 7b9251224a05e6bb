"""The sentence-transformers peers of the domain suite, trained and scored so their rows regenerate from tracked outputs
(issue 41, item 6): SimCSE, CT and TSDAE (bench/peers.py) on both shared models × the four domains.

    python -m research.experiments.peer_runs [--work runs/decision] [--parallel 2] [--reuse]

Each peer trains as in the domain suite (100 steps, batch 32, max length 64; bench/peers.py's own learning rates)
on the domain's corpus, then its last step — the peers have no dev-based selection — and the base model score the
domain's pool (dev-200 + test) with the library's Evaluator exactly as `adapt --dev pool.jsonl` scores its steps.
The cosines go to the peer's dev_outputs.json in adapt's layout ({"base": ..., "evaluations": {"100": ...}}), so
research/experiments/decision_study.py's `load_run` reads a peer as a one-step run; `decision_study --store` keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.doc_sections import write_atomically

from research.experiments.decision_runs import MODELS, STEPS, pool_file
from research.experiments.decision_study import PEERS
from research.experiments.domain_data import DOMAINS
from research.experiments.results_suite import REPO, Runner, short
from research.experiments.stored_runs import job_record

BATCH, MAX_LENGTH = 32, 64  # the domain suite's peers: ConSERT's batch and length


def run_folder(work: Path, model: str, domain: str, peer: str) -> Path:
    return work / "runs" / short(model) / domain / peer


def train_argv(work: Path, model: str, domain: str, peer: str) -> list[str]:
    return [sys.executable, "-m", "bench.peers", "--loss", peer, "--model", model, "--corpus",
            str(work / "data" / domain / "corpus.txt"), "--steps", str(STEPS), "--batch-size", str(BATCH),
            "--max-length", str(MAX_LENGTH), "--output", str(run_folder(work, model, domain, peer) / "model")]


def score_pool(model: str, trained: Path, pool: Path, out: Path) -> None:
    """The base's and the trained peer's cosines of every pool pair, as adapt's dev_outputs.json lays them out."""
    from sentadapt import Encoder
    from sentadapt.evaluation.evaluator import Evaluator
    from sentadapt.evaluation.task_types import read_task

    evaluator = Evaluator([read_task(pool, "sts", split="test", aggregate="all")], resamples=0)
    outputs = {}
    for key, folder in (("base", model), ("last", str(trained))):
        report = evaluator(Encoder.load(folder, device="cpu"), batch_size=128)
        outputs[key] = evaluator.outputs_of(report)
    write_atomically(out, json.dumps({"base": outputs["base"], "evaluations": {str(STEPS): outputs["last"]}}))


def peer_job(runner: Runner, work: Path, model: str, domain: str, peer: str) -> None:
    folder = run_folder(work, model, domain, peer)
    if runner.reuse and (folder / "job.json").is_file():  # written last: the peer is trained and scored
        return
    name = f"peer-{short(model)}-{domain}-{peer}"
    runner.run(name, train_argv(work, model, domain, peer))
    score_pool(model, folder / "model", pool_file(work / "data", domain), folder / "dev_outputs.json")
    # the runner's record (command, wall time, peak RSS) beside the outputs, written last: the run is finished
    job_record(runner.work / "jobs" / f"{name}.json", folder / "job.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("runs/decision"))
    parser.add_argument("--models", help="comma list of model folders (default both shared MiniLMs)")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--parallel", type=int, default=2, help="jobs at a time, one thread each (default 2)")
    parser.add_argument("--reuse", action="store_true", help="skip peers whose outputs are written")
    args = parser.parse_args()
    os.chdir(REPO)
    if not (args.work / "data" / "manifest.json").is_file():
        raise SystemExit(f"{args.work}/data: no split; run python -m research.experiments.decision_runs first")
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    import torch

    torch.set_num_threads(1)  # the pool scoring runs in this process, beside the other jobs
    models = args.models.split(",") if args.models else MODELS
    runner = Runner(args.work, args.reuse)
    jobs = [(model, domain, peer) for peer in args.peers.split(",") for model in models
            for domain in args.domains.split(",")]
    with ThreadPoolExecutor(args.parallel) as pool:
        for future in [pool.submit(peer_job, runner, args.work, *job) for job in jobs]:
            future.result()


if __name__ == "__main__":
    main()
