"""Why a model's sentence space is weak: anisotropy, isotropy, spectra, frequency bias, top-k token removal, layers.

Pure functions on embeddings and tokens live in `metrics.py`; `states.py` runs the shared `Encoder` once per
sentence and hands every hidden layer to the reports; `topk.py` and `layers.py` hold ConSERT's frequent-token
removal and SG-OPT's layer × pooling sweep; `report.py` gathers inputs and runs the requested reports;
`plots.py` draws them (matplotlib, optional). Definitions and the JSON schema: docs/diagnostics.md.

This module imports nothing heavy, so the CLI can validate `--report` before torch loads.
"""

from __future__ import annotations

from sentadapt.errors import ConfigError
from sentadapt.registry import unknown_name_message

# the defaults `sentadapt diagnose` and `diagnose()` share with the reports under them, written once
SAMPLE_SENTENCES = 1000  # drawn from the corpus (seeded)
SAMPLE_SEED = 0  # of the sentence sample and the k-NN token sample
TOPK_STS = "stsb"  # top-k on STS-B test (all: the 7 STS test sets)
TOPK_MAX = 50  # the top-k curve removes up to this many frequent tokens
DIAGNOSE_BATCH_SIZE = 32  # sentences through the model at once (every hidden layer is kept)
LAYER_MIXES = ("last2avg", "firstlast")  # the layer sweep's layer mixes, mean-pooled (model/pooling.py)
LAYERS_BATCH_SIZE = 64  # the reports' own passes (hidden states, top-k removal, the layer sweep) when called alone

# name → what it needs besides the model ("sentences": a corpus sample; "pairs": labelled pairs or STS data)
REPORTS: dict[str, str] = {
    "anisotropy": "sentences",  # random-pair cosines per layer (Ethayarajh) + isotropy I(W) (Mu & Viswanath)
    "spectrum": "sentences",  # singular values of the centred sentence embeddings
    "alignment": "sentences",  # uniformity on the sample; alignment on positive pairs when there are any
    "frequency": "sentences",  # token-embedding norm and k-NN distance by frequency rank (BERT-flow)
    "topk": "pairs",  # ConSERT §5.1 / Fig. 4
    "layers": "pairs",  # SG-OPT Fig. 1
}


def parse_reports(spec: str | None) -> list[str] | None:
    """'anisotropy,topk' → names in canonical order; None or 'all' → None (every report that has its data)."""
    if spec is None or spec.strip().lower() == "all":
        return None
    names = [part.strip().lower() for part in spec.split(",") if part.strip()]
    if not names:
        raise ConfigError("--report: give 'all' or a comma-separated list of " + ", ".join(REPORTS))
    for name in names:
        if name not in REPORTS:
            raise ConfigError("--report: " + unknown_name_message("report", name, [*REPORTS, "all"]))
    return [name for name in REPORTS if name in names]
