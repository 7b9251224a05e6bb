"""A run's configuration: its schema (config/schema.py), the checks of its values (config/validation.py) and the layers
merged into it (config/merging.py)."""
