"""The `compile` setting on a lent GPU (issue 44): its section of bench/README.md, drawn from the stored outputs.

    python -m bench.gpu_compile_study            # prints the section
    python -m bench.gpu_compile_study --write    # rewrites it in bench/README.md

Reads bench/results/gpu-2026-11-27/ (tracked): the rows' gpu.json files that `bench/gpu_session.sh` wrote in two
device calls on one warm H200 (the same card: nvidia-smi printed one UUID in both), each row's train.log, the
teacher-encoding benchmark's JSON and the GPU-marked tests' summary. Nothing is measured here.

Two rates per row, both over the run's own train.log (sentadapt logs examples/s over each 10-step interval):
  window   steps 21-300, what bench_gpu reports (its timed window), the compile and warm-up of each padded length
           included;
  steady   steps 151-300, once every padded length (max length 64 / pad_multiple 8 = 8 lengths) has been met,
           compiled and, under `graphs`, recorded: the rate of the rest of a longer run.
and the row's whole process (bench_gpu's process_seconds: start, load, tokenize, compile, 300 steps, save).
A rate over several intervals is their examples over their seconds (each interval's seconds = its examples / its
rate), never a mean of rates.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from tools.doc_sections import replace_section, write_atomically

FOLDER = Path(__file__).resolve().parent / "results" / "gpu-2026-11-27"
README = Path(__file__).resolve().parent / "README.md"
SECTION = "gpu compile"
STEADY_FROM = 150  # intervals ending after this step count as steady (8 lengths met well before: see train.log)
WINDOW_FROM = 20  # bench_gpu's --warmup-steps


@dataclass(frozen=True)
class Row:
    label: str  # what ran
    compile: str  # the `compile` setting
    source: str  # gpu.json file (in FOLDER)
    name: str  # its row name there
    log: str  # train.log file (in FOLDER/train-logs)


ROWS = [
    Row("ConSERT TF32, batch 96", "off", "call1-rows.json", "consert-tf32-96", "consert-tf32-96"),
    Row("ConSERT bf16, batch 96", "off", "call1-rows.json", "consert-bf16-96", "consert-bf16-96"),
    Row("ConSERT bf16, batch 96", "on", "call1-rows.json", "consert_compiled-bf16-96", "consert_compiled-bf16-96"),
    Row("ConSERT bf16, batch 96", "graphs", "call1-graphs.json", "consert-bf16-96", "consert-bf16-96-graphs"),
    Row("ConSERT TF32, batch 96", "graphs", "call2-graphs.json", "consert-tf32-96", "consert-tf32-96-graphs"),
    Row("ConSERT bf16, batch 512", "on", "call1-rows.json", "consert_compiled-bf16-512", "consert_compiled-bf16-512"),
    Row("SG-OPT fp16, batch 16", "graphs", "call2-graphs.json", "sgopt-fp16-16", "sgopt-fp16-16-graphs"),
]


def intervals(log: Path, batch: int) -> list[tuple[int, int, float]]:
    """(first step, last step, seconds) of each logged interval: the lines' steps and examples/s."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if '"loss"' in line]
    out, previous = [], 0
    for line in lines:
        steps = line["step"] - previous
        out.append((previous + 1, line["step"], steps * batch / line["examples_per_s"]))
        previous = line["step"]
    return out


def rate(spans: list[tuple[int, int, float]], after: int, batch: int) -> float:
    chosen = [(first, last, seconds) for first, last, seconds in spans if first > after]
    return sum((last - first + 1) * batch for first, last, _ in chosen) / sum(seconds for *_, seconds in chosen)


def seconds_to(spans: list[tuple[int, int, float]], step: int) -> float:
    return sum(seconds for _, last, seconds in spans if last <= step)


def measured(folder: Path = FOLDER) -> list[dict[str, object]]:
    """Each row's figures, from the stored files alone."""
    out = []
    for row in ROWS:
        stored = next(r for r in json.loads((folder / row.source).read_text())["rows"] if r["row"] == row.name)
        spans = intervals(folder / "train-logs" / f"{row.log}.train.log", stored["batch"])
        out.append({"row": row, "batch": stored["batch"], "window": rate(spans, WINDOW_FROM, stored["batch"]),
                    "bench_window": stored["examples_per_s"], "steady": rate(spans, STEADY_FROM, stored["batch"]),
                    "to_steady_s": seconds_to(spans, STEADY_FROM), "utilisation": stored["median_gpu_utilisation"],
                    "memory_mib": stored["peak_gpu_mb"], "process_s": stored["process_seconds"]})
    return out


def render(folder: Path = FOLDER) -> str:
    rows = measured(folder)
    tf32 = next(r for r in rows if r["row"].label.startswith("ConSERT TF32") and r["row"].compile == "off")
    lines = [
        f"Drawn by `python -m bench.gpu_compile_study --write` from `{folder.relative_to(README.parent.parent)}/` "
        "(the rows' gpu.json, train.logs, the teacher benchmark's JSON). One NVIDIA H200, two device calls on the "
        "same warm machine; torch 2.11.0+cu130, transformers 5.17.0; random BERT-base, the 29,511 STS sentences, "
        "max length 64, 300 steps a row.",
        "",
        "| row | `compile` | examples/s, steps 21-300 | examples/s, steps 151-300 | steady / TF32 eager | "
        "seconds to step 150 | the row's process, s | median GPU util. | peak GPU memory |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        same_batch = r["batch"] == tf32["batch"]
        ratio = f"{r['steady'] / tf32['steady']:.2f}×" if same_batch and r["row"].label.startswith("ConSERT") else "–"
        lines.append(f"| {r['row'].label} | {r['row'].compile} | {r['window']:,.0f} | {r['steady']:,.0f} | {ratio} | "
                     f"{r['to_steady_s']:.0f} | {r['process_s']:.0f} | {r['utilisation']:.0f} % | "
                     f"{r['memory_mib'] / 1024:.1f} GiB |")
    teacher = json.loads((folder / "call2-teacher-encode.json").read_text())
    table = teacher["rows"]
    lines += [
        "",
        f"The teacher's table on the same card ({teacher['sentences']:,} distinct sentences, a random MPNet of "
        f"all-mpnet-base-v2's shape, batch {teacher['batch_size']}, max length {teacher['max_length']}, "
        f"{teacher['dtype']}, best of 2; the two sides' vectors differ by at most "
        f"{teacher['max_abs_difference']:.1e}):",
        "",
        "| path | sentences/s | vs sentence-transformers |",
        "|---|---:|---:|",
    ]
    names = {"st encode": "sentence-transformers `encode`", "sentadapt encode": "sentadapt `Encoder.encode`",
             "sentadapt table": "sentadapt's table (`cached_table`: texts hashed, encoded, written to disk)"}
    for key, label in names.items():
        lines.append(f"| {label} | {table[key]['sentences_per_s']:,.0f} | {table[key]['vs_st']:.2f}× |")
    tests = (folder / "call1-tests.txt").read_text().strip().splitlines()[-1]
    lines += ["", f"GPU-marked tests and the CUDA fault test on the card: `{tests}` (the skipped two need ../shared)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"rewrite the section in {README.name}")
    args = parser.parse_args()
    section = render()
    if args.write:
        write_atomically(README, replace_section(README.read_text(encoding="utf-8"), SECTION, section))
        print(f"wrote the '{SECTION}' section of {README}")
    else:
        print(section)


if __name__ == "__main__":
    main()
