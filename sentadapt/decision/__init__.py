"""The use/keep decision: the rule and its risk (rule.py), the choice among evaluated checkpoints (selection.py),
the export sizes weighed on dev (sizes.py)."""
