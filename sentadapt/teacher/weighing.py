"""The teacher weighed on the dev set before its corpus is encoded: its score and lead over the base with a paired
CI (`Weighing`, said in one line by `teacher_verdict`; a teacher that trails significantly stops the run unless
`--set teacher_check=off`). What the decision says of that lead after training is decision/rule.py's
(`teacher_lead_note`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ConfigError
from sentadapt.events import Note

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
