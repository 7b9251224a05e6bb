"""A run's configuration: its schema and the checks of its values (config/schema.py), and the layers merged into it
(config/merging.py)."""
