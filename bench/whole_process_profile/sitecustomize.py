"""torch.profiler over a whole process, for comparing what two checkouts run (issue 84): with this folder first on
PYTHONPATH and PROFILE_OUT set, the process's CPU operators are profiled from start to exit, and PROFILE_OUT receives
the table of each operator's calls and self CPU time (the calls are the machine-independent part: a CPU that cannot
run the issue's machine's kernels can still count what a step asks of them).

    PYTHONPATH=bench/whole_process_profile:../old PROFILE_OUT=old.txt python -m sentadapt adapt ...
"""

from __future__ import annotations

import atexit
import os

if os.environ.get("PROFILE_OUT"):
    from torch.profiler import ProfilerActivity, profile

    _profile = profile(activities=[ProfilerActivity.CPU])
    _profile.__enter__()

    def _write() -> None:
        _profile.__exit__(None, None, None)
        averages = _profile.key_averages()
        with open(os.environ["PROFILE_OUT"], "w", encoding="utf-8") as handle:
            handle.write(averages.table(sort_by="self_cpu_time_total", row_limit=60, max_name_column_width=60))
            handle.write(f"\nevents: {sum(event.count for event in averages)}\n")

    atexit.register(_write)
