"""`adapt --teacher MODEL`: the teacher's vectors of every training example, the distillation target.

The teacher encodes the examples' texts ONCE, before training (in eval mode, so without dropout; each model
tokenizes for itself, so the vocabularies may differ), and the table is cached on disk by
`embedding_cache.cached_table` (keyed by the teacher's weights, pooling, max length and the texts): a second run
on the same corpus, or `--resume`, reads it back. Row i of the table is example i of the recipe's examples (the
sentence, an NLI premise, the first sentence of a pair: what `distillation_student` embeds); the loop copies a
batch's rows into the batch (train/distill.py), so the teacher never runs inside a training step and is freed
once the table is made. Memory: one float32 matrix examples × teacher width on the host (1M sentences × 384 ×
4 B = 1.5 GB); a batch carries its own rows only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from torch import Tensor

    from sentadapt.config import RunConfig
    from sentadapt.resolve import ResolvedModel

ENCODING = "encoding with the teacher (once)"  # the progress bar's description


@dataclass(frozen=True)
class TeacherTable:
    """The teacher's vectors of the training examples (row i = example i) and what metrics.json says of them."""

    vectors: Tensor  # float32 (examples, teacher width), CPU
    name: str  # as given to --teacher
    location: str  # the resolved folder or Hub id
    cached: bool  # read from the embedding cache (no encoding in this run)
    seconds: float  # spent encoding (0 on a cache hit)
    path: str  # the cache file
    score: float | None = None  # the teacher's own dev score with the run's dev evaluator (None: no dev set)
    # seconds to encode the dev sentences, best of 2 each, alternated in this process: (student, teacher)
    dev_encode_seconds: tuple[float, float] | None = None

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
        return {"model": self.name, "location": self.location, "dim": self.dim, "sentences": len(self.vectors),
                "cached": self.cached, "encode_seconds": round(self.seconds, 3), "cache_file": self.path,
                "dev_encode_seconds": timing}

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


def check_teacher(teacher: str, base_location: str) -> None:
    """Before any weights load: the teacher must resolve to a model that holds weights and must not be the base
    model itself."""
    from sentadapt.resolve import check_has_weights

    resolved = resolve_teacher(teacher)
    if resolved.location == base_location:
        raise ConfigError(f"--teacher {teacher}: is the base model itself; a teacher must be another, stronger "
                          "model")
    try:
        check_has_weights(resolved)
    except ModelError as error:
        raise ModelError(f"--teacher {error}") from None


def resolve_teacher(teacher: str) -> ResolvedModel:
    """resolve_model's ModelError, naming the option: "--teacher PATH: no such model folder"."""
    from sentadapt.resolve import resolve_model

    try:
        return resolve_model(teacher)
    except ModelError as error:
        raise ModelError(f"--teacher {error}") from None


def teacher_table(config: RunConfig, examples: Any, device: str, note: Callable[[str], None],
                  progress: Callable[[str, int], Any], trust_remote_code: bool = False,
                  allow_pickle: bool = False, evaluator: Any = None, student: Any = None) -> TeacherTable:
    """Load the teacher, take its vectors of every example's text (cached), score it on the run's dev set when
    there is one and time it against `student` on the dev sentences (what the student is compared with in
    metrics.json and the summary), and let the teacher go."""
    from sentadapt.embedding_cache import cached_table
    from sentadapt.encoder import Encoder
    from sentadapt.recipes.base import token_limit

    assert config.teacher is not None
    resolved = resolve_teacher(config.teacher)  # check_run has compared it with the base
    teacher = Encoder.load(resolved, device=device, trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
    limit = token_limit(teacher, config.train.max_length)
    note(f"teacher: {resolved.name} → {resolved.location} ({teacher.embedding_dim} dims, {teacher.pooling_name} "
         f"pooling, max length {limit})")
    if config.train.distill > 0:
        note(f"--teacher: the teacher replaces the base as the distillation target (distill={config.train.distill} "
             f"is not applied; teacher_weight={config.train.teacher_weight})")
    table = cached_table(teacher, examples.example_texts, len(examples), limit, config.train.eval_batch_size,
                         lambda total: progress(ENCODING, total))
    rows = len(table.vectors)
    note(f"teacher embeddings: cache hit ({rows} sentences)" if table.hit else
         f"teacher embeddings: computed {rows} sentences in {table.seconds:.1f} s")
    score, timing = None, None
    if evaluator is not None:
        score = evaluator(teacher, batch_size=config.train.eval_batch_size, intervals=False).average
        note(f"teacher on the dev set: {score:.2f}")
        if student is not None:
            timing = dev_encode_seconds(student, teacher, list(evaluator.sentences), config.train.eval_batch_size,
                                        limit)
    return TeacherTable(table.vectors, resolved.name, resolved.location, table.hit, table.seconds, str(table.path),
                        score, timing)

