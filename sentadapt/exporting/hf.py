"""The Hugging Face format: an `AutoModel`-loadable backbone and its tokenizer.

The format has no place for pooling, a Dense head or normalisation: the pooling (and normalisation)
is written in the model card with code that reproduces it, and a model with a Dense head (CLSR's MLP)
is refused rather than exported without it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING

from sentadapt.errors import ExportError
from sentadapt.exporting.verify import COSINE_LIMIT, FP16_COSINE_LIMIT, compare

if TYPE_CHECKING:
    import torch

    from sentadapt.events import Note
    from sentadapt.exporting.request import Check, ExportRequest
    from sentadapt.model.encoder import Encoder


def write_hf(encoder: Encoder, folder: Path, request: ExportRequest, texts: list[str], reference: torch.Tensor,
             note: Note) -> list[Check]:
    import torch

    from sentadapt.model.backbone import loader_name
    from sentadapt.model.encoder import Encoder

    if len(encoder.head):
        layers = f"{len(encoder.head)} layer" + ("s" if len(encoder.head) > 1 else "")
        raise ExportError(f"{request.source}: has a Dense head ({layers}, e.g. CLSR's MLP) that the "
                          "hf format cannot hold; use --format sentence-transformers or --format onnx")
    backbone = encoder.backbone
    if request.dtype == "fp16":
        backbone = copy.deepcopy(backbone).to(torch.float16)  # the source encoder stays fp32 for comparisons
    backbone.save_pretrained(folder, safe_serialization=True)
    encoder.tokenizer.save_pretrained(folder)
    loader = loader_name(backbone.config)
    note(f"verifying on {len(texts)} sentences: {loader}(OUT) + the card's pooling against the source")
    reread = Encoder.load(folder, device="cpu")  # the same class and AutoTokenizer under the hood
    reread.configure(pooling=encoder.pooling, normalize=encoder.normalize)
    reread.float()
    limit = COSINE_LIMIT if request.dtype == "fp32" else FP16_COSINE_LIMIT
    return [compare(f"{loader}(OUT) + pooling from the card", reference, reread.encode(texts), min_cosine=limit)]
