"""The teacher's one home (`adapt --teacher MODEL|FILE`, docs/teacher.md). run/ calls it at three seams:

- check (run/plan.py): `check_teacher` resolves the teacher and refuses a bad one before anything loads;
- inputs (run/inputs.py): `teacher_table` weighs it on the dev set, stops a trailing one, takes its vectors of
  every training example (a model's, cached; or a vectors file's rows) and the blend target; the loop reads the table's
  rows into each batch (train/distill.py turns them into the distillation term);
- decide (run/finish.py): `teacher_lead_note` says when a run keeps the base although the teacher's dev lead is
  established.

One module, table.py, in three sections: what --teacher names, the teacher weighed on the dev set (its lead and the
blend target's α), the table; the vectors-file reader is data/vectors.py.
"""

from __future__ import annotations

from sentadapt.teacher.table import TeacherTable, check_teacher, resolve_source, teacher_table

__all__ = ["TeacherTable", "check_teacher", "resolve_source", "teacher_table"]
