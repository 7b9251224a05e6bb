"""Every figure README.md quotes, computed from the stored outputs behind it (issue 59, item 7).

    python -m research.experiments.readme_figures      # prints each quoted passage, recomputed

`passages()` is the list of passages README.md must hold, word for word (whitespace aside), each with its figures
recomputed from research/results/ (per-pair outputs and the studies derived from them), the example data or the
product's constants. research/tests/test_doc_figures.py (through doc_figures.py) checks that README.md holds every passage and that every
number in README.md's prose and tables lies inside one of them, or is one of DEFINITIONS (a number that defines,
not measures): editing any figure of README.md fails that test.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
RESULTS = REPO / "research" / "results"
# numbers of README.md that define rather than measure, each with the words around it that make it one
DEFINITIONS = ("Spearman × 100", "when it excludes 0", "a keep-base decision as 0")


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def signed(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")  # README and the docs write a minus sign in their tables


def words(count: int) -> str:
    """A small count as the docs' prose writes it."""
    return {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}[count]


def suite_shape() -> str:
    """The domain suite as README.md and docs/recipes.md describe it: its domains, the dev pairs that select, the
    range of held-out test pairs (research/results/decision/manifest.json)."""
    manifest = load_json(RESULTS / "decision" / "manifest.json")
    tests = [entry["test"] for entry in manifest["domains"].values()]
    dev = manifest["parameters"]["dev_sizes"][2]  # dev.jsonl
    return (f"{words(len(manifest['domains']))} domains, {dev} dev pairs select, {min(tests):,}–{max(tests):,} "
            "held-out test pairs per domain")


def dev_ci_half_width(model: str) -> float:
    """The paired 95 % CI half-width of a 100-pair dev set at the median σ of ConSERT's runs on `model` in the
    decision study (docs/evaluation.md's power section)."""
    spread = [row["sigma"] for row in load_json(RESULTS / "decision" / "study.json")["spread"]
              if row["recipe"] == "consert" and row["model"] == model]
    return statistics.NormalDist().inv_cdf(0.975) * statistics.median(spread) / 10  # σ/√100


def enough_dev_pairs() -> int:
    """The smallest dev size at which the decision used 80 % of the students that gained (dev-size-power.json)."""
    table = load_json(RESULTS / "distill" / "dev-size-power.json")["table"]
    return min(row["size"] for row in table if row["power"] >= 0.8)


def demo() -> list[str]:
    from research.experiments import demo_stored

    dev = len((REPO / demo_stored.DEV).read_text(encoding="utf-8").splitlines()) - 1  # the header
    test = len((REPO / demo_stored.TEST).read_text(encoding="utf-8").splitlines()) - 1
    return [f"The demo chooses the checkpoint on {dev} labelled dev pairs and reports on {test} held-out test pairs",
            demo_stored.readme_row(REPO / demo_stored.RESULTS)]


def chosen_labels() -> list[str]:
    from research.experiments.chosen_labels import STUDY, quoted

    figures = quoted(load_json(RESULTS / "distill" / STUDY))
    return [f"these pairs estimate the Δ with {figures['after']} the error of as many random ones (CI coverage "
            f"{figures['coverage']}; chosen before training, `--teacher`: {figures['before']}) but buy no power: at "
            f"{figures['size']} labels `decide` used {figures['chosen']} and {figures['random']} of the students "
            f"whose Δ over the whole pool the labels come from is ≥ {figures['gain']}"]


def label_loop() -> list[str]:
    """The label-more loop from a first look at 100 chosen labels, at the product's default plan (the stored loop
    study: research/results/calibration/label-loop.json.gz)."""
    from sentadapt.config.schema import DEFAULT_RISK, DEFAULT_SPENDING, LABEL_CAP

    from research.experiments import label_loop as study

    stored = study.read(REPO / study.RESULTS / study.STUDY)
    rows = [row for row in study.outcomes(stored, DEFAULT_SPENDING, DEFAULT_RISK)
            if row["arm"] == "chosen" and row["first"] == 100]
    part = study.summary(rows)
    return [f"from a first look at 100 labels, up to {LABEL_CAP}, the loop used {100 * part['power']:.0f} % of the "
            f"students that gained ≥ {study.GAIN:+.1f} with {part['labels_at_gain']:.0f} labels on average, and "
            f"{100 * part['false_use']:.1f} % of those that lost ≥ {abs(study.LOSS):.1f}"]


def teacher_passes() -> list[str]:
    from sentadapt.config.schema import TrainConfig
    from sentadapt.recipes.presets import TEACHER_DEFAULTS

    return [f"then {TrainConfig().epochs:g}–{TEACHER_DEFAULTS['max_epochs']:g} passes of training"]


def dev_size_power() -> list[str]:
    from research.experiments.dev_agreement import GAIN

    rows = {row["size"]: row for row in load_json(RESULTS / "distill" / "dev-size-power.json")["table"]}
    at_200, at_100 = rows[200], rows[100]
    return [f"200 pairs used {100 * at_200['power']:.0f} % of the suite's students that gained ≥ {GAIN:+.1f} "
            f"({100 * at_200['false_use']:.0f} % of those that lost), 100 pairs {100 * at_100['power']:.0f} %"]


def confidence() -> list[str]:
    from sentadapt.evaluation.bootstrap import CONFIDENCE

    return [f"every number with a {100 * CONFIDENCE:.0f} % bootstrap CI"]


def sizes() -> list[str]:
    from research.experiments.sizes_suite import DOMAINS, WEIGHTED_SMALL_SIZES, full_size_costs, seed_delta

    cells = load_json(RESULTS / "sizes" / "study.json")["cells"]
    kept = True
    for domain in DOMAINS:
        full, half = (seed_delta(cells, "teacher-mw", label, domain) for label in ("384 fp32", "192 fp32"))
        kept = kept and (full is None or full < 0 or (half is not None and half >= 0))
    small = WEIGHTED_SMALL_SIZES[0].split()[0]
    return [f"the full size then costs at most {max(full_size_costs(cells).values()):.2f} against a run without it, "
            f"and {small} dims {'keep' if kept else 'lose'} the gain"]


def suite() -> list[str]:
    return [f"The domain suite: {suite_shape()}"]


def table_rows() -> list[str]:
    from research.experiments import domain_stored, lora_suite
    from research.experiments.distill_suite import headline

    rows = [*domain_stored.readme_rows(load_json(RESULTS / "decision" / domain_stored.STUDY)),
            *lora_suite.readme_rows(load_json(REPO / lora_suite.RESULTS / lora_suite.STUDY))]
    study = load_json(RESULTS / "distill" / "study-k3.json")
    sizes = sorted({cell["size"] for cell in study["cells"]})
    big, small = headline(study, "l6-mpnet"), headline(study, "l3-l6")
    share = round(100 * big["news_raw"] / big["news_lead"])
    rows.append(f"| `--teacher all-mpnet-base-v2` (the teacher-run defaults; {study['seeds']} split seeds, "
                f"{' / '.join(map(str, sizes))} dev pairs) | all-MiniLM-L6-v2 | {signed(big['raw'])} (news "
                f"{signed(big['news_raw'])}: {share} % of the teacher's {signed(big['news_lead'])}) | "
                f"{signed(big['applied_100'])} / {signed(big['applied_200'])} |")
    rows.append(f"| `--teacher all-MiniLM-L6-v2` (the same) | paraphrase-MiniLM-L3-v2 | {signed(small['raw'])} | "
                f"{signed(small['applied_100'])} / {signed(small['applied_200'])} |")
    social = load_json(RESULTS / "distill" / "study-k3e-social.json")
    cells = {size: [c for c in social["cells"] if c["pairing"] == "l6-mpnet" and c["size"] == size]
             for size in (100, 200)}
    raw = statistics.fmean(c["raw"] for c in cells[200])
    applied = {size: statistics.fmean(c["applied"] for c in chosen) for size, chosen in cells.items()}
    corpus = social["runs"]["l6-mpnet/social"]["examples"]
    rows.append(f"| `--teacher all-mpnet-base-v2` on short social posts (STS14 tweet-news, a corpus of {corpus}) | "
                f"all-MiniLM-L6-v2 | {signed(raw)} | {signed(applied[100])} / {signed(applied[200])} |")
    return rows


def dev_set_noise() -> list[str]:
    """The paired CI of a 100-pair dev set (at the median σ of ConSERT on all-MiniLM-L6-v2) and the dev size at which
    the decision used 80 % of the gaining students."""
    from research.experiments.decision_study import MODELS

    return [f"a 100-pair dev set cannot tell tenths from noise (its paired 95 % CI is about "
            f"±{dev_ci_half_width(MODELS[0]):.1f})",
            f"why ~{enough_dev_pairs()} labelled dev pairs or more are worth having"]


def passages() -> list[str]:
    return [*demo(), *label_loop(), *teacher_passes(), *dev_size_power(), *confidence(), *sizes(),
            *suite(),
            *table_rows(), *dev_set_noise()]


def flat(text: str) -> str:
    return " ".join(text.split())


# not figures: inline code, link targets, dates, issue numbers, a citation's year, a paper's section, figure or table
NOT_FIGURES = (r"`[^`]*`|\]\([^)]*\)|\b\d{4}-\d{2}-\d{2}\b|\bissues? \d+|(?:et al\.|[A-Z][a-z]+),? (?:19|20)\d\d\b"
               r"|§ ?\d+(?:\.\d+)*|\b(?:Fig\.|Figure|Table) \d+"
               r"|\b[A-Za-z]+-\d+\b|@\d+|\b0/1\b")  # and names: UTF-8, dev-200.jsonl, nDCG@10, 0/1 labels
ORDERED_LIST = r"(?m)^[ \t]*\d+\.[ \t]"  # "1. " at a line's start: a list's marker


def numbers_outside(text: str, passages: list[str]) -> list[str]:
    """The numbers of README.md's prose and tables (code blocks, inline code and link targets aside) that no passage
    and no definition covers, each with the words around it."""
    text = flat(re.sub(ORDERED_LIST, "", re.sub(r"```.*?```", " ", text, flags=re.S)))
    covered = [(m.start(), m.end()) for quote in [*passages, *DEFINITIONS]
               for m in re.finditer(re.escape(flat(quote)), text)]
    skipped = [(m.start(), m.end()) for m in re.finditer(NOT_FIGURES, text)]
    loose = []
    for m in re.finditer(r"(?<![\w.])[−+\-±~]?\d(?:[\d,]*\d)?(?:\.\d+)?", text):  # "1,113", not "128,"
        if not any(a <= m.start() and m.end() <= b for a, b in covered + skipped):
            loose.append(text[max(0, m.start() - 30):m.end() + 20])
    return loose


def main() -> None:
    for passage in passages():
        print(passage)


if __name__ == "__main__":
    main()
