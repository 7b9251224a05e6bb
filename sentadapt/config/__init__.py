"""A run's configuration: its schema (config/schema.py), the checks of its values (config/checks.py) and the layers
merged into it (config/layers.py)."""
