"""Quality suites, data builders and the renderers of docs/results.md, run from the repository root as
`python -m experiments.NAME` (experiments/README.md)."""
