"""dualview: instruction-following retrieval with dual-view training data."""

__version__ = "0.1.0"
