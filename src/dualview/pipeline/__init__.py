"""Experiments as a graph of cached, resumable stages (``dualview run``, ``dualview demo``)."""
