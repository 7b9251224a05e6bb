"""A stand-in for a CPU where one more encoder pass costs much (issue 84): with this folder first on PYTHONPATH and
PASS_PENALTY_S set, every forward of a transformers model (the encoder's backbone, whichever checkout runs) first
sleeps that many seconds. The default's own timing of the training pass goes through the same forward, so it sees the
penalty as a CPU's fixed cost per pass would show in it; a plan fixed in advance does not.

    PYTHONPATH=bench/pass_penalty:../old PASS_PENALTY_S=0.5 python -m sentadapt adapt ...

A sleep leaves the CPU idle where a real pass's overhead keeps it busy: wall time is what it stands in for.
"""

from __future__ import annotations

import os

if os.environ.get("PASS_PENALTY_S"):
    import time

    import torch

    _PENALTY_S = float(os.environ["PASS_PENALTY_S"])

    def _sleep_before_a_pass(module: torch.nn.Module, _inputs: object) -> None:
        # the backbone (a transformers PreTrainedModel; its layers are plain modules), named rather than imported:
        # transformers is left for the run to import as it does
        if any(kind.__name__ == "PreTrainedModel" for kind in type(module).__mro__):
            time.sleep(_PENALTY_S)

    torch.nn.modules.module.register_module_forward_pre_hook(_sleep_before_a_pass)
