"""Comparing an export's vectors with sentadapt's encoder on the same sentences."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentadapt.errors import ExportError
from sentadapt.exporting.request import Check

if TYPE_CHECKING:
    import torch

# Built-in verification sample: short and long, punctuation, digits, casing, accents, an emoji, a
# sentence longer than small max lengths (truncation), and a repeated one (deduplication). Models whose
# position table is shorter than their max length need their own sentences (`--sentences FILE`).
SAMPLE_SENTENCES = [
    "A man is playing a guitar.",
    "A woman is slicing an onion in the kitchen.",
    "The server returned HTTP 503 after the deploy at 02:14.",
    "DNS resolution times out for internal hosts on the VPN.",
    "Kids are playing football in the park while their parents watch.",
    "Stock markets fell sharply on Tuesday.",
    "Reset your password from the account settings page.",
    "The backup job failed because the disk was full.",
    "Ein Mann spielt Gitarre.",
    "Le café est très bon ici.",
    "I love this! 😀",
    "ok",
    "?",
    "Q3 revenue grew 12% year over year, beating analyst expectations by a wide margin.",
    "The quick brown fox jumps over the lazy dog.",
    "Two dogs are running through a field of tall grass.",
    "Restart the node, then check the logs for OOM errors.",
    "A cat sits on the windowsill.",
    "The meeting has been moved to Thursday afternoon.",
    "Type 'sudo systemctl restart nginx' and press Enter.",
    " ".join(["This sentence is long so that small maximum lengths cut it."] * 5),
    "A man is playing a guitar.",
]

COSINE_LIMIT = 0.9999  # the acceptance bound for sentence-transformers and hf exports in fp32
FP16_COSINE_LIMIT = 0.999  # fp16 weights: rounding, not a wiring error, moves vectors this much
ONNX_MAX_ABS_LIMIT = 1e-4  # fp32 ONNX graph vs torch


def compare(label: str, reference: torch.Tensor, candidate: torch.Tensor, min_cosine: float | None = None,
            max_abs: float | None = None) -> Check:
    """Per-sentence cosine and element-wise difference; raise ExportError when a given limit does not hold."""
    import torch

    candidate = candidate.detach().float().cpu()
    cosines = torch.nn.functional.cosine_similarity(reference, candidate, dim=-1)
    limits = [*([f"cosine ≥ {min_cosine:g}"] if min_cosine is not None else []),
              *([f"max |Δ| ≤ {max_abs:g}"] if max_abs is not None else [])]
    check = Check(label, len(reference), float(cosines.min()), float((reference - candidate).abs().max()),
                  ", ".join(limits))
    too_far = (min_cosine is not None and not check.min_cosine >= min_cosine) or (
        max_abs is not None and not check.max_abs <= max_abs)
    if too_far:
        raise ExportError(f"verification failed: {label} on {check.sentences} sentences: min cosine "
                          f"{check.min_cosine:.6f}, max |Δ| {check.max_abs:.2e} (needed {check.limit}); nothing "
                          "was written")
    return check
