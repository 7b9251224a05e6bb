"""Repository tools shared by bench/ and research/experiments/ (which may not import each other) and the generators of
docs/ pages. Run from the repository root as `python -m tools.NAME`; never installed, never imported by sentadapt."""
