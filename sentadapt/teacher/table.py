"""`adapt --teacher MODEL|FILE`: the teacher's vectors of every training example, the distillation target.

A model teacher encodes the examples' texts ONCE, before training (in eval mode, so without dropout; each model
tokenizes for itself, so the vocabularies may differ); a vectors file (data/vectors.py: .jsonl, .parquet, .npy +
.txt) is looked up by text instead. Either way the table is written to the cache as a .npy file
(`embedding_cache.cached_table` / `file_table`, keyed by the teacher and the texts): a second run on the same corpus,
or `--resume`, reads it back, and the process reads only each batch's rows (sentadapt/storage/rowfile.py; the loop puts
them in the batch, train/distill.py), so a 1M × 768 table (3 GB) stays on disk. Row i of the
table is example i of the recipe's examples (the sentence, an NLI premise, the first sentence of a pair: what
distillation's student side embeds, train/distill.py).

Before its corpus is encoded, the teacher is weighed on the dev set beside the base: its lead with a
paired-bootstrap CI, said in one line (`teacher_verdict`); a teacher that trails the base significantly stops the
run there, before its corpus is encoded (`--set teacher_check=off` distils it anyway: a student of a trailing
teacher can still gain; docs/teacher.md and research/experiments/teacher_check.py have what was measured).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.events import Note, Progress
from sentadapt.teacher.source import resolve_source
from sentadapt.teacher.weighing import Weighing, with_blend

if TYPE_CHECKING:
    from sentadapt.config.schema import RunConfig
    from sentadapt.evaluation.evaluator import Delta
    from sentadapt.model.resolve import ResolvedModel
    from sentadapt.storage.rowfile import RowFile

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
    resolved here). `processes`: the run's processes (train/ranks.py), which encode the tables together (None:
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
    from sentadapt.recipes.base import token_limit

    teacher = Encoder.load(resolved, device=device, trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
    limit = token_limit(teacher, config.train.max_length)
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
                         lambda total: progress(ENCODING, total), processes)
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
