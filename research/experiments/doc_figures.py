"""Every figure the user docs quote, recomputed (issue 59, item 7): README.md and the docs/ pages in DOCUMENTS.

    python -m research.experiments.doc_figures             # each covered page's passages, recomputed
    python -m research.experiments.doc_figures --report    # per user page: its numbers, and how many no passage covers

A page's passages are the phrases it must hold word for word (whitespace aside), each with its figures recomputed from
research/results/ (per-pair outputs and the studies derived from them), the example data or the product's constants.
research/tests/test_doc_figures.py checks, for every page in DOCUMENTS, that the page holds each passage and that every
number of its prose and tables lies inside a passage or a definition (a number that defines rather than measures,
with the words that make it one): editing any figure of a covered page fails that test. Code blocks, inline code
and link targets are not figures.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from statistics import NormalDist
from typing import Any

from sentadapt.stopping.process import STOP_SIGNALS

from research.experiments import readme_figures
from research.experiments.readme_figures import (
    NOT_FIGURES,
    ORDERED_LIST,
    REPO,
    RESULTS,
    dev_ci_half_width,
    enough_dev_pairs,
    flat,
    numbers_outside,
    signed,
    suite_shape,
    teacher_passes,
    words,
)
from research.experiments.readme_figures import load_json as _json

# the pages a user reads (docs/options.md is generated from the code, and tests/test_options_doc.py fails on any
# edit of it; architecture, internals and development are the maintainers' pages)
USER_PAGES = ("README.md", "docs/usage.md", "docs/recipes.md", "docs/teacher.md", "docs/decision.md",
              "docs/evaluation.md", "docs/diagnostics.md", "docs/sizes.md", "docs/reliability.md", "docs/cluster.md")


@dataclass(frozen=True)
class Page:
    path: str
    passages: Callable[[], list[str]]  # recomputed from stored outputs and constants
    definitions: tuple[str, ...] = ()
    # passages that hold because the tests the page names assert them (read from the page's text itself)
    tested: Callable[[str], list[str]] | None = None


def sizes_passages() -> list[str]:
    """docs/sizes.md: storage arithmetic, the product's constants, and the sizes study's means
    (research/results/sizes/study.json, which research/tests/test_sizes_suite.py re-derives from the stored cosines)."""
    from sentadapt.config.schema import RunConfig
    from sentadapt.decision.sequential import look_of
    from sentadapt.evaluation.bootstrap import CONFIDENCE
    from sentadapt.evaluation.evaluate import CALIBRATION_LIMIT
    from sentadapt.evaluation.forms import PRECISIONS
    from sentadapt.recipes.matryoshka import Matryoshka

    from research.experiments.sizes_suite import (
        DOMAINS,
        SIZES,
        WEIGHTED_SMALL_SIZES,
        forms,
        full_size_costs,
        seed_delta,
    )

    study = _json(RESULTS / "sizes" / "study.json")
    cells = study["cells"]
    largest, smallest = SIZES[0], SIZES[-1]
    stored = 100_000_000  # 100 M vectors: GB = 1e8 × bytes a vector / 1e9

    def gigabytes(bytes_a_vector: float) -> str:
        return f"{stored * bytes_a_vector / 1e9:.3g}"  # 153.6 → 154, 9.6, 1.2

    weights = Matryoshka.of(SIZES, ()).weights

    def news_cost(runs: tuple[tuple[str, str], ...]) -> str:
        costs = [seed_delta(cells, alone, "384 fp32", "news") - seed_delta(cells, full, "384 fp32", "news")  # type: ignore[operator]
                 for full, alone in runs]
        return f"{min(costs):.2f}–{max(costs):.2f}"

    equal = news_cost((("teacher-m", "teacher"), ("teacher-m-s1", "teacher-s1")))
    weighted = news_cost((("teacher-mw", "teacher"), ("teacher-mw-s1", "teacher-s1")))
    labels = [form.label(largest) for form in forms() if form.label(largest) not in ("192 binary", "96 binary")]
    by_label = {form.label(largest): form for form in forms()}
    rows = [f"| with the teacher | {' | '.join(labels)} |",
            "| bytes a vector | " + " | ".join(f"{by_label[label].bytes_per_vector(largest):g}" for label in labels)
            + " |"]
    for variant, name in (("teacher", "without `--matryoshka`"),
                          ("teacher-mw", f"`--matryoshka {','.join(map(str, SIZES))}` (weights "
                                         f"{','.join(f'{w:g}' for w in weights)}, the default)"),
                          ("teacher-m", f"`--matryoshka {','.join(map(str, SIZES))}`, `matryoshka_weights=1,1,1`")):
        chosen = [c for c in cells if c["variant"] == variant]
        rows.append(f"| {name} | " + " | ".join(
            signed(sum(c["test_delta"][label] for c in chosen) / len(chosen)) for label in labels) + " |")

    costs = full_size_costs(cells)
    worst_domain, _ = max(costs, key=lambda key: costs[key])

    def plain_cost(variant: str, domain: str | None) -> float:
        domains = DOMAINS if domain is None else [domain]
        return sum(seed_delta(cells, "plain", "384 fp32", d) - seed_delta(cells, variant, "384 fp32", d)  # type: ignore[operator]
                   for d in domains) / len(domains)

    forms_tested = len(SIZES) * len(PRECISIONS)
    words = {2: "two"}
    return [
        f"{stored // 1_000_000} M vectors of {largest} float32 values are {gigabytes(4 * largest)} GB, of {smallest} "
        f"int8 values {gigabytes(smallest)} GB, of {smallest} bits {gigabytes(smallest / 8)} GB",
        f"The weights default to {weights[0]:g} for the largest size and {weights[1]:g} for each other",
        f"with equal weights the full size lost {equal} on news against a run without Matryoshka ({words[2]} training "
        f"seeds); with the largest weighted twice it lost {weighted} there ({words[2]} seeds)",
        f"every row with its {100 * CONFIDENCE:.0f} % CI",
        f"first {CALIBRATION_LIMIT:,} distinct lines",
        f"at most the limit of the run's first look (`--risk`, {_default(RunConfig, 'risk'):.2f} by default,",
        f"label-more loop: {look_of([100], _default(RunConfig, 'risk')).limit:.2f} at 100 dev pairs)",
        f"though {forms_tested} forms are tested",
        f"with the all-mpnet-base-v2 teacher and without, at {'/'.join(map(str, SIZES))} × fp32/int8/binary, on "
        f"re-drawn test splits ({study['seeds']} seeds)",
        *rows,
        f"at full size it costs at most {max(costs.values()):.2f} in any suite domain ({worst_domain}, over "
        f"{words[2]} training seeds) with the default weights, and its {WEIGHTED_SMALL_SIZES[0].split()[0]}-dim prefix "
        f"scores at least the base's {largest} dims",
        f"teacher it cost {plain_cost('plain-m', None):.2f} at full size on average ({plain_cost('plain-m', 'news'):.2f} "
        f"on news; {plain_cost('plain-mw', None):.2f} and {plain_cost('plain-mw', 'news'):.2f} with the default "
        f"weights {','.join(f'{w:g}' for w in weights)})",
        f"Δ against the base's {largest} fp32",
        *_asserted_tolerance("tests/evaluation/test_forms.py", "atol=1e-6",
                             "equal those computed from sentence-transformers' codes to 1e-6"),
    ]


def _default(config: type, name: str) -> Any:
    """A dataclass field's default, without building the class (RunConfig has required fields)."""
    import dataclasses

    return next(field.default for field in dataclasses.fields(config) if field.name == name)


def _asserted_tolerance(test_file: str, assertion: str, passage: str) -> list[str]:
    """A tolerance the page says a test holds: the passage only while that test still asserts it."""
    return [passage] if assertion in (REPO / test_file).read_text(encoding="utf-8") else []


SIZES_DEFINITIONS = (
    "in 255 steps, floor((v − min) / step) − 128",  # int8 as sentence-transformers' quantize_embeddings defines it
    "the bits v > 0, 8 a byte; scored as 1 − 2·Hamming/d, the cosine of the ±1 vectors",
    "Sizes must be multiples of 8", "(sizes divisible by 8)",
    "a Dense layer of weight [I_N | 0]", "Its products are x · 1", "the trailing coordinates are set to 0",
    "when its dev Δ ≥ 0",
)

def teacher_passages() -> list[str]:
    """docs/teacher.md: TEACHER_DEFAULTS and the distillation settings' defaults, the table's and the neighbour
    search's sizes, and the distillation studies stored in research/results/distill/ (study-k3.json and the others,
    which research/tests/test_sizes_suite.py re-derives from the per-pair outputs)."""
    import statistics
    from types import SimpleNamespace

    from sentadapt.config.schema import DistillationSettings, TeacherSettings, TrainConfig
    from sentadapt.data.batching import EXACT_NEIGHBOURS, WINDOW
    from sentadapt.evaluation.bootstrap import CONFIDENCE
    from sentadapt.model.embedding_cache import ENCODE_CHUNK
    from sentadapt.recipes.presets import TEACHER_DEFAULTS
    from sentadapt.teacher.table import BLEND_TIE, BLENDS
    from sentadapt.train.distill import PROJECTION_SAMPLE
    from sentadapt.train.steps import passes_for

    from research.experiments import teacher_check
    from research.experiments.distill_suite import domain_raw, headline
    from research.experiments.domain_data import DOMAINS
    from research.experiments.teacher_evidence import BLEND_GAIN, BLEND_WORST

    distill = RESULTS / "distill"
    study = _json(distill / "study-k3.json")
    big, small = headline(study, "l6-mpnet"), headline(study, "l3-l6")
    share = round(100 * big["news_raw"] / big["news_lead"])

    def lead(pairing: str, domain: str) -> float:
        return statistics.fmean(c["teacher_lead"] for c in study["cells"]
                                if c["pairing"] == pairing and c["domain"] == domain and c["size"] == 200)

    def raw(pairing: str, domain: str) -> str:
        return signed(domain_raw(study["cells"], pairing, domain))

    applied = {pairing: [c["applied"] for c in study["cells"] if c["pairing"] == pairing] for pairing in ("l6-mpnet",
                                                                                                       "l3-l6")}
    worst_small = min(applied["l3-l6"])
    worst_small_domain = next(c["domain"] for c in study["cells"] if c["pairing"] == "l3-l6"
                              and c["applied"] == worst_small)
    check = _json(distill / "teacher-check.json")
    stopped = [c for c in check["cells"] if c["stopped"]]
    sizes = teacher_check.SIZES
    timing = study["runs"]["l6-mpnet/news"]["teacher"]["dev_encode_seconds"]

    temperature = _default(DistillationSettings, "distill_temperature")
    neighbours = _default(DistillationSettings, "distill_neighbours")
    settings = SimpleNamespace(train=SimpleNamespace(epochs=TrainConfig().epochs, **{
        key: TEACHER_DEFAULTS[key] for key in ("min_examples", "max_epochs")}))

    def passes(sentences: int) -> str:
        value = passes_for(sentences, settings)  # type: ignore[arg-type]
        return "one" if value == 1 else f"{value:.2g}"

    table_gb = 1_000_000 * 768 * 4 / 1e9  # 1M × 768 float32
    check_l3 = _json(distill / "check-l3-mpnet.json")

    def check_mean(key: str, domain: str) -> float:
        return statistics.fmean(c[key] for c in check_l3["cells"] if c["domain"] == domain and c["size"] == 200)

    objectives = _json(distill / "study-k3xn.json")  # kl:0.38,sim-mse:38,cosine:1.9 against kl alone (k3)
    summed = headline(objectives, "l6-mpnet")

    social = _json(distill / "study-k3e-social.json")
    tweets = [c for c in social["cells"] if c["pairing"] == "l6-mpnet" and c["size"] == 200]
    tweet_raw, tweet_lead = (statistics.fmean(c[k] for c in tweets) for k in ("raw", "teacher_lead"))
    speed = _speed_passages()
    return [
        f"with the paired {100 * CONFIDENCE:.0f} % CI of its lead",
        f"(glosses: all-mpnet-base-v2 {signed(lead('l6-mpnet', 'glosses'))} against all-MiniLM-L6-v2, its student "
        f"{raw('l6-mpnet', 'glosses')})",
        f"in {len(check['cells'])} drawn dev sets of {sizes[0]}-{sizes[-1]} pairs the check stopped "
        f"{'one run' if len(stopped) == 1 else f'{len(stopped)} runs'}, whose teacher in fact "
        f"{'led' if stopped[0]['teacher_lead'] > 0 else 'trailed'} on test and whose student gained "
        f"{signed(stopped[0]['raw'])}",
        f"written to the cache {ENCODE_CHUNK:,} rows at a time",
        f"a 1M × 768 table ({table_gb:.0f} GB) stays on disk",
        f"each encodes every N-th block of {ENCODE_CHUNK:,} sentences into a part file",
        f"(`teacher_weight` W, default {_default(TeacherSettings, 'weight'):g})",
        f"(`recipe_weight`, {_default(DistillationSettings, 'recipe_weight'):g} by default)",
        f"| `min_examples`, `max_epochs` | {TEACHER_DEFAULTS['min_examples']:,}, {TEACHER_DEFAULTS['max_epochs']:g} | "
        f"the length follows the corpus: passes = min({TEACHER_DEFAULTS['max_epochs']:g}, max(1, "
        f"{TEACHER_DEFAULTS['min_examples']:,} / sentences)) — 2,700 sentences get {passes(2700)} passes, 8,300 get "
        f"{passes(8300)}, 100,000 {passes(100_000)} |",
        f"| `evals_per_pass` | {TEACHER_DEFAULTS['evals_per_pass']:g} |",
        f"| `patience` | {TEACHER_DEFAULTS['patience']} | {words(TEACHER_DEFAULTS['patience'])} passes without",
        f"| `batch_size` | {TEACHER_DEFAULTS['batch_size']} | {2 * TEACHER_DEFAULTS['batch_size']} was measured",
        f"| `distill` | {TEACHER_DEFAULTS['distill']:g} |",
        f"one of its {neighbours} nearest sentences under the teacher",
        f"(`distill_kind=kl`, T {temperature:g},",
        f"(temperature `distill_temperature`, {temperature:g})",
        *speed,
        f"(on up to {PROJECTION_SAMPLE:,} sentences)",
        f"each followed by one of its `distill_neighbours` ({neighbours}) nearest sentences",
        f"(exact search up to {EXACT_NEIGHBOURS:,} sentences; above, SimHash windows of {WINDOW:,})",
        "α ∈ {" + ", ".join(f"{alpha:g}" for alpha in BLENDS) + "}",
        f"an α within {BLEND_TIE:g} of that score",
        f"({study['seeds']} split seeds, 100 and 200 dev pairs)",
        f"the mean raw test Δ is at least the teacher-alone variant's + {BLEND_GAIN:g}",
        f"below the teacher-alone variant's by more than {BLEND_WORST:g}",
        f"four domains, {study['seeds']} split seeds, the default decision",
        f"| all-MiniLM-L6-v2 ← all-mpnet-base-v2 | {big['lead']:+.2f} | {big['raw']:+.2f} | "
        f"{big['applied_100']:+.2f} / {big['applied_200']:+.2f} | news: lead {big['news_lead']:+.2f}, "
        f"Δ {big['news_raw']:+.2f} ({share} %), used in {big['news_used']} of {big['news_cells']} draws |",
        f"| paraphrase-MiniLM-L3-v2 ← all-MiniLM-L6-v2 | {small['lead']:+.2f} | {small['raw']:+.2f} | "
        f"{small['applied_100']:+.2f} / {small['applied_200']:+.2f} | news: lead {small['news_lead']:+.2f}, "
        f"Δ {small['news_raw']:+.2f} |",
        f"where all-mpnet-base-v2 led by {big['news_lead']:+.0f} (news) the student kept {share} % of it",
        f"(captions {raw('l6-mpnet', 'captions')} raw)",
        f"({'no' if min(applied['l6-mpnet']) >= 0 else 'a'} draw of this pairing lost anything with it applied; "
        + (f"one L3 ← L6 draw on {worst_small_domain} lost {-worst_small:.2f})" if worst_small < -0.005
           else "nor did any L3 ← L6 draw)"),
        *teacher_passes(),
        f"paraphrase-MiniLM-L3-v2 ← all-mpnet-base-v2 gained {signed(check_mean('raw', 'news'))} raw on news, where "
        f"that teacher leads the 3-layer base by {signed(check_mean('teacher_lead', 'news'))} on test (from "
        f"all-MiniLM-L6-v2: {raw('l3-l6', 'news')}); {signed(check_mean('raw', 'captions'))} on captions and "
        f"{signed(check_mean('raw', 'forums'))} on forums, where it leads by only "
        f"{signed(check_mean('teacher_lead', 'captions'))} and {signed(check_mean('teacher_lead', 'forums'))} (from "
        f"all-MiniLM-L6-v2: {raw('l3-l6', 'captions')}, {raw('l3-l6', 'forums')}); "
        f"{signed(check_mean('raw', 'glosses'))} on glosses ({raw('l3-l6', 'glosses')})",
        f"a corpus of only {social['runs']['l6-mpnet/social']['examples']} sentences",
        f"leads all-MiniLM-L6-v2 by {signed(tweet_lead)} on the test pairs and the student gains {signed(tweet_raw)} "
        f"({round(100 * tweet_raw / tweet_lead)} %)",
        f"confirmed the gain in {sum(c['applied'] != 0 for c in tweets)} of {len(tweets)} draws at 200 dev pairs "
        f"({signed(statistics.fmean(c['applied'] for c in tweets))} applied)",
        f"{words(len(DOMAINS))} earlier domains",
        f"trailed on test by {big['raw'] - summed['raw']:.2f} raw (news by {big['news_raw'] - summed['news_raw']:.2f})",
        f"batches of {2 * TEACHER_DEFAULTS['batch_size']}, a held-out share",
        f"{1024 / timing['teacher']:.0f} sentences/s in the stored runs",
        f"(all-MiniLM-L6-v2 encodes {timing['student_speedup']:.1f}× as fast as all-mpnet-base-v2 on the news dev "
        "sentences in the same runs)",
        *_asserted_tolerance("tests/teacher/test_teacher.py", "rel=1e-5", "(tested to rel 1e-5)"),
        *_dev_power_passage(),
        *_pass_cost_passages(),
    ]


# bench_teacher_run's paired rounds (issue 70): AVX2 kernels alone in fp32 against a62588b; bf16 against 1b114f6
SPEED_ROUNDS = {"avx2": "bench/results/teacher-run-avx2-2026-11-29/rounds.json",
                "bf16": "bench/results/teacher-run-bf16-2026-11-29/rounds.json",
                # issue 84: an AMD EPYC with AVX2 alone, native kernels (`auto` → fp32, the pass packed, its
                # attention chunks planned at the cost timed there), against a62588b
                "epyc-avx2": "bench/results/teacher-run-epyc-packed-2026-12-08/rounds.json",
                # the same EPYC, every backbone forward slowed by a sleep (--pass-penalty): a CPU whose passes cost
                # more; the packed default and the length chunks at the timed cost (today), and, the day before, the
                # chunks at the fixed 100 tokens (fixed-cost)
                "epyc-penalty": "bench/results/teacher-run-epyc-packed-penalty-2026-12-08/rounds.json",
                "epyc-penalty-fixed": "bench/results/teacher-run-epyc-pass-penalty-2026-12-07/rounds.json"}
PADDING = "bench/results/length-chunks-2026-11-29/padding.txt"  # bench_length_chunks --padding


def _speed_passages() -> list[str]:
    """docs/teacher.md's "Speed" and its defaults row: the paired timing (bench/results) and the suite's per-domain
    changes of each lever (the stored studies, as teacher_speed judges them)."""
    from research.experiments.teacher_speed import verdict

    def ratio(kernels: str, command: str = "default") -> float:  # the median over rounds of its wall ÷ the old's
        rounds = _json(REPO / SPEED_ROUNDS[kernels])
        return statistics.median(run["seconds"] / old["seconds"] for run, old in zip(rounds[command], rounds["old"],
                                                                                      strict=True))

    shares = [int(line.split()[3].rstrip("%")) for line in (REPO / PADDING).read_text().splitlines()[2:]]

    views = verdict(RESULTS / "distill")["cells"]
    falls = sorted(c["k3"] - c["k3f"] for c in views if c["pairing"] == "l6-mpnet")
    bf16 = verdict(RESULTS / "distill", candidate="k3bf")["cells"]
    largest = max(abs(c["k3bf"] - c["k3"]) for c in bf16)
    chunks = verdict(RESULTS / "distill", incumbent="k3bf", candidate="k3c")["cells"]
    chunks_largest = max(abs(c["k3c"] - c["k3bf"]) for c in chunks)
    return [f"kept its raw Δ within {largest:.2f}",
            f"pairing × domain kept its raw Δ within {chunks_largest:.2f} of the default before",
            f"the teacher run's batches were {min(shares)}-{max(shares)} % padding on the suite's corpora",
            f"The 30-step run of bench/README.md (all-MiniLM-L6-v2, 3,000 short sentences, 384-wide vectors from a file, "
            f"the whole process) took {ratio('avx2'):.2f}× of the time it took at commit a62588b in fp32 with AVX2 "
            "kernels alone",
            f"and {ratio('bf16'):.2f}× of the time the default took before these changes",
            f"AVX2 alone (fp32, what `auto` picks there) it took {ratio('epyc-avx2'):.2f}× of a62588b's time",
            f"each backbone pass {_json(REPO / SPEED_ROUNDS['epyc-penalty'])['machine']['pass_penalty_s']} s slower, "
            f"packed it took {ratio('epyc-penalty'):.2f}× of a62588b's time, in length chunks at the timed cost "
            f"{ratio('epyc-penalty', 'today'):.2f}× and at the fixed 100 tokens "
            f"{ratio('epyc-penalty-fixed', 'fixed-cost'):.2f}×",
            f"distillation term's student) but cost all-MiniLM-L6-v2 ← all-mpnet-base-v2 "
            f"{falls[0]:.2f} to {falls[-1]:.2f} of raw Δ per domain"]


def _pass_cost_passages() -> list[str]:
    """docs/teacher.md's "What this CPU decides": the rule's shapes and thresholds, as train/pass_costs.py has them."""
    from sentadapt.options import PASS_OVERHEAD_TOKENS
    from sentadapt.train.pass_costs import BF16_AT_MOST, MAX_PASS_COST, SHAPES

    shapes = [f"{rows} × {length}" for rows, length in SHAPES]
    return [f"on {COUNT_WORDS[len(SHAPES)]} shapes — {', '.join(shapes[:-1])} and {shapes[-1]} rows × tokens",
            f"take at most {BF16_AT_MOST}× the fp32 ones", f"times ≤ {BF16_AT_MOST}× fp32's there",
            f"clamped to 0-{MAX_PASS_COST:,} tokens", f"and a pass costs {PASS_OVERHEAD_TOKENS} tokens, as before this rule"]


def _dev_power_passage() -> list[str]:
    from research.experiments.dev_agreement import GAIN

    rows = {row["size"]: row for row in _json(RESULTS / "distill" / "dev-size-power.json")["table"]}
    return [f"{rows[200]['size']} labelled pairs let the decision use {100 * rows[200]['power']:.0f} % of the students "
            f"that gained ≥ {GAIN:+.1f} ({100 * rows[200]['false_use']:.0f} % of those that lost); 100 pairs, "
            f"{100 * rows[100]['power']:.0f} %"]


TEACHER_DEFINITIONS = (
    "each batch's loss is W · D(student, teacher)", "`recipe_weight=0`", "N processes, 1/N of the teacher's work each",
    "α · the teacher's in-batch cosines + (1 − α) · the base's", "α < 1", "1 − cos", "α 1.",
    "(a bare kind weighs 1; a weight 0 turns a kind off)", "(kl, sim-mse) above 0", "the whole CI below 0",
    "half of each batch", "200 dev pairs", "encodes 2 × batch rows per step instead of 3 × batch",
    "200 tweet pairs", "on 2 CPU cores", "two passes without a new best",
    "rank 0 joins the parts", "dev-200.jsonl", "a domain whose α is 1 reuses", "| Δ with the decision, 100 / 200 dev pairs |",
)

def cluster_passages() -> list[str]:
    """docs/cluster.md: exit codes from the signals and the error classes, and what tests/run/test_faults.py does."""
    import signal

    from sentadapt.errors import ConfigError, DataError, NoImprovement

    def code(signum: int) -> int:
        return 128 + signum  # the shell's "ended by that signal"

    faults = (REPO / "tests/run/test_faults.py").read_text(encoding="utf-8")
    step = re.search(r'start\("pause-after-log", (\d+), run, tiny_model_dir, fault_corpus, "--resume", "auto"\)', faults)
    return [
        f"writes a checkpoint, stops | {code(signal.SIGINT)} |",
        f"(pod deletion) | same | {code(signal.SIGTERM)} |", f"`--signal=USR1@SECONDS` | same | {code(signal.SIGUSR1)} |",
        f"({DataError.exit_code}: data or file error, {ConfigError.exit_code}: bad option, {NoImprovement.exit_code}: "
        "`--require-improvement`)",
        f"while the workers exit {code(signal.SIGTERM)}",
        f"let a stopped run's exit code ({code(signal.SIGTERM)}) not count as a failure",
        *([f"at step {step[1]}: checkpoint of step {step[1]}, exit {code(signal.SIGTERM)} / {code(signal.SIGUSR1)}"]
          if step else []),
        f"`stopped by SIGTERM at step N (exit code {code(signal.SIGTERM)})`",
    ]


CLUSTER_DEFINITIONS = (
    "The exit code is 128 + the signal number", "~3× the model's size on disk",  # the weights and AdamW's 2 moments
    "The examples below use 120 s", "120 s before the time limit", "exits 0 without training", "exits 0 rather than",
    "and exits 1 (its own traceback)", "exits 1 itself", "(default 30 s)", "PID 1", "torchrun exited 1",
    "(accelerate 1.15:", "`processes: 1`", "`--num_processes 2`", "starts two (gloo)",
)


def diagnostics_passages() -> list[str]:
    """docs/diagnostics.md: the diagnostics' constants and the packaged sample's sizes."""
    from sentadapt.diagnostics.metrics import FREQUENCY_BUCKET_EDGES, KNN_NEIGHBOURS, frequency_buckets
    from sentadapt.diagnostics.report import FREQUENCY_SENTENCES, POSITIVE_FRACTION
    from sentadapt.diagnostics.verdicts import ANISOTROPIC_COSINE, COLLAPSED_COSINE

    sample = REPO / "sentadapt/data/sample"
    sentences = len((sample / "it-support-sentences.txt").read_text(encoding="utf-8").splitlines())
    pairs = [line.split("\t") for line in (sample / "it-support-pairs.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    bands = {round(float(row[2])) for row in pairs}
    per_band = {sum(round(float(row[2])) == band for row in pairs) for band in bands}
    edges = FREQUENCY_BUCKET_EDGES
    ranks = ", ".join(f"{low + 1}–{high}" for low, high in zip((0, *edges[:-1]), edges, strict=True))
    import inspect

    queries = inspect.signature(frequency_buckets).parameters["knn_queries"].default
    return [
        f"(up to {FREQUENCY_SENTENCES:,} sentences of it)",
        f"above {100 * POSITIVE_FRACTION:.0f} % of the scale (STS-B: > {5 * POSITIVE_FRACTION:g} of 0–5",
        f"{sentences} sentences of", f"and {len(pairs)} pairs of",
        *([f"{per_band.pop()} per integer score band"] if len(per_band) == 1 else []),
        f"Verdict: ≥ {COLLAPSED_COSINE:g} collapsed, ≥ {ANISOTROPIC_COSINE:g} anisotropic",
        f"bucketed by rank {ranks}, > {edges[-1]}",
        f"to the {KNN_NEIGHBOURS} nearest other vocabulary embeddings (up to {queries} random tokens per bucket",
        f"`frequency.png` (norm and {KNN_NEIGHBOURS}-NN distance",
    ]


DIAGNOSTICS_DEFINITIONS = (
    "the 6-layer default model", "ℓ = 0 (embedding layer)", "I(W) ≥ e⁻² ≈ 0.135", "and 1 is perfectly isotropic",
    "1 for a rank-1 matrix", "min(N − 1, D)", "(α = 2)", "exp(−2‖f(x) − f(y)‖²)", "(t = 2)", "[−4, 0] (−4:",
    "the 2 most frequent tokens", "ranks 1–2 and k = 2", "forced to 0", "(cosine 0)", "k = 0 …", "hidden state 0 … L",
    "hidden states 1 and L", "cls of layer 0",
)


def recipes_passages() -> list[str]:
    """docs/recipes.md: the recipes' constants, and the domain suite's and the LoRA study's stored figures
    (research/results/decision/domain-suite.json, research/results/lora/study.json)."""
    from sentadapt.config.schema import DistillationSettings
    from sentadapt.recipes.sgopt import SgOptConfig

    from research.experiments import decision_study, domain_stored, lora_suite
    from research.experiments.domain_stored import STUDY, average_delta

    suite = _json(RESULTS / "decision" / STUDY)
    l6, l3 = decision_study.MODELS
    head = SgOptConfig().head_hidden
    widths = (384, 768)  # MiniLM and base-size models: H
    head_millions = [head * (head + width) / 1e6 for width in widths]
    tuned = {recipe: signed(average_delta(suite, l3, recipe)) for recipe in decision_study.RECIPES}
    consert_l6 = average_delta(suite, l6, "consert")
    rows = [entry["rows"]["consert"]["test"] for entry in suite["variants"]["default"]["models"][l6].values()]
    up = sum(row["ci_excludes_0"] and row["delta"] > 0 for row in rows)
    down = sum(row["ci_excludes_0"] and row["delta"] < 0 for row in rows)
    peers = [signed(average_delta(suite, l6, peer)) for peer in decision_study.PEERS]
    both = (consert_l6 + average_delta(suite, l3, "consert")) / 2

    lora = _json(REPO / lora_suite.RESULTS / lora_suite.STUDY)
    trained, total = lora["settings"]["lora-r16"]["parameters"]
    full_total = lora["settings"]["full"]["parameters"][1]

    def lora_figures(name: str) -> tuple[str, str, int]:
        rows = [lora["domains"][domain][name] for domain in lora["domains"]]
        raw = sum(row["test"]["delta"] for row in rows) / len(rows)
        applied = sum(row["test"]["delta"] if row["decision"] == "use-adapted" else 0.0 for row in rows) / len(rows)
        return signed(raw), signed(applied), sum(row["decision"] == "use-adapted" for row in rows)

    def peak_gb(name: str) -> float:
        return max(lora["domains"][d][name]["peak_rss_mb"] for d in lora["domains"]) / 1000  # results.md's column

    full, r16 = lora_figures(lora_suite.FULL), lora_figures("lora-r16")
    domains = len(lora["domains"])
    return [
        f"through a shared {head}-wide projection head",
        f"The head adds {head}·({head} + H) ≈ {head_millions[0]:.0f}–{head_millions[1]:.0f}M parameters",
        f"(any recipe; default {_default(DistillationSettings, 'distill'):g} = off)",
        f"(default {_default(DistillationSettings, 'distill_temperature'):g}; needs ≥ 3 sentences per process)",
        f"trains {100 * trained / total:.1f} % of its weights",
        f"the domain suite's {words(domains)} domains, {lora_suite.STEPS} steps, {domain_stored.DEV_PAIRS} dev pairs",
        f"({trained * 4 / 1e6:.1f} MB for all-MiniLM-L6-v2 at r 16)",
        f"full fine-tuning gains {full[0]} on held-out test on average ({full[1]} with the decision applied, {full[2]} of "
        f"{domains} domains used); LoRA r 16",
        f"gains {r16[0]} ({r16[1]} applied, {r16[2]} of {domains})",
        f"On a {int(full_total / 1e6)}M-parameter model it saves no memory (peak RSS {peak_gb('lora-r16'):.2f} vs "
        f"{peak_gb(lora_suite.FULL):.2f} GB in these runs)",  # 22,565,376 weights: "22M", as the model is known
        suite_shape(),
        f"drifting | {tuned['consert']} |",
        f"distillation target | {tuned['sg-opt']} |", f"*is* the base | {tuned['clsr']} |",
        f"ConSERT averages {signed(consert_l6)} on test ({words(up)} domains significantly up, "
        f"{'none' if down == 0 else words(down)} down), above sentence-transformers' SimCSE ({peers[0]}), CT "
        f"({peers[1]}) and TSDAE ({peers[2]}) at the same 100 steps. Over both models and all four domains it "
        f"averages {signed(both)}",
    ]


RECIPES_DEFINITIONS = (
    "every layer (0..L)", "λ·‖θ_F − θ_T‖²", "(hidden size 2 × the base dimension)", "step 0 is the base model bit",
    "step 0 *is* the base", "(alpha = 2 × r;", "10× is the usual ratio", "12 bytes per weight saved",
    "(W + (alpha/r)·B·A", "paraphrase-MiniLM-L3-v2, 100 steps; Δ Spearman × 100", "adds W · D(adapted, base)",
    "(all-MiniLM, bge, e5, ...)", "r 16", "Qiu et al. 2021", "at batch 64 and 128 tokens",
)


def usage_passages() -> list[str]:
    """docs/usage.md: the demo's stored run (research/results/demo: its metrics.json, dev and test cosines), the
    exit codes, the product's constants."""
    import signal

    from sentadapt.config.schema import RunConfig
    from sentadapt.decision.sequential import look_of
    from sentadapt.errors import NoImprovement
    from sentadapt.evaluation.bootstrap import CONFIDENCE, FEW_LABELS
    from sentadapt.evaluation.retrieval import CORPUS_BLOCK, QUERY_BLOCK
    from sentadapt.evaluation.sts import spearman100
    from sentadapt.evaluation.tasks import TASKS
    from sentadapt.exporting.verify import COSINE_LIMIT, ONNX_MAX_ABS_LIMIT
    from sentadapt.pairs.devset import BINS

    from research.experiments import decision_study, demo_stored

    demo = REPO / demo_stored.RESULTS
    metrics = _json(demo / "metrics.json")
    found = demo_stored.figures(demo)
    dev_low, dev_high = metrics["dev_change_ci"]
    test_low, test_high = found["test"].interval
    evidence = metrics["dev_evidence"]

    def pairs(path: Path) -> int:
        return len(path.read_text(encoding="utf-8").splitlines()) - 1  # the header

    gold = [float(line.split("\t")[2]) for line in (REPO / demo_stored.TEST).read_text(encoding="utf-8").splitlines()[1:]]
    test = _json(demo / "test_outputs.json")
    scores = [spearman100(next(iter(test[name].values()))["cosine"], gold) for name in ("base", "adapted")]
    significant = not test_low <= 0 <= test_high
    candidates = len(decision_study.RECIPES)
    sample = REPO / "sentadapt/data/sample"
    sentences = len((sample / "it-support-sentences.txt").read_text(encoding="utf-8").splitlines())
    labelled = pairs(sample / "it-support-pairs.tsv")
    return [
        f"`examples/it-support-dev.tsv` ({pairs(REPO / demo_stored.DEV)} pairs)",
        f"`examples/it-support-test.tsv` ({pairs(REPO / demo_stored.TEST)} pairs that share no",
        f"({'CPU' if 'cpu' in str(metrics['environment']).lower() else 'GPU'}, {found['steps']} steps, tuned-base preset",
        f"dev {metrics['base_score']:.2f} → {metrics['best_score']:.2f} at step {metrics['best_step']} "
        f"(Δ {found['dev']:+.2f} [{dev_low:+.2f}, {dev_high:+.2f}]; risk {found['risk']:.2f} that it is no better, the "
        f"best of {evidence['options']} evaluations paid for, within its first look's limit of "
        f"{look_of([evidence['units']], _default(RunConfig, 'risk')).limit:.3f} (the default "
        f"{_default(RunConfig, 'risk'):.2f}, spent over the looks of the label-more loop)",
        f"it adds that {evidence['units']} dev pairs cannot confirm gains below ~{evidence['detectable_gain']:.1f})",
        f"held-out test Spearman {scores[0]:.2f} → {scores[1]:.2f} (Δ {found['test'].value:+.2f} "
        f"[{test_low:+.2f}, {test_high:+.2f}]: {'significant' if significant else 'not significant'}, the paired "
        f"{100 * CONFIDENCE:.0f} % CI {'excludes' if significant else 'includes'} 0)",
        f"its paired {100 * CONFIDENCE:.0f} % bootstrap CI",
        f"keep-base decision is exit code **{NoImprovement.exit_code}**",
        f"`--require-improvement` exits {NoImprovement.exit_code} when",
        f"`--require-improvement` exits {NoImprovement.exit_code} on keep-base",
        f"with 128 + the signal number ({128 + signal.SIGINT}, {128 + signal.SIGTERM}, {128 + signal.SIGUSR1})",
        f"at 1 − {1 - CONFIDENCE:g}/K ({100 * (1 - (1 - CONFIDENCE) / candidates):.2f} % for {words(candidates)}, "
        "Bonferroni)",
        f"cosine range into {BINS} equal-width bins",
        f"A dev set of fewer than {FEW_LABELS} labelled pairs",
        f"step's paired {100 * CONFIDENCE:.0f} % CI of Δ",
        f"and the {len(TASKS)}-task average",
        f"(a {QUERY_BLOCK:,}-query × {CORPUS_BLOCK:,}-document block",
        f"Every number carries a **{100 * CONFIDENCE:.0f} % percentile bootstrap",
        f"({sentences} IT-support sentences and {labelled} labelled pairs",
        f"cosine ≥ {COSINE_LIMIT:g} to sentadapt's encoder, ONNX max |Δ| ≤ {ONNX_MAX_ABS_LIMIT:.0e}".replace("e-0", "e-"),
        *other_tests(),
    ]


# figures of the user pages that a test outside the research wing recomputes (research/ may not import bench/): the
# phrase, and the test that holds it to its stored study
OTHER_TESTS = {
    "ran 4,812 examples/s against 2,925 for TF32": "bench/tests/test_bench_gpu.py::"
                                                   "test_the_compile_figures_quoted_in_the_docs_are_the_stored_study_s",
}


def other_tests() -> list[str]:
    """OTHER_TESTS' phrases whose test still exists (a phrase whose test is gone is a figure nobody checks)."""
    found = []
    for phrase, test in OTHER_TESTS.items():
        path, _, name = test.partition("::")
        if f"def {name}(" in (REPO / path).read_text(encoding="utf-8"):
            found.append(phrase)
    return found


USAGE_DEFINITIONS = (
    "a few minutes on 2 cores", "one sentence per line (UTF-8", "64-bit hashes", "(10M lines:", "about 2× the corpus",
    "0/1-labelled pairs", "~100 labelled pairs", "(measured with accelerate 1.15)", "a multiple of 8", "exits 0",
    "both shared models × 4 domains", "(at least 3·n)", "It needs 2·n distinct", "such as 0–5 → STS",
    "not all 0/1", "metrics × 100", "(0/1;", "with 0/1 values", "its CI excludes 0", "SICK-R has all 9,927 pairs",
    "has 4,927", "(top-1 / top-10 variance", "random pairs average cosine 0.62", "[I | 0]", "must exclude 0",
    "the paired 95 % bootstrap CI", "at batch 96",
)


def evaluation_passages() -> list[str]:
    """docs/evaluation.md: its generated power section (research/results/decision/study.json, which
    research/tests/test_decision_study.py re-derives), the simulation stored in the same study, the evaluators'
    constants, and the domain suite's stored rows."""
    from sentadapt.config.schema import RunConfig
    from sentadapt.evaluation.bootstrap import CONFIDENCE, DEFAULT_RESAMPLES
    from sentadapt.evaluation.reranking import AT_K
    from sentadapt.evaluation.retrieval import CORPUS_BLOCK, QUERY_BLOCK, TOP_K
    from sentadapt.evaluation.tasks import TASKS

    from research.experiments import decision_study
    from research.experiments.domain_stored import STUDY

    stored = _json(RESULTS / "decision" / "study.json")
    power = decision_study.render_power(stored, decision_study.COMMAND)
    simulated = stored["selection_cost"]
    paid, unpaid = ([100 * row[key] for row in simulated] for key in ("paid", "unpaid"))
    rhos = [row["rho"] for row in simulated]
    risk = _default(RunConfig, "risk")
    candidates = len(decision_study.RECIPES)
    adjusted = 1 - (1 - CONFIDENCE) / candidates

    z = {level: NormalDist().inv_cdf(1 - (1 - level) / 2) for level in (CONFIDENCE, adjusted)}
    suite = _json(RESULTS / "decision" / STUDY)["variants"]["default"]["models"]
    noise = suite[decision_study.MODELS[0]]["glosses"]["rows"]["sg-opt"]
    half = 100 * (1 - CONFIDENCE) / 2
    block_mib = QUERY_BLOCK * CORPUS_BLOCK * 4 / 2**20  # float32 scores
    return [
        *_outside_code(power),
        f"Each query's top {TOP_K} documents by cosine",
        f"nDCG@{AT_K} (main) = Σ_{{r ≤ {AT_K}}} rel_r / log2(r+1) ÷ Σ_{{r ≤ min(R,{AT_K})}} 1 / log2(r+1)",
        f"Σ over relevant hits in the top {TOP_K} of precision at that rank, ÷ min({TOP_K}, R)",
        f"blocks of {QUERY_BLOCK:,} queries × {CORPUS_BLOCK:,} documents are one matmul each, of which only the "
        f"running top {TOP_K} per query is kept, so the extra memory is one {block_mib:.0f} MiB block",
        f"A tie exactly at rank {TOP_K}",
        f"resamples (default {DEFAULT_RESAMPLES:,})",
        f"the {100 * CONFIDENCE:.0f} % interval is the {half:g}th–{100 - half:g}th percentile",
        f"(the {len(TASKS)} STS tasks)",
        f"(default, `--risk {risk:g}`)", f"is at most {risk:g}",
        f"in about {100 * risk:.0f} % of runs (its stated risk; at a limit of 0.2, simulated with K = 4 checkpoints "
        f"correlated {min(rhos):g}–{max(rhos):g}: {min(paid):.0f}–{max(paid):.0f} %), against "
        f"{min(unpaid):.0f}–{max(unpaid):.0f} %",
        f"the paired {100 * CONFIDENCE:.0f} % CI excludes 0 (two-sided; a one-sided risk of {(1 - CONFIDENCE) / 2:g}",
        f"A 100-pair dev set's {100 * CONFIDENCE:.0f} % CI",
        f"the best checkpoint with its {100 * CONFIDENCE:.0f} % CI",
        f"glosses: dev {noise['dev']['delta']:+.2f} \"use\", held-out test {signed(noise['test']['delta'])})",
        f"plain {100 * CONFIDENCE:.0f} % interval excludes 0, far more often than {100 * (1 - CONFIDENCE):.0f} % of the time",
        f"confidence 1 − {1 - CONFIDENCE:g} / K (K = {candidates}: {100 * adjusted:.2f} %)",
        f"more than Bonferroni costs at K = {candidates}, {z[adjusted]:.2f}/{z[CONFIDENCE]:.2f} ≈ "
        f"{z[adjusted] / z[CONFIDENCE]:.2f}×",
        *_asserted_tolerance("tests/evaluation/test_eval_parity_st.py", "abs=1e-6", "within 1e-6"),
    ]


def _outside_code(section: str) -> list[str]:
    """A generated section's text outside its code blocks, paragraph by paragraph (code blocks are not figures)."""
    text = re.sub(r"```.*?```", "\n\n", section, flags=re.S)
    return [part for part in (flat(chunk) for chunk in re.split(r"\n\s*\n", text)) if part]


EVALUATION_DEFINITIONS = (
    "every metric is reported × 100", "with label 0 or 1", "a label is 1 = same meaning, 0 = different",
    "such as 0-5. All labels 0/1", "is the 0/1 label", "reads a 0/1 `score` column", "a label other than 0/1",
    "with score > 0 are relevant", "within the top 10 (0 if none)", "1/log2(rank+1)", "positions past 10 discount 0",
    "N × d × 4 bytes", "(weight of its tie group + 1) / 2", "blocks of ~1M counts", "10,000 pairs × 1,000 resamples",
    "exactly [0, 0]", "interval excludes 0", "about 8 bytes per unit", "its dev Δ > 0", "(≈ 1 − Φ(Δ/s))",
    "At a true Δ of 0", "a true loss of −0.5 on 100 pairs", "Δ > 0 and", "any dev Δ > 0", "about ±1.5 wide",
    "under ~1.5", "100 and 200 dev pairs", "a gain of 0.5 under", "\"100 dev pairs: gains below ~0.7 cannot be "
    "confirmed at risk 0.20 (~200 for ~0.5;", "as 1/√n, so 4× the pairs halve it", "fill in 1/0", "(Δ ≤ 0",
    "excludes 0 are eligible", "by √2 ≈ 1.41×", "when > 0", "1995)", "1 / rank of the first", "q_{1−risk}(M)",
    "with Δ > 0 whose",
)


FRACTION_WORDS = {1 / 2: "half", 1 / 3: "a third", 2 / 3: "two thirds", 1 / 4: "a quarter", 2 / 5: "two fifths",
                  3 / 5: "three fifths", 3 / 4: "three quarters"}
COUNT_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 10: "ten", 20: "twenty"}


def fraction_word(value: float) -> str:
    """A share in words, the nearest of FRACTION_WORDS (a page's "half" is held to the number it stands for)."""
    return FRACTION_WORDS[min(FRACTION_WORDS, key=lambda fraction: abs(fraction - value))]


def words_passages(labels: dict[str, Any]) -> list[str]:
    """docs/decision.md's numbers written in words, each from what it stands for: the design's uniform share, the
    default risk as one run in N, and the standard error 85 % power at +1.0 needs at the default risk, as a share of
    the error 100 random labels give on the stored pools (mean RMSE of the chosen-labels study)."""
    import statistics as stats

    from sentadapt.config.schema import DEFAULT_RISK
    from sentadapt.decision.sequential import look_of
    from sentadapt.pairs.design import UNIFORM_SHARE

    z = stats.NormalDist().inv_cdf
    first = look_of([100], DEFAULT_RISK).limit  # the limit of a first look at 100 labels
    needed = 1.0 / (z(0.85) + z(1 - first))  # Δ̂ ~ N(1.0, se²) clears z(1 − limit)·se 85 % of the time
    random_error = stats.mean(cell["random"] for cell in labels["errors"].values())
    return [f"drawn with a probability that grows with how differently the two models rank it, "
            f"{fraction_word(UNIFORM_SHARE)} of it spread uniformly",
            f"in at most about one loop in {COUNT_WORDS[round(1 / DEFAULT_RISK)]} — its",
            f"would take a standard error near {fraction_word(needed / random_error)} of what 100 random labels give"]


def decision_passages() -> list[str]:
    """docs/decision.md: the stored decision studies (dev-size-power.json, chosen-labels.json, ppi-bound.json,
    study.json's spread), the social study, and the product's constants."""
    from sentadapt.config.schema import RunConfig
    from sentadapt.errors import NoImprovement
    from sentadapt.evaluation.bootstrap import CONFIDENCE

    from research.experiments import chosen_labels, decision_study, dev_size_power, ppi_bound

    distill = RESULTS / "distill"
    power = _json(distill / "dev-size-power.json")
    rows = {row["size"]: row for row in power["table"]}
    sizes = sorted(rows)
    from_200 = [rows[size] for size in sizes if size >= 200]
    labels = _json(distill / chosen_labels.STUDY)
    quoted = chosen_labels.quoted(labels)
    ppi = ppi_bound.verdict(_json(distill / "ppi-bound.json")["cells"])
    social = _json(distill / "study-k3e-social.json")
    tweets = [c for c in social["cells"] if c["pairing"] == "l6-mpnet" and c["size"] == 200]
    stress = _json(distill / "stress-400.json")  # the teacher-led relaxations at 400 dev pairs
    relaxed = stress["verdict"]["decisions"]

    def percent(values: list[float]) -> str:
        low, high = (f"{100 * value:.0f}" for value in (min(values), max(values)))
        return f"{low} %" if low == high else f"{low}-{high} %"

    return [
        f"(default **{_default(RunConfig, 'risk'):g}**)",
        f"paired {100 * CONFIDENCE:.0f} % CI",
        f"exit code **{NoImprovement.exit_code}**", f"exits {NoImprovement.exit_code} on keep-base",
        f"turns that into exit {NoImprovement.exit_code}",
        f"its paired {100 * CONFIDENCE:.0f} % CI is about ±{dev_ci_half_width(decision_study.MODELS[0]):.1f} for ConSERT on "
        f"all-MiniLM-L6-v2, ±{dev_ci_half_width(decision_study.MODELS[1]):.1f} for the paraphrase-MiniLM-L3-v2",
        f"Label ~{enough_dev_pairs()} dev pairs or more",
        f"on the same {rows[sizes[0]]['cells']} draws of the stored runs",
        *dev_size_power.lines(power),
        f"from 200 dev pairs on, the decision used {percent([row['power'] for row in from_200])} of the students that "
        f"gained ≥ {dev_size_power.GAIN:+.1f} on test and {percent([row['false_use'] for row in from_200])} of those "
        f"that lost",
        f"At 100 pairs it used {100 * rows[100]['power']:.0f} %, at 50 pairs {100 * rows[50]['power']:.0f} %",
        f"cannot spare {sizes[-1]} pairs, and on tweets 200 pairs confirmed the student in "
        f"{sum(c['applied'] != 0 for c in tweets)} of {len(tweets)} draws",
        f"On the stored runs' {ppi['cells']} cells the median ρ² is {100 * ppi['median_rho_squared']:.0f} %",
        f"at {stress['size']} dev pairs it raised false use from {100 * relaxed['plain']['false_use']:.0f} % to "
        f"{100 * relaxed['both']['false_use']:.0f} % with "
        f"{'no gain' if relaxed['both']['power'] <= relaxed['plain']['power'] else 'a gain'} in power",
        *_outside_code("\n".join(chosen_labels.lines(labels))),
        f"the estimate's error is {quoted['after']} that of as many random pairs, and the CI covers at "
        f"{quoted['coverage'].replace(' %', '')} %; chosen before training, {quoted['before']}",
        f"at {quoted['size']} labels `decide` used {quoted['chosen']} and {quoted['random']}",
        f"whose Δ over the whole pool is ≥ {quoted['gain']}", f"Reaching 85 % at a gain of {quoted['gain']}",
        *words_passages(labels), *loop_passages(),
        f"{quoted['size']} random labels give; choosing pairs among these pools buys {quoted['saved']}",
    ]


DECISION_DEFINITIONS = (
    "At a true gain of 0", "gains of +1 on a 100-pair dev set", "CI excludes 0", "A 100-pair dev set",
    "under ~1.5 this way", "dev Δ > 0", "(Δ +1.20 [-0.35, +2.80]; risk 0.08 that it is no better (best of 4 "
    "evaluations), limit 0.100 at look 1 of the label-more loop (100 of 400 labels; 0.20 over every look))",
    "gains of ~0.5", "(\"100 dev pairs: gains below ~0.8 cannot be confirmed at risk 0.20 (~250 for ~0.5; …)\")",
    "a 100-pair dev set cannot tell tenths", "(≥ 80 %, ≤ 5 %)", "(1 / its chance", "a one-point gain",
    "A first look at 100 labels often cannot tell a gain of +1 from noise", "100 labels, inconclusive",
    "(issue 83)",
)


def loop_passages() -> list[str]:
    """docs/decision.md's label-more loop: the plan's limits from the product (decision/sequential.py), what looking
    again at one limit costs (Monte Carlo, fixed seed), and the stored loop study's tables."""
    import numpy as np
    from sentadapt.config.schema import DEFAULT_RISK, LABEL_CAP
    from sentadapt.decision.sequential import FUTILITY_RISK, nominal_limits

    from research.experiments import label_loop

    sizes = [100, 200, LABEL_CAP]
    limits = nominal_limits(sizes, DEFAULT_RISK)
    naive = 0.1
    steps = np.random.default_rng(0).standard_normal((200_000, 3)) * np.sqrt(np.diff([0, *sizes]))
    z = np.cumsum(steps, axis=1) / np.sqrt(sizes)
    crossed = float((z >= NormalDist().inv_cdf(1 - naive)).any(axis=1).mean())
    stored = label_loop.read(REPO / label_loop.RESULTS / label_loop.STUDY)
    return [f"(three looks at {naive:g} each: ~{100 * crossed:.0f} % of loops)",
            f"at {sizes[0]} labels {limits[0]:.3f}, at {sizes[1]} {limits[1]:.3f}, at {sizes[2]} {limits[2]:.3f} (the "
            f"default {DEFAULT_RISK:g};",
            f"unless the risk is above {FUTILITY_RISK:g} (the adapted model below the base by more than "
            f"{NormalDist().inv_cdf(FUTILITY_RISK):.2f} standard errors",
            f"the next look has twice the labels, up to {LABEL_CAP}, the last",
            "40 loops per run and first look", *_outside_code("\n".join(label_loop.doc_lines(stored)))]


def reliability_passages() -> list[str]:
    """docs/reliability.md's prose: the exit codes from the error classes and the signals, the scale rule's
    constants (sentadapt/data/pair_files.py), the step the file-size test starts refusing writes at."""
    import signal

    from sentadapt.data.pair_files import ODD_SHARE, STANDARD_SCALES
    from sentadapt.errors import ConfigError, DataError
    from sentadapt.recipes.presets import TEACHER_DEFAULTS

    limited = re.search(r'start\("file-size-limit", (\d+),', _source("tests/run/test_faults.py"))
    # the overwrite test's cases: (mode, step, signal), its parametrize list
    cases = re.findall(r'\("(pause-after-log|pause-in-checkpoint)", (\d+), signal\.(SIG\w+)\)',
                       _source("tests/run/test_overwrite.py"))
    stops = ", ".join(f"inside checkpoint {step}" if mode == "pause-in-checkpoint"
                      else f"step {step}" + (f" by {name}" if name != "SIGINT" else "") for mode, step, name in cases)
    scales = ", ".join(f"{low:g}–{high:g}" for low, high in STANDARD_SCALES)
    return [
        f"a graded column's scale is the smallest of {scales} that holds all its scores but a few — one, or "
        f"{100 * ODD_SHARE:g} % of a large file, and under a quarter of a tiny one",
        *([f"inside the training process from step {limited[1]} on"] if limited else []),
        f"(at {stops})",
        f"(the teacher-run defaults: neighbour batches, patience {TEACHER_DEFAULTS['patience']}, the length rule",
        f"(more than one, or {100 * ODD_SHARE:g} % of a large file",
        f"the exit code is {DataError.exit_code} for a data or file error, {ConfigError.exit_code} for a bad option, "
        "128 + the signal number",
        f"({128 + signal.SIGINT} Ctrl-C, {128 + signal.SIGTERM} SIGTERM, {128 + signal.SIGUSR1} SIGUSR1;",
    ]


RELIABILITY_DEFINITIONS = (
    "weights × (3 × (`keep_checkpoints` + 1) + 3)",  # weights + AdamW's 2 moments per checkpoint, +1 being written
    "The exit code is 128 + the signal even",
    # stated, not tested on its own: the row says its handler is the one the rows around it test
    "| 130 | — (same handler) |",
    # the scale rule's examples: a score off the scale, scales nothing nearly holds, a file on its own scale
    "(7.5 or −1 among 0–5 scores)", "(−1…1, 0–50)", "(a 0–100 file)",
)

TEST_REFERENCE = re.compile(r"`((?:tests/[\w/]+\.py)?(?:::)?(?:test_\w+)?)(?:\[[^\]`]*\])?`")
SIGNAL_EXITS = {128 + signum: signum.name for signum in STOP_SIGNALS}  # 130 SIGINT, 143 SIGTERM, 138 SIGUSR1


@cache
def _source(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


@cache  # the sources do not change while a page is checked (test_doc_figures checks each mutation of it)
def _test_source(path: str, name: str | None) -> str:
    """A test function's source (up to the next top-level statement), or the whole file without a name; "" when
    the page names a test that is not there."""
    text = _source(path)
    if not name:
        return text
    end = r"^(?:def |async def |class |@|\w+ = |#)"
    # from its decorators (a parametrize names the signals or inputs) to the next top-level statement
    found = re.search(rf"(?:^@[^\n]*\n(?:[ )\]][^\n]*\n)*)*^(?:async )?def {re.escape(name)}\((?s:.*?)(?={end})",
                      text + "\n#", flags=re.M)
    if not found:
        return ""
    # and the file's helpers it calls (an `api_error` that asserts the exit code), one level down
    helpers = [_test_source(path, helper) for helper in dict.fromkeys(re.findall(r"\b(\w+)\(", found.group()))
               if helper != name and not helper.startswith("test_") and re.search(rf"^def {helper}\(", text, re.M)]
    return "\n".join([found.group(), *helpers])


@cache
def _module_constants(path: str) -> str:
    """A test file's module-level constants (the cases its parametrized tests read) and signal names."""
    text = _source(path)
    constants = re.findall(r"^[A-Z][A-Z_0-9]* = (?s:.*?)(?=^\S)", text + "\n#", flags=re.M)
    return "\n".join([*constants, *re.findall(r"signal\.SIG\w+", text)])


def _asserts_exit(body: str, code: int, quoted: str = "") -> bool:
    """Whether the tests assert this exit code: `exit_code == N` (returncode, code), or 128 + the signal they send."""
    from sentadapt.errors import ConfigError, DataError

    if re.search(rf"(?:exit_code|returncode|code)\s*==\s*{code}\b", body):
        return True
    # a parametrized code: `exit_code == code`, and the case of its @pytest.mark.parametrize whose message shares
    # the most words with the row's quoted message holds this code
    cases = re.search(r"^@pytest[^\n]*\n(?:[ )\]][^\n]*\n)*", body, re.M)
    if re.search(r"(?:exit_code|returncode)\s*==\s*code\b", body) and cases and quoted:
        words = set(re.findall(r"[a-z]{4,}", quoted.lower()))
        found = [(len(words & set(re.findall(r"[a-z]{4,}", case[1].lower()))), int(case[0]))
                 for case in re.findall(r"\(\"[^\"]*\", \([^)]*\), (\d+), \"([^\"]*)", cases.group())]
        if found and max(found)[1] == code:
            return True
    signal_name = SIGNAL_EXITS.get(code)
    if signal_name and signal_name in body and "128 +" in body:  # 128 + signum, over the signals it sends
        return True
    raised = {DataError.exit_code: "DataError", ConfigError.exit_code: "ConfigError"}.get(code)
    return bool(raised and re.search(rf"raises\((?:\w+\.)?{raised}\b", body))


def _asserted(cell: str, body: str, exits: bool, quoted: str = "") -> bool:
    """Every number of a row's cell appears in the source of the tests the row names; an exit code (the Exit
    column, or "exit N" / "exit code N" in prose) only where they assert it as one."""
    cell = re.sub(NOT_FIGURES, " ", cell.replace("−", "-"))
    # exit codes: the Exit column; in prose "exit N", "exit code N" and a stop signal's 128 + n
    pattern = r"\d+" if exits else r"\bexit(?: code)? (\d+)|\b(13[08]|143)\b"
    codes = [int(next((g for g in m.groups() if g), m.group())) for m in re.finditer(pattern, cell)]
    # exit 0 claims only that nothing failed; a code listed twice ("1 / 1") is not a row's claim
    if len(set(codes)) < len(codes) or not all(code == 0 or _asserts_exit(body, code, quoted) for code in codes):
        return False
    rest = "" if exits else re.sub(r"\bexit(?: code)? \d+|\b(?:13[08]|143)\b", " ", cell)
    return all(re.search(rf"(?<![\w.]){re.escape(number)}(?![\w.])", body)
               for number in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", rest))


def tested_rows(text: str) -> list[str]:
    r"""Each table row whose figures the tests it names assert (the quoted messages in inline code are not figures).
    A table whose header names a test file (`Test (\`tests/run/test_hostile.py::\`)`) gives that file to its rows'
    bare test names; a row naming a test that does not exist is not covered."""
    rows, default, exit_column = [], None, -1
    for line in text.splitlines():
        if not line.startswith("|"):
            default, exit_column = None, -1
            continue
        refs = [m.group(1) for m in TEST_REFERENCE.finditer(line) if "test" in m.group(1)]
        if line.startswith(("| Input", "| Fault")):
            default = next((ref.removesuffix("::") for ref in refs if ref.endswith("::")), None)
            headers = [cell.strip() for cell in line.split("|")[1:-1]]
            exit_column = headers.index("Exit") if "Exit" in headers else -1
            continue
        sources, path = [], default
        for ref in refs:
            if "::" in ref:
                file, _, name = ref.rpartition("::")
            else:
                file, name = (ref, "") if ref.endswith(".py") else ("", ref)
            path = file or path
            sources.append(_test_source(path, name or None) if path else "")
        cells = re.split(r"(?<!\\)\|", re.sub(r"`[^`]*`", " ", line))[1:-1]
        body = "\n".join(sources)
        if sources and all(sources):  # what the tests run: their fixtures (tiny models' widths), their files' cases
            files = {path for path in re.findall(r"(tests/[\w/]+\.py)", line)} | ({default} if default else set())
            body += "\n" + "\n".join([_source("tests/conftest.py"), *(_module_constants(path) for path in files)])
        quoted = " ".join(re.findall(r"`([^`]*)`", line.rsplit("|", 2)[0]))  # the row's messages, its tests aside
        if sources and all(sources) and all(_asserted(cell, body, exits=index == exit_column, quoted=quoted)
                                            for index, cell in enumerate(cells[:-1])):
            rows.append(line)
    return rows


PAGES = {page.path: page for page in (
    Page("README.md", readme_figures.passages, readme_figures.DEFINITIONS),
    Page("docs/sizes.md", sizes_passages, SIZES_DEFINITIONS),
    Page("docs/teacher.md", teacher_passages, TEACHER_DEFINITIONS),
    Page("docs/cluster.md", cluster_passages, CLUSTER_DEFINITIONS),
    Page("docs/diagnostics.md", diagnostics_passages, DIAGNOSTICS_DEFINITIONS),
    Page("docs/recipes.md", recipes_passages, RECIPES_DEFINITIONS),
    Page("docs/usage.md", usage_passages, USAGE_DEFINITIONS),
    Page("docs/evaluation.md", evaluation_passages, EVALUATION_DEFINITIONS),
    Page("docs/decision.md", decision_passages, DECISION_DEFINITIONS),
    Page("docs/reliability.md", reliability_passages, RELIABILITY_DEFINITIONS, tested_rows),
)}


def text_of(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


def problems(page: Page, text: str, passages: list[str]) -> list[str]:
    """What the page lacks (a recomputed passage) or holds unchecked (a number no passage or definition covers)."""
    missing = [f"missing: {passage}" for passage in passages if flat(passage) not in flat(text)]
    tested = page.tested(text) if page.tested else []
    loose = numbers_outside(text, [*passages, *tested, *page.definitions])
    return missing + [f"not recomputed by any test: …{number}…" for number in loose]


def figures(text: str) -> list[re.Match[str]]:
    """The page's numbers outside code blocks, inline code and link targets, as a reader takes them for figures (a
    digit after a letter is part of a name: L6, v2, STS14)."""
    pattern = "|".join((r"```.*?```", r"`[^`\n]*`", r"\]\([^)\n]*\)", NOT_FIGURES, ORDERED_LIST.removeprefix("(?m)")))
    code = [(m.start(), m.end()) for m in re.finditer(pattern, text, flags=re.S | re.M)]
    return [m for m in re.finditer(r"\d+", text) if not any(a <= m.start() < b for a, b in code)
            and not re.match(r"[A-Za-z]", text[m.start() - 1])]


def report() -> list[str]:
    lines = ["| page | numbers | not covered |", "|---|---:|---:|"]
    for path in USER_PAGES:
        text = text_of(path)
        page = PAGES.get(path)
        covered = page.passages() if page else []
        tested = page.tested(text) if page and page.tested else []
        loose = numbers_outside(text, [*covered, *tested, *(page.definitions if page else ())])
        lines.append(f"| {path} | {len(numbers_outside(text, []))} | {len(loose)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true", help="per user page: its numbers and the uncovered ones")
    args = parser.parse_args()
    if args.report:
        print("\n".join(report()))
        return
    for page in PAGES.values():
        print(f"## {page.path}")
        for passage in page.passages():
            print(passage)


if __name__ == "__main__":
    main()
