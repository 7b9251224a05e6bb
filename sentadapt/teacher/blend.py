"""Blend targets (`--set teacher_blend=auto|α`, docs/teacher.md): the distillation target's similarities α · the
teacher's + (1 − α) · the base's; `auto` weighs α on the dev set by its rule, written before its study."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from sentadapt.events import Note, Progress

if TYPE_CHECKING:
    from sentadapt.config.schema import RunConfig
    from sentadapt.teacher.weighing import Weighing

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
