"""The teacher weighed on the dev set before its corpus is encoded: its score and lead over the base with a paired
CI (`Weighing`, said in one line by `teacher_verdict`; a teacher that trails significantly stops the run unless
`--set teacher_check=off`). What the decision says of that lead after training is decision/rule.py's
(`teacher_lead_note`).

Blend targets (`--set teacher_blend=auto|α`, docs/teacher.md): the distillation target's similarities α · the
teacher's + (1 − α) · the base's; `auto` weighs α on the dev set by its rule, written before its study."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError
from sentadapt.events import Note, Progress

if TYPE_CHECKING:
    from sentadapt.config.schema import RunConfig
    from sentadapt.evaluation.evaluator import Delta


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
    from sentadapt.recipes.base import token_limit

    base = cached_table(student, examples.example_texts, len(examples), token_limit(student, config.train.max_length),
                        config.train.evaluation.eval_batch_size,
                        lambda total: progress("encoding with the base (once)", total), processes)
    note(f"blend target: α {alpha:g}; the base's vectors of {len(base.vectors)} sentences "
         + ("from the cache" if base.hit else f"computed in {base.seconds:.1f} s"))
    return dataclasses.replace(table, blend=alpha, base_vectors=base.vectors, blend_scores=scores)
