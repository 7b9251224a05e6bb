"""Orchestration of `adapt`: what a run is asked for (settings), its config assembled once (configs), the checks
before anything loads (checks), resume (resume), the output's lock and replacement (lock, replacement), the stages
trained (stages, inputs), the decision published (finish), `--recipe auto` (auto, auto_run, candidates), the summary
(summary), and the public call (adapt). It drives sentadapt/train/ (the loop and its collaborators), which never
imports it."""
