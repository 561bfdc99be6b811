"""Conventions of evaluation results: where a model's files go and how values are shown."""

from __future__ import annotations

import re


def model_slug(name: str) -> str:
    """File-system-safe folder name for a model name or path (``@`` kept: it separates a
    reranker from its first stage, ``<reranker>@<first stage>``)."""
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name.strip("/")).strip("_") or "model"


def display_value(metric: str, value: float) -> float:
    """Show IR measures (fractions) ×100 like p-MRR and accuracy, as the papers do."""
    return value if "p-MRR" in metric or "accuracy" in metric else 100.0 * value
