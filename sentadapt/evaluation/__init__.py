"""Scoring: task types, the evaluator, bootstrap and variance, paired evidence (`sentadapt eval`, `evaluate()`).

The defaults `sentadapt eval` and `evaluate()` share with the evaluators under them, written once (this module
imports nothing, so the CLI reads them before numpy loads):"""

STS_AGGREGATE = "all"  # one correlation per STS task (mean | wmean: of a task's subsets)
BOOTSTRAP_RESAMPLES = 1000  # for the 95 % percentile CIs (paired for a Δ); 0: off
BOOTSTRAP_SEED = 0
