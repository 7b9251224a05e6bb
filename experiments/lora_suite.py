"""LoRA against full fine-tuning on the domain suite (issue 27): all-MiniLM-L6-v2, ConSERT, the four domains.

    python -m experiments.lora_suite --train full        # one setting on the 4 domains (settings run side by side)
    python -m experiments.lora_suite --train lora-r16
    python -m experiments.lora_suite --final             # eval every trained setting on test and dev, then render
    python -m experiments.lora_suite --render            # redraw the section from WORK/lora.json

Both settings are the domain suite's ConSERT row (`experiments/domain_suite.py`: batch 32, max length 64, 100 steps,
dev every 25 steps on the 100 dev pairs, the tuned-base preset, `adapt`'s default decision); LoRA adds `--lora r=16`
(alpha 32, adapters on the attention projections) and a 10× learning rate (5e-4 vs the preset's 5e-5), the usual
ratio for LoRA: with ~1 % of the weights and B starting at zero, the preset's rate barely moves the adapters.
Training goes through DomainSuite (one `sentadapt adapt` per domain, its wall time and peak RSS recorded by the
runner) in WORK (runs/lora; data: runs/domain/data's split, seed 0). `--final` scores the base and every finished
setting in one `sentadapt eval` per domain on test.jsonl and dev.jsonl, counts trainable parameters, and writes the
section "lora" of docs/results.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from experiments.doc_sections import current_command
from experiments.domain_data import DOMAINS
from experiments.domain_suite import MODELS, SHARED, DomainSuite, Plan, parse_extra, score
from experiments.results_suite import REPO, machine_summary, sentadapt, short
from sentadapt.evaluation.decision import decision_of  # no torch
from tools.doc_sections import write_atomically, write_section

MODEL = MODELS[1]  # all-MiniLM-L6-v2
RECIPE = "consert"
SECTION = "lora"
WORK = Path("runs/lora")
STEPS, BATCH = 100, 32  # the domain suite's ConSERT row
# name → (what it is, --set-extra specs)
SETTINGS: dict[str, tuple[str, list[str]]] = {
    "full": ("full fine-tuning (every weight; lr 5e-5, the tuned-base preset)", []),
    "lora-r16": ("LoRA r 16, alpha 32, attention projections (lr 5e-4)",
                 [f"{RECIPE}:--lora=r=16,alpha=32,targets=attention", f"{RECIPE}:lr=5e-4"]),
    # every linear layer (the feed-forward ones too): the setting that matched full fine-tuning in QLoRA's study
    "lora-r16-all": ("LoRA r 16, alpha 32, every linear layer (lr 5e-4)",
                     [f"{RECIPE}:--lora=r=16,alpha=32,targets=all-linear", f"{RECIPE}:lr=5e-4"]),
}


def suite(name: str, work: Path) -> DomainSuite:
    plan = Plan(models=[MODEL], domains=list(DOMAINS), recipes=[RECIPE], steps=STEPS, batch_size=BATCH,
                eval_every=STEPS // 4, variant=name, extra=parse_extra(SETTINGS[name][1]), train_only=True)
    return DomainSuite(plan, work, SHARED, reuse=True)


def train(name: str, work: Path) -> dict[str, Any]:
    runs = suite(name, work)
    runs.prepare_data()
    return {domain: runs.train(RECIPE, MODEL, domain) for domain in DOMAINS}


def trainable_parameters(name: str) -> tuple[int, int]:
    """(trained, total) parameters of the setting's training module, counted on the model itself."""
    from sentadapt import Encoder, lora
    from sentadapt.config import TrainConfig

    encoder = Encoder.load(MODEL, device="cpu")
    flags = lora.lora_flags(next((spec.split("=", 1)[1] for spec in SETTINGS[name][1] if "--lora=" in spec), None))
    settings = lora.settings_of(TrainConfig(**flags))
    if settings is not None:
        lora.attach(encoder, settings)
    return lora.trainable_parameters(encoder)


def final(work: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"settings": {}, "domains": {}}
    trained = {name: train(name, work) for name in SETTINGS if _finished(work, name)}
    for name in trained:
        results["settings"][name] = {"what": SETTINGS[name][0], "parameters": trainable_parameters(name)}
    data = suite(next(iter(trained)), work).data
    for domain in DOMAINS:
        outputs = [str(trained[name][domain][0]) for name in trained]
        out = work / "evals" / f"{domain}-{len(trained)}.json"  # a new file (and job) when a setting is added
        files = ["test.jsonl", "dev.jsonl"]
        runner = suite(next(iter(trained)), work).runner
        job = runner.run(f"eval-{domain}-{'-'.join(trained)}", sentadapt(
            "eval", MODEL, *outputs, *(arg for f in files for arg in ("--pairs", str(data / domain / f))),
            "--json", str(out)))
        base, *adapted = json.loads(out.read_text())
        row: dict[str, Any] = {"base": {"test": score(base, "test.jsonl", "spearman")},
                               "eval_command": "python -m sentadapt " + " ".join(job.argv[3:])}
        for name, entry in zip(trained, adapted):
            folder, run = trained[name][domain]
            metrics = json.loads((folder / "metrics.json").read_text())
            row[name] = {"test": score(entry, "test.jsonl", "spearman"), "dev_delta": metrics["dev_change"],
                         "decision": decision_of(metrics).decision, "train_seconds": run["train_seconds"],
                         "peak_rss_mb": run["peak_rss_mb"], "command": run["command"]}
        results["domains"][domain] = row
    return results


def _finished(work: Path, name: str) -> bool:
    return all((work / "runs" / name / short(MODEL) / d / RECIPE / "metrics.json").is_file() for d in DOMAINS)


def applied(row: dict[str, Any]) -> float:
    return row["test"]["delta"] if row["decision"] == "use-adapted" else 0.0


def render(results: dict[str, Any]) -> str:
    names = list(results["settings"])
    domains = results["domains"]
    lines = [
        f"## LoRA vs full fine-tuning: ConSERT on {short(MODEL)}, the domain suite",
        "",
        f"Generated by `python -m experiments.lora_suite --final` ({machine_summary()}). The domain suite's ConSERT "
        f"settings (batch {BATCH}, max length 64, {STEPS} steps, checkpoint chosen on the 100 dev pairs, `adapt`'s "
        "default decision); each setting's runs were trained side by side, so times compare within this table only. "
        "Test Δ: Spearman × 100 on the held-out test pairs against the base, paired 95 % CI (* when it excludes 0); "
        "decision applied: keep-base → 0.",
        "",
        "| setting | trained parameters | " + " | ".join(f"{d} test Δ" for d in DOMAINS) +
        " | avg test Δ | avg, decision applied | decisions (use) | train time (4 domains) | peak RSS |",
        "|---|---:|" + "---:|" * (len(DOMAINS) + 5),
        "| base model (Spearman × 100) | – | " + " | ".join(
            f"{domains[d]['base']['test']['value']:.2f}" for d in DOMAINS) + " | – | – | – | – | – |",
    ]
    for name in names:
        rows = [domains[d][name] for d in DOMAINS]
        trained, total = results["settings"][name]["parameters"]
        cells = [f"{r['test']['delta']:+.2f} [{r['test']['ci'][0]:+.2f}, {r['test']['ci'][1]:+.2f}]"
                 f"{' *' if r['test']['ci_excludes_0'] else ''}" for r in rows]
        uses = sum(r["decision"] == "use-adapted" for r in rows)
        lines.append(
            f"| {results['settings'][name]['what']} | {trained:,} of {total:,} ({100 * trained / total:.1f} %) | "
            + " | ".join(cells) + f" | {sum(r['test']['delta'] for r in rows) / len(rows):+.2f} | "
            f"{sum(applied(r) for r in rows) / len(rows):+.2f} | {uses} of {len(rows)} | "
            f"{sum(r['train_seconds'] for r in rows) / 60:.1f} min | "
            f"{max(r['peak_rss_mb'] for r in rows) / 1000:.2f} GB |")
    first = next(iter(DOMAINS))
    lines += ["", "```bash", *(f"python -m experiments.lora_suite --train {name}" for name in names),
              "python -m experiments.lora_suite --final",
              *(current_command(domains[first][name]["command"]).replace(f"/{first}/", "/DOMAIN/")
                for name in names),
              domains[first]["eval_command"].replace(f"/{first}/", "/DOMAIN/").replace(f"/{first}.", "/DOMAIN."),
              "```"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", choices=list(SETTINGS), help="train one setting on the 4 domains")
    parser.add_argument("--final", action="store_true", help="evaluate every finished setting and render")
    parser.add_argument("--render", action="store_true", help="redraw the section from WORK/lora.json")
    parser.add_argument("--work", type=Path, default=WORK)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.train:
        train(args.train, args.work)
    if args.final:
        write_atomically(args.work / "lora.json", json.dumps(final(args.work), indent=1) + "\n")
    if args.final or args.render:
        results = json.loads((args.work / "lora.json").read_text())
        write_section(REPO / "docs" / "results.md", SECTION, render(results))
        print(render(results))


if __name__ == "__main__":
    main()
