"""Stopping on a signal (Ctrl-C, SIGTERM, SIGUSR1): anywhere in the process (stopping/process.py: at once, one line,
exit 128 + N) and during training (stopping/training.py: finish the step, write a checkpoint, stop every rank at the
same step). Standard library only: the console script installs it before anything else loads."""
