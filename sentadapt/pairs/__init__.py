"""Pairs for the user to label: proposed from a corpus (devset.py), chosen by a design (chosen.py, design.py), labelled
(labelling.py)."""

# sentences encoded (`sentadapt pairs --sample`): enough neighbours at every similarity level, a minute on a CPU
DEFAULT_SAMPLE = 4000
PAIRS_SEED = 0  # of the sentence sample and of the pairs chosen (`sentadapt pairs --seed`, propose_pairs)
