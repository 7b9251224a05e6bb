"""Short plain-language readings of the figures ("collapsed: random pairs average cosine 0.62").

Thresholds are rules of thumb, stated so a user can disagree with them: BERT-base mean pooling sits near
0.6–0.9 random-pair cosine (Ethayarajh 2019, upper layers); well-trained sentence encoders (SimCSE,
all-MiniLM) sit near 0–0.2. I(W) is on unit vectors, so its floor is e⁻² ≈ 0.14 (see metrics.isotropy).
Plain functions of numbers: `Diagnosis.verdicts()` (report.py) picks the figures and calls them.
"""

from __future__ import annotations

import math

COLLAPSED_COSINE = 0.5
ANISOTROPIC_COSINE = 0.2
TOPK_SENSITIVE_GAIN = 1.0  # Spearman points; ConSERT: BERT +7.8, ConSERT itself < 0.3


def cosine_verdict(cosine: float) -> str:
    if cosine >= COLLAPSED_COSINE:
        return f"collapsed: random pairs average cosine {cosine:.2f}"
    if cosine >= ANISOTROPIC_COSINE:
        return f"anisotropic: random pairs average cosine {cosine:.2f}"
    return f"spread out: random pairs average cosine {cosine:.2f}"


def spectrum_verdict(top1: float, effective_rank: float, dim: int) -> str:
    share = f"top direction holds {top1:.0%} of the variance, effective rank {effective_rank:.0f} of {dim}"
    if top1 >= 0.2:
        return f"dominated by one direction: {share}"
    if effective_rank < dim / 10:
        return f"low-dimensional: {share}"
    return f"well spread: {share}"


def alignment_verdict(alignment: float | None, uniformity: float) -> str:
    spread = "uniform" if uniformity <= -2.0 else "clumped" if uniformity >= -1.0 else "moderately uniform"
    text = f"{spread} (uniformity {uniformity:.2f}; −4 is perfectly spread)"
    if alignment is not None:
        text += f"; paraphrases {'close' if alignment <= 0.5 else 'far apart'} (alignment {alignment:.2f})"
    return text


def frequency_verdict(rho: float) -> str:
    if math.isnan(rho):
        return "too few tokens to tell"
    if rho >= 0.3:
        return f"frequency bias: frequent tokens have smaller norms (Spearman rank–norm {rho:.2f})"
    return f"little frequency bias in norms (Spearman rank–norm {rho:.2f})"


def topk_verdict(best_k: int, gain: float) -> str:
    if gain >= TOPK_SENSITIVE_GAIN:
        return f"frequent tokens hurt: removing the top {best_k} gains {gain:+.2f}"
    return f"robust to frequent tokens: best removal (k={best_k}) gains only {gain:+.2f}"


def layers_verdict(best: str, best_score: float, model_pooling: str, model_score: float) -> str:
    if best_score - model_score < 1.0:
        return f"the model's own pooling ({model_pooling}, {model_score:.2f}) is within 1 point of the best"
    return f"{best} scores {best_score:.2f}, {best_score - model_score:+.2f} over the model's {model_pooling}"
