"""Evaluation: metrics (p-MRR, IR measures), benchmark loaders and runs.

Encoding and search live in `dualview.retrieval`, below both data/ and eval/.
"""
