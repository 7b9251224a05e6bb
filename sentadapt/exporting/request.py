"""What an export is asked to do and what it produced: shared by the pipeline, the writers and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sentadapt.options import VECTOR_DTYPE
from sentadapt.storage.space import bytes_on_disk, size_text

FORMATS = ("sentence-transformers", "hf", "onnx")
EXPORT_DTYPES = ("fp32", "fp16")
QUANTIZATIONS = ("int8",)
CHECKPOINT_CHOICES = "best | last | a step number"
# what `sentadapt export` and `export()` do when not told: written once
DEFAULT_FORMAT, DEFAULT_CHECKPOINT = "sentence-transformers", "best"


@dataclass(frozen=True)
class ExportRequest:
    source: str
    output: Path
    format: str = DEFAULT_FORMAT
    dtype: str = VECTOR_DTYPE
    pooling: str | None = None
    normalize: bool = False
    quantize: str | None = None
    checkpoint: str = DEFAULT_CHECKPOINT
    overwrite: bool = False
    trust_remote_code: bool = False
    allow_pickle: bool = False
    adapters_only: bool = False  # a LoRA run's adapters alone (peft's layout), for loading onto the base
    dim: int | None = None  # --dim: the model outputs its vectors' first `dim` coordinates (Encoder.keep_prefix)


@dataclass(frozen=True)
class Check:
    """The export's vectors against sentadapt's encoder on the same sentences."""

    label: str
    sentences: int
    min_cosine: float
    max_abs: float
    limit: str  # what had to hold, e.g. "cosine ≥ 0.9999"; "" when only reported (int8 drift)

    def line(self) -> str:
        bound = f"needed {self.limit}" if self.limit else "reported, not bounded"
        return (f"verified: {self.label} on {self.sentences} sentences: min cosine {self.min_cosine:.6f}, max |Δ| "
                f"{self.max_abs:.2e} ({bound})")


@dataclass
class ExportResult:
    output: Path
    format: str
    dtype: str
    source: str  # what was exported, in words
    pooling: str
    dimension: int
    files: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What `sentadapt export` prints: what was written, then each check of its vectors."""
        size = size_text(sum(bytes_on_disk(self.output / name) for name in self.files))
        return [f"wrote {self.output} ({self.format}, {self.dtype}): {len(self.files)} files, {size}; pooling "
                f"{self.pooling}, dimension {self.dimension}; from {self.source}",
                *[check.line() for check in self.checks]]
