"""Executing a run: the output folder's lock, a replaced run set aside until the new one finishes, each stage's
inputs (model, recipe, data, teacher table) and training (the processes of a run: train/ranks.py)."""
