"""Quality suites, data builders and the renderers of research/results.md, run from the repository root as
`python -m experiments.NAME` (research/experiments/README.md)."""
