"""Conventions of evaluation results: where a model's files go and how values are shown."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from dualview.errors import DualviewError

#: the folder of mteb-format results beside the models' folders (`dualview.eval.mteb_compat`)
MTEB_FOLDER = "mteb"


def model_slug(name: str) -> str:
    """File-system-safe folder name for a model name or path (``@`` kept: it separates a
    reranker from its first stage, ``<reranker>@<first stage>``)."""
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name.strip("/")).strip("_") or "model"


def check_result_folders(names: Iterable[str], out_dir: Path) -> None:
    """Raise a `DualviewError` when two of the models (columns) ``names`` would share one
    result folder under ``out_dir`` (names that `model_slug` makes equal, like
    ``bi-run/model`` and ``bi-run_model``, or one name given twice): one model's per-query
    results would overwrite the other's. Checked before anything is evaluated."""
    owner: dict[str, str] = {MTEB_FOLDER: "the mteb results"}
    for name in names:
        slug = model_slug(name)
        if slug in owner:
            other = owner[slug]
            first = other if other == "the mteb results" else f"model {other!r}"
            raise DualviewError(
                f"{out_dir / slug}: {first} and model {name!r} would share this result "
                "folder (one's results would overwrite the other's); give each model once, "
                "under names that differ in letters or digits (or evaluate them into two "
                "--out folders)"
            )
        owner[slug] = name


def display_value(metric: str, value: float) -> float:
    """Show IR measures (fractions) ×100 like p-MRR and accuracy, as the papers do."""
    return value if "p-MRR" in metric or "accuracy" in metric else 100.0 * value
