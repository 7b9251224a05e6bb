"""The ONNX format: the whole sentence pipeline as one graph, run with onnxruntime.

Graph: inputs `input_ids`, `attention_mask` (int64, [batch, sequence]) → output `sentence_embedding`
(float32, [batch, dimension]): backbone, layer mix, token pooling, Dense head and normalisation are all
inside, so a deployment needs only a tokenizer and onnxruntime. (sentence-transformers' own ONNX
backend exports only the backbone and pools in torch.) Exported with torch's `torch.export`-based
exporter, which follows the model's code rather than one traced batch — the TorchScript tracer bakes
data-dependent branches such as "no padding in this batch" into the graph. `--quantize int8` adds
`model_int8.onnx`: dynamic int8 quantisation of the weights (onnxruntime.quantization).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentadapt.errors import ExportError
from sentadapt.exporting.verify import ONNX_MAX_ABS_LIMIT, compare

if TYPE_CHECKING:
    import torch

    from sentadapt.events import Note
    from sentadapt.exporting.request import Check, ExportRequest
    from sentadapt.model.encoder import Encoder

MODEL_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "sentence_embedding"
DESCRIPTION_FILE = "sentadapt_onnx.json"
OPSET = 18
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
TRACE_SENTENCES = ["a longer sentence so that the example batch has padding", "short"]


def write_onnx(encoder: Encoder, folder: Path, request: ExportRequest, texts: list[str], reference: torch.Tensor,
               note: Note) -> list[Check]:
    note("exporting the pipeline to ONNX (torch.onnx, torch.export-based)")
    export_graph(encoder, folder / MODEL_FILE)
    encoder.tokenizer.save_pretrained(folder)
    files = {"fp32": MODEL_FILE}
    if request.quantize == "int8":
        note("quantizing weights to int8 (onnxruntime dynamic quantization)")
        quantize_int8(folder / MODEL_FILE, folder / INT8_FILE)
        files["int8"] = INT8_FILE
    _write_description(encoder, folder, files)
    note(f"verifying on {len(texts)} sentences: onnxruntime against torch")
    checks = [compare("onnxruntime fp32 vs torch", reference,
                      onnx_encode(session(folder / MODEL_FILE), encoder, texts), max_abs=ONNX_MAX_ABS_LIMIT)]
    if "int8" in files:  # int8 drift is reported, not bounded: it is the price of the smaller, faster model
        checks.append(compare("onnxruntime int8 vs torch (drift)", reference,
                              onnx_encode(session(folder / INT8_FILE), encoder, texts)))
    return checks


def _pipeline_module(encoder: Encoder) -> torch.nn.Module:
    """`input_ids, attention_mask → sentence vectors` as a module with exactly those two inputs."""
    import torch

    class SentencePipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.encoder(input_ids, attention_mask)

    return SentencePipeline().eval()


def export_graph(encoder: Encoder, path: Path) -> None:
    import torch

    example = encoder.collate(encoder.tokenize_ids(TRACE_SENTENCES))
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    dynamic = {name: {0: batch, 1: sequence} for name in INPUT_NAMES}
    try:
        with _quiet():
            torch.onnx.export(
                _pipeline_module(encoder), (example.input_ids, example.attention_mask), str(path),
                input_names=list(INPUT_NAMES), output_names=[OUTPUT_NAME], dynamic_shapes=dynamic,
                opset_version=OPSET, dynamo=True, external_data=False, verbose=False,
            )
    except Exception as error:  # torch.export's many failure types (e.g. T5's attention under symbolic shapes)
        model_type = getattr(encoder.backbone.config, "model_type", "?")
        raise ExportError(f"--format onnx: torch.onnx could not export this {model_type} model ({_root_cause(error)}"
                          "); export --format sentence-transformers or hf instead") from None


def _root_cause(error: BaseException) -> str:
    """The first line of the innermost error: the exporter wraps the model's own failure in a report of its steps."""
    while (inner := error.__cause__ or error.__context__) is not None:
        error = inner
    line = next((text.strip() for text in str(error).splitlines() if text.strip()), "")
    return f"{type(error).__name__}: {_TERMINAL_COLOURS.sub('', line)[:160]}"


def quantize_int8(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet():
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporters report progress and advice through warnings and the root logger; we report our own."""
    loggers = [logging.getLogger(), logging.getLogger("torch.onnx")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def session(path: Path, threads: int | None = None) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


CHECK_BATCH_SIZE = 64  # sentences per ONNX Runtime call while the export is checked


def onnx_encode(onnx_session: Any, encoder: Encoder, texts: Sequence[str],
                batch_size: int = CHECK_BATCH_SIZE) -> torch.Tensor:
    """Sentence vectors from an ONNX export, tokenized and batched exactly as `Encoder.encode` does."""
    import torch

    ids = encoder.tokenize_ids(texts)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
    vectors: torch.Tensor | None = None
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        batch = encoder.collate([ids[i] for i in chunk])
        (output,) = onnx_session.run([OUTPUT_NAME], {"input_ids": batch.input_ids.numpy(),
                                                     "attention_mask": batch.attention_mask.numpy()})
        if vectors is None:
            vectors = torch.empty((len(texts), output.shape[-1]), dtype=torch.float32)
        vectors[torch.as_tensor(chunk)] = torch.from_numpy(output).float()
    return vectors if vectors is not None else torch.empty((0, encoder.embedding_dim))


def _write_description(encoder: Encoder, folder: Path, files: dict[str, str]) -> None:
    description = {
        "files": files,
        "inputs": {name: {"dtype": "int64", "shape": ["batch", "sequence"]} for name in INPUT_NAMES},
        "output": {OUTPUT_NAME: {"dtype": "float32", "shape": ["batch", encoder.embedding_dim]}},
        "pipeline": "backbone + pooling + dense head + normalize",
        "pooling": encoder.pooling_name,
        "normalize": encoder.normalize,
        "max_length": encoder.max_length,
        "opset": OPSET,
    }
    (folder / DESCRIPTION_FILE).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
