"""Pairs for the user to label: proposed from a corpus (devset.py), chosen by a design (chosen.py, design.py), labelled
(labelling.py)."""
