"""What a study keeps of a run in the tracked `results/` folder (issue 41, item 6): the per-pair outputs its tables
are computed from, so `--render` needs no model, no training and no ../shared.

A run's dev_outputs.json (each evaluated step's cosine of every pool pair) is stored rounded to DECIMALS places — a
cosine's 7th decimal moves no Spearman figure at the 2 decimals the tables print, and it halves the files — beside
its metrics.json and job.json (the run's command, wall time and decision as adapt recorded them).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tools.doc_sections import write_atomically, write_section

DECIMALS = 6
KEPT = ("metrics.json", "job.json")  # copied as they are; dev_outputs.json is rounded


def rounded(value: Any) -> Any:
    """`value` with every float rounded to DECIMALS places (lists and dicts walked)."""
    if isinstance(value, float):
        return round(value, DECIMALS)
    if isinstance(value, list):
        return [rounded(item) for item in value]
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    return value


def store_run(source: Path, target: Path, finished: str = "metrics.json") -> bool:
    """Copy what the studies read of the run in `source` into `target`; False when the run has not finished (its
    `finished` file, written last, is missing: adapt's metrics.json, a peer's job.json)."""
    if not (source / finished).is_file():
        return False
    target.mkdir(parents=True, exist_ok=True)
    outputs = json.loads((source / "dev_outputs.json").read_text(encoding="utf-8"))
    (target / "dev_outputs.json").write_text(json.dumps(rounded(outputs)), encoding="utf-8")
    for name in KEPT:
        if (source / name).is_file():
            shutil.copy(source / name, target / name)
    return True


def job_record(runner_record: Path, target: Path) -> None:
    """The runner's record of a job (research/experiments/results_suite.py Runner: its command, wall time and peak RSS) as the
    run's job.json, without the machine-local log path."""
    record = json.loads(runner_record.read_text(encoding="utf-8"))
    kept = {"argv": record["argv"], "seconds": record["seconds"], "peak_rss_mb": record["peak_rss_mb"]}
    write_atomically(target, json.dumps(kept) + "\n")  # a stored peer's finished marker: never half written


def check_pools(work: Path, pools: Path, domains: Iterable[str]) -> None:
    """Refuse runs made on another split: each domain's pool in `work` must be byte-identical to the tracked one in
    `pools` (research/experiments/domain_data.py --seed 0), or the stored cosines would not line up with its pairs."""
    for domain in domains:
        made_on, tracked = work / "data" / domain / "pool.jsonl", pools / domain / "pool.jsonl"
        if made_on.is_file() and made_on.read_bytes() != tracked.read_bytes():
            raise SystemExit(f"{made_on}: not the pool in {tracked}; the runs must use that split "
                             "(research/experiments/domain_data.py --seed 0)")


def computed_or_stored(path: Path, compute: Callable[[], dict[str, Any]] | None) -> dict[str, Any]:
    """A study stored as JSON in `path`: computed and written first (atomically) when `compute` is given, then read
    back, so what is printed is always what the file holds."""
    if compute is not None:
        write_atomically(path, json.dumps(compute(), indent=1) + "\n")
    return json.loads(path.read_text(encoding="utf-8"))


def stored_study_main(description: str | None, results: Path, study_file: str,
                      study: Callable[[argparse.Namespace], dict[str, Any]],
                      lines: Callable[[dict[str, Any]], list[str]], seeds: bool = False) -> None:
    """The command line of a study over stored cosines: `--study` computes RESULTS/STUDY_FILE from the stored runs
    (computed_or_stored), then the table is printed from the file; `--results`, `--resamples` and, with `seeds`,
    `--seeds` (5 split seeds) are passed to `study` in its namespace."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="store_true", help="compute the study from the stored runs")
    parser.add_argument("--results", type=Path, default=results)
    if seeds:
        parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    compute = (lambda: study(args)) if args.study else None
    print("\n".join(lines(computed_or_stored(args.results / study_file, compute))))


def add_study_options(parser: argparse.ArgumentParser, work: Path, results: Path, study: str) -> None:
    """The options every stored study's CLI shares: --store, --study, --render and their folders."""
    parser.add_argument("--store", action="store_true", help="copy the runs' per-pair outputs into RESULTS")
    parser.add_argument("--study", action="store_true", help=f"derive RESULTS/{study} from them, then render")
    parser.add_argument("--render", action="store_true", help=f"redraw the section from RESULTS/{study}")
    parser.add_argument("--work", type=Path, default=work)
    parser.add_argument("--results", type=Path, default=results)
    parser.add_argument("--doc", type=Path, default=Path("research/results.md"))


def run_study_stages(args: argparse.Namespace, section: str, study_file: str, store: Callable[[Path, Path], None],
                     study: Callable[[Path], dict[str, Any]],
                     render: Callable[[dict[str, Any]], str]) -> str | None:
    """--store, --study and --render in that order (each when asked); the rendered section when one was written."""
    if args.store:
        store(args.work, args.results)
    if args.study:
        args.results.mkdir(parents=True, exist_ok=True)
        write_atomically(args.results / study_file, json.dumps(study(args.results), indent=1) + "\n")
    if not (args.study or args.render):
        return None
    text = render(json.loads((args.results / study_file).read_text(encoding="utf-8")))
    write_section(args.doc, section, text)
    return text
