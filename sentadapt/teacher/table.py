"""`adapt --teacher MODEL|FILE`, from the name given to the distillation target, in three sections.

What --teacher names: a model (a folder or a Hub id) or a vectors file, checked before anything loads
(`check_teacher`: run/plan.py's seam) and resolved once for the run.

The teacher weighed on the dev set before its corpus is encoded: its score and lead over the base with a paired CI
(`Weighing`, said in one line by `teacher_verdict`); a teacher that trails the base significantly stops the run there
(`--set teacher_check=off` distils it anyway: a student of a trailing teacher can still gain; docs/teacher.md and
research/experiments/teacher_check.py have what was measured). What the decision says of that lead after training is
decision/rule.py's (`teacher_lead_note`). Blend targets (`--set teacher_blend=auto|α`, docs/teacher.md): the
distillation target's similarities α · the teacher's + (1 − α) · the base's; `auto` weighs α on the dev set by its
rule, written before its study.

The table, the teacher's vectors of every training example: a model teacher encodes the examples' texts ONCE, before
training (in eval mode, so without dropout; each model tokenizes for itself, so the vocabularies may differ); a
vectors file (data/vectors.py: .jsonl, .parquet, .npy + .txt) is looked up by text instead. Either way the table is
written to the cache as a .npy file (`embedding_cache.cached_table` / `file_table`, keyed by the teacher and the
texts): a second run on the same corpus, or `--resume`, reads it back, and the process reads only each batch's rows
(sentadapt/storage/rowfile.py; the loop puts them in the batch, train/distill.py), so a 1M × 768 table (3 GB) stays
on disk. Row i of the table is example i of the recipe's examples (the sentence, an NLI premise, the first sentence of
a pair: what distillation's student side embeds, train/distill.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError, ModelError
from sentadapt.events import Note, Progress
from sentadapt.model.resolve import ResolvedModel

if TYPE_CHECKING:
    from sentadapt.config.schema import RunConfig
    from sentadapt.evaluation.evaluator import Delta
    from sentadapt.storage.rowfile import RowFile


# -------------------------------------------------------------------------------- what --teacher names


def resolve_source(teacher: str) -> ResolvedModel | Path:
    """--teacher as a vectors file (its path) or a model (resolved)."""
    from sentadapt.data.vectors import is_vectors_path

    return Path(teacher) if is_vectors_path(teacher) else resolve_teacher(teacher)


def check_teacher(teacher: str, base_location: str) -> ResolvedModel | Path:
    """Before any weights load: the teacher must resolve to a model that holds weights and is not the base model
    itself, or be a vectors file that exists (its contents are read once the corpus is, in `teacher_table`).
    Returns the teacher resolved (`resolve_source`), for the run to load without resolving it again."""
    from sentadapt.model.resolve import check_has_weights

    resolved = resolve_source(teacher)
    if isinstance(resolved, Path):
        from sentadapt.data.vectors import check_vectors_file

        check_vectors_file(resolved, teacher)
        return resolved
    if resolved.location == base_location:
        raise ConfigError(f"--teacher {teacher}: is the base model itself; a teacher must be another, stronger "
                          "model")
    try:
        check_has_weights(resolved)
    except ModelError as error:
        raise ModelError(f"--teacher {error}") from None
    return resolved


def resolve_teacher(teacher: str) -> ResolvedModel:
    """resolve_model's ModelError, naming the option: "--teacher PATH: no such model folder"."""
    from sentadapt.model.resolve import resolve_model

    try:
        return resolve_model(teacher)
    except ModelError as error:
        raise ModelError(f"--teacher {error}") from None


# ------------------------------------------------------------------ the teacher weighed on the dev set


@dataclass(frozen=True)
class Weighing:
    """The teacher's dev score and lead over the base, taken before its corpus vectors are (teacher_table)."""

    config: RunConfig
    evaluator: Any  # the run's dev evaluator, or None
    base_dev: tuple[float, dict[str, Any]] | None  # the base's (dev score, per-unit outputs)
    note: Note
    teacher_outputs: dict[str, Any] = field(default_factory=dict)  # the teacher's per-unit dev outputs, once weighed

    def __call__(self, name: str, report: Any) -> tuple[float, Delta | None]:
        """(score, lead over the base): the lead said in one line; a teacher significantly behind the base stops
        the run here, before its corpus is encoded (teacher_check=off: distil it anyway)."""
        if self.base_dev is None:
            return report.average, None
        lead = self.evaluator.compare_outputs(self.base_dev[1], self.evaluator.outputs_of(report))
        verdict = teacher_verdict(name, report.average, self.base_dev[0], lead, self.evaluator.units(),
                                  self.evaluator.unit_name())
        if lead.interval is not None and lead.interval[1] < 0 and self.config.train.teacher.check == "on":
            raise ConfigError(f"{verdict}; stopped before training. Pick a stronger teacher, or --set "
                              "teacher_check=off to distil it anyway (a student can still gain: docs/teacher.md)")
        self.note(verdict)
        self.teacher_outputs.update(self.evaluator.outputs_of(report))
        return report.average, lead


def teacher_verdict(name: str, teacher: float | None, base: float, lead: Delta, units: int, unit_name: str) -> str:
    """One line: the teacher's dev score beside the base's, its lead with the CI, and what that means."""
    ci = "" if lead.interval is None else f" [95 % CI {lead.interval[0]:+.2f}, {lead.interval[1]:+.2f}]"
    head = f"teacher {name} on the dev set: {teacher:.2f} vs the base's {base:.2f}, {lead.value:+.2f}{ci} " \
           f"over {units} {unit_name}"
    if lead.interval is not None and lead.interval[0] > 0:
        return f"{head}: it leads; distilling it can carry that lead over"
    if lead.interval is not None and lead.interval[1] < 0:
        return f"{head}: it trails on these pairs"
    if lead.value > 0:
        return (f"{head}: it may lead, the dev set cannot tell; the run decides on dev whether the student "
                "keeps a gain")
    return (f"{head}: no sign it leads; the student may still gain (it learns the teacher's structure on top "
            "of the recipe), and the run keeps the base unless it gains on dev")


# --------------------------------------------------------------------------------------- blend targets


BLENDS = (0.25, 0.5, 0.75, 1.0)  # the α teacher_blend=auto weighs (0 would be the base itself: nothing to learn)
BLEND_TIE = 0.05  # dev points within which the larger α (nearer the teacher alone) is kept


def choose_blend(evaluator: Any, base: dict[str, Any], teacher: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """teacher_blend=auto's rule (docs/teacher.md, "Blend targets"), written before its study: each α of BLENDS
    scored on the dev set by the blended cosines α · teacher + (1 − α) · base of every dev pair; the highest score
    wins, and a larger α within BLEND_TIE of it wins over a smaller one. Dev sets whose tasks are not pair cosines
    (reranking, retrieval) cannot be blended pair by pair: α = 1."""
    if any(set(outputs) != {"cosine"} for outputs in base.values()):
        return 1.0, {}
    scores = {}
    for alpha in BLENDS:
        blended = {task: {"cosine": [alpha * t + (1 - alpha) * b for t, b in zip(
            teacher[task]["cosine"], base[task]["cosine"], strict=True)]} for task in base}
        scores[f"{alpha:g}"] = evaluator.from_outputs(blended).average
    best = max(scores.values())
    chosen = max(alpha for alpha in BLENDS if scores[f"{alpha:g}"] >= best - BLEND_TIE)
    return chosen, scores


def with_blend(table: Any, config: RunConfig, weigh: Weighing, examples: Any, student: Any,
                progress: Progress, note: Note, processes: Any = None) -> Any:
    """teacher_blend: the α of the run (fixed, or chosen on dev), and for α < 1 the base's table of every example;
    `table` (a teacher/table.TeacherTable) comes back with them."""
    setting = config.train.teacher.blend
    scores = None
    if setting == "auto":
        if weigh.base_dev is None:
            note("teacher_blend auto: no dev set to weigh the blends on; the teacher alone is the target (α 1)")
            alpha = 1.0
        elif not weigh.teacher_outputs:
            note("teacher_blend auto: the teacher could not be scored on the dev set (its vectors file lacks dev "
                 "sentences, above), so no blend can be weighed; the teacher alone is the target (α 1)")
            alpha = 1.0
        else:
            alpha, scores = choose_blend(weigh.evaluator, weigh.base_dev[1], weigh.teacher_outputs)
            shown = ", ".join(f"α {key} {value:.2f}" for key, value in scores.items())
            note(f"teacher blend: α {alpha:g} (the target's similarities {alpha:g} · teacher + {1 - alpha:g} · base) "
                 f"by the dev score of the blended cosines: {shown}; base {weigh.base_dev[0]:.2f}" if scores else
                 "teacher_blend auto: the dev set's tasks are not pair cosines; the teacher alone is the target")
    else:
        alpha = float(setting)
    if alpha >= 1 or student is None:
        return dataclasses.replace(table, blend_scores=scores)
    from sentadapt.model.embedding_cache import cached_table

    base = cached_table(student, examples.example_texts, len(examples), student.token_limit(config.train.max_length),
                        config.train.evaluation.eval_batch_size,
                        partial(progress, "encoding with the base (once)"), processes)
    note(f"blend target: α {alpha:g}; the base's vectors of {len(base.vectors)} sentences "
         + ("from the cache" if base.hit else f"computed in {base.seconds:.1f} s"))
    return dataclasses.replace(table, blend=alpha, base_vectors=base.vectors, blend_scores=scores)


# ------------------------------------------------------------------------------------------- the table


ENCODING = "encoding with the teacher (once)"  # the progress bar's description
TIMED_SENTENCES = 1_024  # dev sentences both models encode to compare their speed (best of 2 each): enough to time


@dataclass(frozen=True)
class TeacherTable:
    """The teacher's vectors of the training examples (row i = example i) and what metrics.json says of them."""

    vectors: RowFile  # float32 (examples, teacher width) in the cache file, read a batch's rows at a time
    name: str  # as given to --teacher
    location: str  # the resolved folder or Hub id, or the vectors file
    cached: bool  # read from the embedding cache (no encoding in this run)
    seconds: float  # spent encoding or looking up (0 on a cache hit)
    path: str  # the cache file
    score: float | None = None  # the teacher's own dev score with the run's dev evaluator (None: no dev set)
    # seconds to encode the dev sentences, best of 2 each, alternated in this process: (student, teacher)
    dev_encode_seconds: tuple[float, float] | None = None
    lead: Delta | None = None  # teacher − base on dev, with its paired 95 % CI (None: not weighed)
    blend: float = 1.0  # α: the teacher's weight in the target's similarities (teacher_blend)
    base_vectors: RowFile | None = None  # with α < 1: the base's vectors of every example (cached like the teacher's)
    blend_scores: dict[str, float] | None = None  # teacher_blend=auto: the dev score of each α weighed
    # the teacher's per-unit dev outputs (its cosine of every dev pair): the dev-pair evidence reads them
    dev_outputs: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def speedup(self) -> float | None:
        """How many times faster the student encodes the dev sentences than the teacher."""
        if self.dev_encode_seconds is None:
            return None
        student, teacher = self.dev_encode_seconds
        return teacher / student if student > 0 else None

    def record(self) -> dict[str, Any]:
        timing = None if self.dev_encode_seconds is None else {
            "student": round(self.dev_encode_seconds[0], 4), "teacher": round(self.dev_encode_seconds[1], 4),
            "student_speedup": round(self.speedup, 3) if self.speedup else None}
        lead = None if self.lead is None else {"delta": round(self.lead.value, 4), "ci": None if self.lead.interval
                                               is None else [round(bound, 4) for bound in self.lead.interval]}
        return {"model": self.name, "location": self.location, "dim": self.dim, "sentences": len(self.vectors),
                "cached": self.cached, "encode_seconds": round(self.seconds, 3), "cache_file": self.path,
                "dev_encode_seconds": timing, "dev_lead": lead, "blend": self.blend,
                "blend_scores": self.blend_scores}

    def gap_closed(self, base: float | None, student: float | None) -> float | None:
        """The share of the teacher's dev lead over the base that the student won: (student − base) / (teacher −
        base); None unless the teacher is ahead of the base (a share of a loss means nothing)."""
        if self.score is None or base is None or student is None or self.score <= base:
            return None
        return (student - base) / (self.score - base)


def dev_encode_seconds(student: Any, teacher: Any, texts: list[str], batch_size: int, max_length: int,
                       ) -> tuple[float, float]:
    """Both models encoding the same dev sentences (each with its own tokenizer and prompt), best of 2 each,
    alternated so a busy machine slows both alike; the first pass of each also warms it up."""
    import time

    best = [float("inf"), float("inf")]
    for _round in range(2):
        for index, model in enumerate((student, teacher)):
            started = time.perf_counter()
            model.encode(texts, batch_size=batch_size, max_length=max_length)
            best[index] = min(best[index], time.perf_counter() - started)
    return best[0], best[1]


def teacher_table(config: RunConfig, examples: Any, device: str, note: Note,
                  progress: Progress, trust_remote_code: bool = False,
                  allow_pickle: bool = False, evaluator: Any = None, student: Any = None,
                  base_dev: tuple[float, dict[str, Any]] | None = None,
                  teacher_source: ResolvedModel | Path | None = None, processes: Any = None) -> TeacherTable:
    """The teacher's vectors of every example (from its model, or looked up in its vectors file), its dev score
    weighed against the base's `base_dev` (score, per-unit outputs) when there is a dev set, and — for a model —
    its speed against `student` on the dev sentences. `teacher_source`: --teacher as check_run resolved it (None:
    resolved here). `processes`: the run's processes (train/compute.py), which encode the tables together (None:
    this process alone)."""
    assert config.teacher is not None
    if config.train.distillation.distill > 0:
        weights = config.train.distillation.distill, config.train.teacher.weight
        note(f"--teacher: the teacher replaces the base as the distillation target (distill={weights[0]} is not "
             f"applied; teacher_weight={weights[1]})")
    weigh = Weighing(config, evaluator, base_dev, note)
    source = teacher_source if teacher_source is not None else resolve_source(config.teacher)
    if isinstance(source, Path):
        table = _file_table(config, examples, note, weigh)
    else:
        table = _model_table(config, source, examples, device, note, progress, trust_remote_code, allow_pickle,
                             weigh, student, processes)
    table = dataclasses.replace(table, dev_outputs=dict(weigh.teacher_outputs) or None)
    return with_blend(table, config, weigh, examples, student, progress, note, processes)


def _model_table(config: RunConfig, resolved: ResolvedModel, examples: Any, device: str, note: Note,
                 progress: Progress, trust_remote_code: bool, allow_pickle: bool, weigh: Weighing,
                 student: Any, processes: Any) -> TeacherTable:
    """Load the teacher, weigh it on the dev set and time it against `student` on the dev sentences, then take its
    vectors of every example's text (cached), and let the teacher go."""
    from sentadapt.model.embedding_cache import cached_table
    from sentadapt.model.encoder import Encoder

    teacher = Encoder.load(resolved, device=device, trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
    limit = teacher.token_limit(config.train.max_length)
    note(f"teacher: {resolved.name} → {resolved.location} ({teacher.embedding_dim} dims, {teacher.pooling_name} "
         f"pooling, max length {limit})")
    score, lead, timing = None, None, None
    evaluator = weigh.evaluator
    if evaluator is not None:
        report = evaluator(teacher, batch_size=config.train.evaluation.eval_batch_size, intervals=False)
        score, lead = weigh(resolved.name, report)
        if student is not None:
            timing = dev_encode_seconds(student, teacher, list(evaluator.sentences)[:TIMED_SENTENCES],
                                        config.train.evaluation.eval_batch_size, limit)
    table = cached_table(teacher, examples.example_texts, len(examples), limit, config.train.evaluation.eval_batch_size,
                         partial(progress, ENCODING), processes)
    rows = len(table.vectors)
    note(f"teacher embeddings: cache hit ({rows} sentences)" if table.hit else
         f"teacher embeddings: computed {rows} sentences in {table.seconds:.1f} s")
    return TeacherTable(table.vectors, resolved.name, resolved.location, table.hit, table.seconds, str(table.path),
                        score, timing, lead)


def _file_table(config: RunConfig, examples: Any, note: Note, weigh: Weighing) -> TeacherTable:
    """The vectors file's rows for every example, in example order, written once to the cache; weighed on the dev
    set first when the file also holds every dev sentence."""
    import time

    from sentadapt.data.vectors import check_covers, read_vectors
    from sentadapt.model.embedding_cache import TEXT_CHUNK, file_table

    assert config.teacher is not None
    started = time.perf_counter()
    vectors = read_vectors(Path(config.teacher), config.train.teacher.text_field, config.train.teacher.vector_field)
    check_covers(vectors, examples.example_texts, len(examples), TEXT_CHUNK)
    note(f"teacher: vectors from {config.teacher} ({len(vectors.rows)} sentences, {vectors.dim} dims)")
    score, lead = None, None
    evaluator = weigh.evaluator
    if evaluator is not None:
        absent = vectors.missing(list(evaluator.sentences))
        if absent:
            note(f"teacher: {config.teacher} holds no vector for {len(absent)} of the {len(evaluator.sentences)} dev "
                 "sentences, so it cannot be weighed on the dev set; add them to compare it with the base first")
        else:
            score, lead = weigh(config.teacher, evaluator.score_vectors(vectors.lookup, Path(config.teacher).name))
    table = file_table(vectors, examples.example_texts, len(examples))
    return TeacherTable(table.vectors, config.teacher, str(Path(config.teacher).resolve()), table.hit,
                        time.perf_counter() - started, str(table.path), score, None, lead)
