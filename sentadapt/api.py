"""The public Python API: what each `sentadapt` command does, as a function you can call from a notebook or a
pipeline. Each takes its command's options as keyword arguments with the same defaults, checks them the same way
(the same `sentadapt.errors` types with the one-line messages the CLI prints), and returns a result object; the CLI
commands are these calls plus parsing and rendering. Nothing prints: progress goes to an optional `progress`
callback ((description, total) → a context manager yielding advance(n)) and notes to an optional `note(line)`.

    from sentadapt import adapt, evaluate, export
    run = adapt("corpus.txt", output="runs/x", dev="dev.tsv")
    result = evaluate(["base-model", "runs/x"], pairs=["dev.tsv"])
    export("runs/x", "out/", format="onnx")

Every name in `__all__` is also an attribute of the `sentadapt` package, imported on first use, so
`import sentadapt` stays light (no torch). A new public call: import it here and add it to `__all__`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sentadapt.diagnostics.analysis import DiagnoseResult, diagnose
from sentadapt.evaluation.evaluate import EvalResult, evaluate
from sentadapt.exporting import ExportResult, export
from sentadapt.pairs.chosen import ChosenPairs
from sentadapt.pairs.devset import ProposedPairs
from sentadapt.pairs.labelling import propose_pairs
from sentadapt.run.dispatch import AdaptResult, adapt
from sentadapt.run.redecide import DecideResult, decide_again

if TYPE_CHECKING:
    from sentadapt.model.encoder import Encoder

__all__ = (  # sentadapt.__getattr__ reads this tuple: each name here is also sentadapt.NAME
    "AdaptResult",
    "ChosenPairs",
    "DecideResult",
    "DiagnoseResult",
    "Encoder",  # Encoder.load(model or run directory).encode(texts): vectors with the pooling it was trained with
    "EvalResult",
    "ExportResult",
    "ProposedPairs",
    "adapt",
    "decide_again",
    "diagnose",
    "evaluate",
    "export",
    "propose_pairs",
)


def __getattr__(name: str) -> Any:
    """`Encoder` imports torch: loaded when first asked for, so importing the API (and `import sentadapt`) does not."""
    if name == "Encoder":
        from sentadapt.model.encoder import Encoder

        return Encoder
    raise AttributeError(f"module 'sentadapt.api' has no attribute '{name}'")
