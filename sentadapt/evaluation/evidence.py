"""How strongly a dev set says that the chosen model beats the base model, with the choice paid for.

A run evaluates several models on the same dev set (every checkpoint; with `--recipe auto`, each candidate's
checkpoints, weighed one candidate at a time: decision/selection.py) and keeps the best. The best of several
noisy Δs is optimistic, so its plain interval overstates the evidence. The confidence here pays for the choice
with the max-T rule of Westfall & Young (1993), on the paired bootstrap replicates the evaluator already draws
(same resamples for every model):

    for each evaluated option k:   s_k  = SD of its Δ replicates Δ_k(b)        (b = 1 … B resamples)
                                    T_k(b) = (Δ_k(b) − Δ_k) / s_k               (its noise, in SD units)
    the largest noise of the lot:   M(b) = max_k T_k(b)
    confidence of the chosen c:     P_b[ M(b) < Δ_c / σ_c ]

σ_c is the chosen option's calibrated SE (evaluation/variance.py: the design jackknife; the bootstrap's s_c
overstates the error of a Δ of rank correlations, issue 68), s_c where a metric has none. The replicates give the
shape and the dependence of the options' noise, σ_c its scale: a studentised max-T.

Read: the share of resamples in which no option's noise, not even the luckiest one's, is as large as the
chosen option's measured gain. With one option it is the one-sided bootstrap confidence that Δ > 0 (≈ Φ(Δ/s));
with K independent options it costs like Šidák's correction; checkpoints of one run are strongly correlated, so
their choice costs little — which is why the rule is not Bonferroni's (that treats them as unrelated).
`1 − confidence` is the risk the decision reports: the chance that a model this far ahead of the base on this
dev set is, in truth, no better.

`detectable_gain` is the other side: the smallest Δ this dev set could call a gain at a given risk
(q_{1−risk}(M) · s_c), so `adapt` can say when the dev set is too small for the gains at stake. Both scale as
1/√n: four times the pairs halve it.

Pure numpy over replicates (no torch), so the benchmarks reuse it on stored outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Evidence:
    """The dev set's evidence for the chosen option against the base model."""

    change: float  # the chosen option's dev Δ (score − the base model's)
    spread: float  # the Δ's standard error: calibrated (evaluation/variance.py), else its replicates' SD
    confidence: float  # selection-aware one-sided confidence that the chosen option beats the base
    options: int  # how many evaluated options the choice was made among
    units: int  # dev units
    unit_name: str = "pairs"  # pairs | queries
    noise: tuple[float, ...] = ()  # M(b), sorted: what detectable_gain reads

    @property
    def risk(self) -> float:
        return 1.0 - self.confidence

    def detectable_gain(self, risk: float) -> float:
        """The smallest dev Δ whose confidence reaches 1 − risk on this dev set with this many options."""
        if not self.noise:
            return float("nan")
        return float(np.quantile(np.asarray(self.noise), 1.0 - risk)) * self.spread


def weigh(base: np.ndarray, options: Sequence[np.ndarray], base_value: float, values: Sequence[float],
          chosen: int, units: int, unit_name: str = "pairs",
          standard_errors: Sequence[float | None] | None = None) -> Evidence | None:
    """Evidence for `options[chosen]` from the replicates of the base model's and each option's metric.

    `base` and each of `options` are (B,) replicates of the dev metric under the SAME resamples; `base_value` and
    `values` the metric on the full dev set. `standard_errors`: each option's calibrated SE of its Δ
    (evaluation/variance.py); the measured Δ is read in those units (a studentised max-T: the replicates, each over
    its own SD, still give the options' joint noise), the replicates' SD where it is None. None when the bootstrap
    is off or degenerate (no spread)."""
    if not options or base.size == 0:
        return None
    deltas = np.stack([option - base for option in options])  # (K, B)
    changes = np.asarray(values, dtype=np.float64) - base_value
    finite = np.isfinite(deltas).all(axis=0)
    deltas = deltas[:, finite]
    if deltas.shape[1] < 2:
        return None
    spreads = deltas.std(axis=1, ddof=1)
    if spreads[chosen] <= 0:
        return None
    # options that never move from the base (a spread of 0: identical outputs) carry no noise to pay for
    moving = spreads > 0
    noise = ((deltas[moving] - changes[moving, None]) / spreads[moving, None]).max(axis=0)  # M(b)
    calibrated = (standard_errors or [None] * len(options))[chosen]
    spread = calibrated if calibrated is not None and calibrated > 0 else float(spreads[chosen])
    measured = changes[chosen] / spread
    # ties of M(b) with the measured statistic count half: a model identical to the base gets 0.5, not 1
    confidence = float(np.mean(noise < measured) + 0.5 * np.mean(noise == measured))
    return Evidence(float(changes[chosen]), float(spread), confidence, len(options), units, unit_name,
                    tuple(np.sort(noise).tolist()))
