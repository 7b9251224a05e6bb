"""`sentadapt diagnose`: gather the inputs once, run the requested reports on a model, describe the result.

Inputs (decided before any model loads, so bad input fails fast):
- the **sentence sample** (anisotropy, spectrum, alignment/uniformity, frequency): `--corpus`, else the sentences
  of `--pairs`, else STS-B test; `sample` of them at random (seeded), each sentence once;
- **labelled pairs** for top-k and the layer sweep: `--pairs` when given (your data wins), else STS from the data
  directory: STS-B test (+ the other six test sets with `sts="all"`) for top-k, STS-B dev for the sweep;
- **token frequencies** for top-k: the corpus when given (up to FREQUENCY_SENTENCES of it), else the sentences
  of the top-k pairs (ConSERT counts on STS-B test);
- **positive pairs** for alignment: pairs whose gold score is in the top fifth of the scale (STS-B dev: > 4
  of 0–5, as SimCSE), from `--pairs` or STS-B dev; without them only uniformity is reported;
- with none of these (no corpus, no pairs, no STS file in the data directory) and `bundled_sample`, the
  sample shipped in the package (sentadapt/data/sample/) stands in for `--corpus` and `--pairs`.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sentadapt.data.pair_files import ScoredPairs, read_scored_pairs
from sentadapt.diagnostics import DIAGNOSE_BATCH_SIZE, REPORTS, SAMPLE_SEED, SAMPLE_SENTENCES, TOPK_MAX, TOPK_STS
from sentadapt.diagnostics.verdicts import (
    alignment_verdict,
    cosine_verdict,
    frequency_verdict,
    layers_verdict,
    spectrum_verdict,
    topk_verdict,
)
from sentadapt.errors import ConfigError, DataError

if TYPE_CHECKING:  # torch loads when a model does, not when inputs are checked
    import torch

    from sentadapt.events import Progress
    from sentadapt.model.encoder import Encoder

SCHEMA = "sentadapt.diagnose/1"
FREQUENCY_SENTENCES = 100_000  # token counting is cheap, but a 10M-line corpus need not be read for a top-50 list
POSITIVE_FRACTION = 0.8  # positives: gold ≥ min + 0.8 (max − min), i.e. > 4 on STS-B's 0–5
STS_SCOPES = ("stsb", "all")
SEVEN_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


@dataclass
class DiagnoseInputs:
    reports: list[str]
    sentences: list[str] = field(default_factory=list)
    sentence_source: str = ""
    frequency_texts: list[str] = field(default_factory=list)
    frequency_source: str = ""
    topk_tasks: dict[str, ScoredPairs] = field(default_factory=dict)
    sweep_pairs: ScoredPairs | None = None
    sweep_source: str = ""
    positives: ScoredPairs | None = None
    positives_source: str = ""
    skipped: dict[str, str] = field(default_factory=dict)  # report → why it was left out (default reports only)
    bundled_sample: bool = False  # the package's own sample stood in for missing data


def gather_inputs(
    requested: list[str] | None,
    corpus: Path | None = None,
    pairs: Path | None = None,
    data_dir: Path | None = None,
    sample: int = SAMPLE_SENTENCES,
    seed: int = SAMPLE_SEED,
    sts: str = TOPK_STS,
    bundled_sample: bool = False,
) -> DiagnoseInputs:
    """Read what the reports need. `requested` None = every report that has its data (the rest are skipped).
    `bundled_sample`: with no data at all, use the sample shipped in the package instead of failing."""
    if sample < 2:
        raise ConfigError(f"--sample {sample}: need at least 2 sentences to compare")
    if sts not in STS_SCOPES:
        raise ConfigError(f"--sts: '{sts}' is not one of {', '.join(STS_SCOPES)}")
    use_bundled = bundled_sample and corpus is None and pairs is None and not has_sts_files(data_dir)
    if use_bundled:
        from sentadapt.data.bundled import sample_corpus, sample_pairs

        corpus, pairs = sample_corpus(), sample_pairs()
    user_pairs = read_scored_pairs(pairs) if pairs is not None else None
    if user_pairs is not None:
        user_pairs.check_usable()
    corpus_sentences = _read_corpus(corpus) if corpus is not None else None
    inputs = DiagnoseInputs(reports=[], bundled_sample=use_bundled)
    _choose_sentences(inputs, corpus, corpus_sentences, pairs, user_pairs, data_dir, sample, seed)
    _choose_labelled(inputs, pairs, user_pairs, data_dir, sts)
    if corpus_sentences is not None:
        inputs.frequency_texts = _sample(corpus_sentences, FREQUENCY_SENTENCES, seed)
        inputs.frequency_source = f"{corpus} ({len(inputs.frequency_texts)} sentences)"
    elif inputs.topk_tasks:  # ConSERT counts on STS-B test, whichever tasks are scored
        counted = inputs.topk_tasks.get("stsb") or next(iter(inputs.topk_tasks.values()))
        inputs.frequency_texts = _pair_sentences(counted)
        inputs.frequency_source = f"{counted.source} ({len(inputs.frequency_texts)} sentences)"
    _select_reports(inputs, requested)
    return inputs


def has_sts_files(data_dir: Path | None) -> bool:
    """Whether the data directory holds an STS file diagnose reads (STS-B test for top-k, dev for the sweep)."""
    return data_dir is not None and any((data_dir / f"stsb.{split}.jsonl").is_file() for split in ("test", "dev"))


def _read_corpus(path: Path) -> list[str]:
    from sentadapt.data.corpus import corpus_files, read_corpus

    return read_corpus(corpus_files([path])).sentences


def _sample(sentences: list[str], size: int, seed: int) -> list[str]:
    """`size` sentences at random (seeded), in their original order; all of them when there are fewer."""
    if len(sentences) <= size:
        return list(sentences)
    keep = sorted(random.Random(seed).sample(range(len(sentences)), size))
    return [sentences[i] for i in keep]


def _choose_sentences(
    inputs: DiagnoseInputs, corpus: Path | None, corpus_sentences: list[str] | None, pairs: Path | None,
    user_pairs: ScoredPairs | None, data_dir: Path | None, sample: int, seed: int,
) -> None:
    if corpus_sentences is not None:
        pool, source = corpus_sentences, str(corpus)
    elif user_pairs is not None:
        pool, source = _pair_sentences(user_pairs), f"{pairs} (sentences of the pairs)"
    elif data_dir is not None and (data_dir / "stsb.test.jsonl").is_file():
        pool, source = _pair_sentences(_load_sts("stsb", "test", data_dir)), "STS-B test sentences"
    else:
        return
    inputs.sentences = _sample(pool, sample, seed)
    inputs.sentence_source = f"{source}: {len(inputs.sentences)} of {len(pool)} sentences (seed {seed})"


def _choose_labelled(
    inputs: DiagnoseInputs, pairs: Path | None, user_pairs: ScoredPairs | None, data_dir: Path | None, sts: str,
) -> None:
    if user_pairs is not None:
        name = Path(str(pairs)).name
        inputs.topk_tasks = {name: user_pairs}
        inputs.sweep_pairs, inputs.sweep_source = user_pairs, name
        inputs.positives, inputs.positives_source = _positives(user_pairs), name
        return
    if data_dir is None:
        return
    if (data_dir / "stsb.test.jsonl").is_file():
        names = SEVEN_TASKS if sts == "all" else ("stsb",)
        inputs.topk_tasks = {name: _load_sts(name, "test", data_dir) for name in names}
    if (data_dir / "stsb.dev.jsonl").is_file():
        dev = _load_sts("stsb", "dev", data_dir)
        inputs.sweep_pairs, inputs.sweep_source = dev, "STS-B dev"
        inputs.positives, inputs.positives_source = _positives(dev), "STS-B dev, gold > 4"


def _load_sts(name: str, split: str, data_dir: Path) -> ScoredPairs:
    from sentadapt.evaluation.tasks import load_task

    return load_task(name, split, data_dir)


def _pair_sentences(pairs: ScoredPairs) -> list[str]:
    return list(dict.fromkeys([*pairs.sentence1, *pairs.sentence2]))


def _positives(pairs: ScoredPairs) -> ScoredPairs | None:
    low, high = min(pairs.scores), max(pairs.scores)
    threshold = low + POSITIVE_FRACTION * (high - low)
    positives = ScoredPairs(source=pairs.source)
    for s1, s2, score in zip(pairs.sentence1, pairs.sentence2, pairs.scores):
        if score > threshold:
            positives.append(s1, s2, score)
    return positives if len(positives) else None


_MISSING = {
    "sentences": "needs sentences; pass --corpus FILE (one sentence per line), --pairs FILE or --data-dir DIR "
                 "with stsb.test.jsonl",
    "topk": "needs labelled pairs; pass --pairs FILE (sentence1, sentence2, score) or --data-dir DIR with "
            "stsb.test.jsonl",
    "layers": "needs labelled pairs; pass --pairs FILE (sentence1, sentence2, score) or --data-dir DIR with "
              "stsb.dev.jsonl",
}


def _select_reports(inputs: DiagnoseInputs, requested: list[str] | None) -> None:
    available = {
        "sentences": len(inputs.sentences) >= 2,
        "topk": bool(inputs.topk_tasks),
        "layers": inputs.sweep_pairs is not None,
    }
    for name in requested or list(REPORTS):
        need = "sentences" if REPORTS[name] == "sentences" else name
        if available[need]:
            inputs.reports.append(name)
        elif requested is not None:
            raise DataError(f"--report {name}: {_MISSING[need]}")
        else:
            inputs.skipped[name] = _MISSING[need]
    if not inputs.reports:
        if inputs.sentence_source:  # a corpus was given, too small: say so, not to pass one (issue 82)
            raise DataError(f"{inputs.sentence_source.rsplit(':', 1)[0]}: {len(inputs.sentences)} sentence"
                            f"{'' if len(inputs.sentences) == 1 else 's'}; the diagnostics compare sentences with "
                            "each other: pass at least 2 (a few hundred give steady figures), or --pairs FILE")
        raise DataError("nothing to diagnose: pass --corpus FILE (one sentence per line), --pairs FILE "
                        "(sentence1, sentence2, score) or --data-dir DIR with the STS files")


# ---------------------------------------------------------------------------------------------- results


@dataclass
class Diagnosis:
    """Every figure for one model; a report that did not run is None."""

    model: str
    pooling: str
    pooling_source: str
    num_layers: int
    dim: int
    anisotropy: dict[str, Any] | None = None
    spectrum: dict[str, Any] | None = None
    alignment: dict[str, Any] | None = None
    frequency: dict[str, Any] | None = None
    topk: dict[str, Any] | None = None
    layers: dict[str, Any] | None = None
    seconds: float = 0.0

    def headline(self) -> dict[str, float]:
        """The comparable numbers, flat (what `--compare` puts side by side and the JSON 'delta' subtracts)."""
        figures: dict[str, float] = {}
        if self.anisotropy:
            figures["sentence_cosine"] = self.anisotropy["sentence_cosine"]
            figures["token_cosine_last_layer"] = self.anisotropy["token_cosine_per_layer"][-1]
            figures["isotropy"] = self.anisotropy["isotropy"]
        if self.spectrum:
            for key in ("top1_share", "top10_share", "effective_rank"):
                figures[key] = self.spectrum[key]
        if self.alignment:
            if self.alignment["alignment"] is not None:
                figures["alignment"] = self.alignment["alignment"]
            figures["uniformity"] = self.alignment["uniformity"]
        if self.frequency:
            figures["frequency_rank_norm_spearman"] = self.frequency["rank_norm_spearman"]
        if self.topk:
            for key in ("k0", "best_k", "best", "gain"):
                figures[f"topk_{key}"] = self.topk[key]
        if self.layers:
            figures["layers_best"] = self.layers["best"]["spearman"]
            figures["layers_model_pooling"] = self.layers["model_pooling"]["spearman"]
        return figures

    def verdicts(self) -> dict[str, str]:
        """report name → one plain-language line."""
        lines: dict[str, str] = {}
        if self.anisotropy:
            lines["anisotropy"] = cosine_verdict(self.anisotropy["sentence_cosine"])
        if self.spectrum:
            lines["spectrum"] = spectrum_verdict(self.spectrum["top1_share"], self.spectrum["effective_rank"],
                                                 self.dim)
        if self.alignment:
            lines["alignment"] = alignment_verdict(self.alignment["alignment"], self.alignment["uniformity"])
        if self.frequency:
            lines["frequency"] = frequency_verdict(self.frequency["rank_norm_spearman"])
        if self.topk:
            lines["topk"] = topk_verdict(self.topk["best_k"], self.topk["gain"])
        if self.layers:
            best, own = self.layers["best"], self.layers["model_pooling"]
            lines["layers"] = layers_verdict(best["pooling"], best["spearman"], own["pooling"], own["spearman"])
        return lines

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model, "pooling": self.pooling, "pooling_source": self.pooling_source,
            "num_layers": self.num_layers, "dim": self.dim, "seconds": round(self.seconds, 3),
            **{name: getattr(self, name) for name in REPORTS},
            "headline": self.headline(), "verdicts": self.verdicts(),
        }


def comparison_dict(
    diagnoses: list[Diagnosis], inputs: DiagnoseInputs, settings: dict[str, object]
) -> dict[str, object]:
    """The `--json` document (schema in docs/diagnostics.md)."""
    payload: dict[str, object] = {
        "schema": SCHEMA,
        "settings": settings,
        "sources": {"sentences": inputs.sentence_source, "frequencies": inputs.frequency_source,
                    "topk": [pairs.source for pairs in inputs.topk_tasks.values()], "layers": inputs.sweep_source,
                    "positives": inputs.positives_source},
        "reports": inputs.reports,
        "skipped": inputs.skipped,
        "models": [diagnosis.to_dict() for diagnosis in diagnoses],
    }
    if len(diagnoses) == 2:
        first, second = (d.headline() for d in diagnoses)
        payload["delta"] = {key: second[key] - first[key] for key in first if key in second}
    return cast("dict[str, object]", json_safe(payload))


def json_safe(value: object) -> object:
    """NaN (a constant-cosine Spearman) → null: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


# ---------------------------------------------------------------------------------------------- running


def run_reports(
    encoder: Encoder,
    inputs: DiagnoseInputs,
    max_k: int = TOPK_MAX,
    batch_size: int = DIAGNOSE_BATCH_SIZE,
    max_length: int | None = None,
    seed: int = SAMPLE_SEED,
    progress: Progress | None = None,
) -> Diagnosis:
    """Run `inputs.reports` on one model. `progress` is the CLI's progress_bar (description, total)."""
    from sentadapt.diagnostics import metrics
    from sentadapt.diagnostics.anisotropy import sample_pass
    from sentadapt.diagnostics.layers import layer_sweep
    from sentadapt.diagnostics.scoring import PairScorer
    from sentadapt.diagnostics.states import special_token_ids
    from sentadapt.diagnostics.topk import token_counts, topk_curve
    from sentadapt.events import progress_step

    started = time.perf_counter()
    result = Diagnosis(encoder.name, encoder.pooling_name, getattr(encoder, "pooling_source", ""),
                       encoder.num_layers, encoder.embedding_dim)
    wanted = set(inputs.reports)
    if wanted & {"anisotropy", "spectrum", "alignment"}:
        with progress_step(progress, "sample: all layers", len(inputs.sentences)) as advance:
            sampled = sample_pass(encoder, inputs.sentences, batch_size, max_length, advance)
        vectors = sampled.embeddings
        if "anisotropy" in wanted:
            result.anisotropy = {
                "sentence_cosine": metrics.mean_pair_cosine(vectors), "isotropy": metrics.isotropy(vectors),
                "sentence_cosine_per_layer": sampled.sentence_cosine_per_layer,
                "token_cosine_per_layer": sampled.token_cosine_per_layer, "sentences": len(vectors),
            }
        if "spectrum" in wanted:
            result.spectrum = metrics.spectrum(vectors).to_dict()
        if "alignment" in wanted:
            result.alignment = _alignment(encoder, vectors, inputs, batch_size, max_length)
    if "frequency" in wanted:
        counts = token_counts(encoder, inputs.sentences, max_length)
        buckets, rho = metrics.frequency_buckets(counts, encoder.backbone.get_input_embeddings().weight.detach(),
                                                 special_token_ids(encoder), seed=seed)
        result.frequency = {"buckets": [vars(bucket) for bucket in buckets], "rank_norm_spearman": rho,
                            "embeddings": "static input token embeddings", "source": inputs.sentence_source}
    if "topk" in wanted:
        scorers = {name: PairScorer(name, pairs) for name, pairs in inputs.topk_tasks.items()}
        result.topk = topk_curve(encoder, scorers, inputs.frequency_texts, inputs.frequency_source, max_k,
                                 batch_size, max_length, progress).to_dict()
    if "layers" in wanted:
        assert inputs.sweep_pairs is not None
        scorer_size = len(_pair_sentences(inputs.sweep_pairs))
        with progress_step(progress, "layers × pooling", scorer_size) as advance:
            result.layers = layer_sweep(encoder, inputs.sweep_pairs, inputs.sweep_source, batch_size, max_length,
                                        advance).to_dict()
    result.seconds = time.perf_counter() - started
    return result


def _alignment(encoder: Encoder, vectors: torch.Tensor, inputs: DiagnoseInputs, batch_size: int,
               max_length: int | None) -> dict[str, object]:
    """Uniformity of the sample; alignment of the positive pairs (t = 2, α = 2, unit vectors, as SimCSE)."""
    from sentadapt.diagnostics import metrics

    figures: dict[str, object] = {"uniformity": metrics.uniformity(vectors), "alignment": None,
                                  "positives": 0, "positives_source": inputs.positives_source, "t": 2, "alpha": 2}
    if inputs.positives is not None:
        left = encoder.encode(inputs.positives.sentence1, batch_size=batch_size, max_length=max_length)
        right = encoder.encode(inputs.positives.sentence2, batch_size=batch_size, max_length=max_length)
        figures["alignment"] = metrics.alignment(left, right)
        figures["positives"] = len(inputs.positives)
    return figures
