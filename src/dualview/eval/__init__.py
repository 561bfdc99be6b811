"""Evaluation: encoding with a cache, search, metrics (p-MRR, IR measures), benchmark loaders."""
