"""sentadapt: adapt sentence-embedding models to a domain with contrastive learning."""

__version__ = "0.1.0"
