"""`export --adapters-only`: a LoRA run's adapters alone, in peft's layout, for users who keep one base model and
load several adapters onto it (a few MB instead of a whole model).

The run already saved them beside its merged model (sentadapt/model/lora.py, `lora-adapter/`); this copies them and
proves they reproduce the merged model: the base is loaded as its `adapter_config.json` names it, the adapters are
loaded onto it by transformers' own reader (`load_adapter`, what sentence-transformers calls too), and its vectors
must equal the run's on the verification sentences.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from sentadapt.errors import ExportError
from sentadapt.exporting.verify import COSINE_LIMIT, compare
from sentadapt.storage.run_folder import RunDir

if TYPE_CHECKING:
    import torch

    from sentadapt.events import Note
    from sentadapt.exporting.request import Check, ExportRequest
    from sentadapt.model.encoder import Encoder

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def write_adapters(encoder: Encoder, folder: Path, request: ExportRequest, texts: list[str],
                   reference: torch.Tensor, note: Note) -> list[Check]:
    from sentadapt.model.lora import ADAPTER_FOLDER

    source = Path(request.source)
    layout = RunDir(source).layout_folder() if RunDir(source).is_run() else source
    adapters = (layout or source) / ADAPTER_FOLDER
    if not all((adapters / name).is_file() for name in ADAPTER_FILES):
        raise ExportError(f"{request.source}: holds no LoRA adapters ({ADAPTER_FOLDER}/ missing: it was trained "
                          "without --lora); export the model without --adapters-only")
    for name in ADAPTER_FILES:
        shutil.copy2(adapters / name, folder / name)
    base = json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"]
    note(f"verifying on {len(texts)} sentences: the base ({base}) + load_adapter(OUT) against the run's model")
    return [compare("base + load_adapter(OUT)", reference, _base_with_adapters(base, folder, encoder).encode(texts),
                    min_cosine=COSINE_LIMIT)]


def _base_with_adapters(base: str, folder: Path, trained: Encoder) -> Encoder:
    from sentadapt.model.encoder import Encoder

    encoder = Encoder.load(base, device="cpu")
    if encoder.pooling_name != trained.pooling_name or len(encoder.head) != len(trained.head):
        raise ExportError(f"--adapters-only: the run's model pools with {trained.pooling_name}, its base {base} with "
                          f"{encoder.pooling_name}; the adapters alone would not reproduce it: export it merged")
    encoder.backbone.load_adapter(str(folder))
    return encoder


def usage(base: str) -> str:
    """The model card's usage section for an adapters-only export of a run trained on `base`."""
    return ("## Usage\n\nLoRA adapters (peft's layout), to load onto the base model they were trained on "
            f"(`{base}`):\n\n```python\nfrom sentence_transformers import SentenceTransformer\n\n"
            f"model = SentenceTransformer(\"{base}\")\nmodel.load_adapter(\"PATH\")\n"
            "vectors = model.encode([\"A man is playing a guitar.\", \"Someone plays music.\"])\n```\n\n"
            "With transformers: `AutoModel.from_pretrained(BASE)`, then `model.load_adapter(\"PATH\")` "
            "(needs peft), and the base's pooling. `sentadapt export RUN OUT` (without --adapters-only) writes the "
            "merged model instead.")
