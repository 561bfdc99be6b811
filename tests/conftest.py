"""Shared test setup: offline hub, no progress bars, a private cache per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DUALVIEW_NO_PROGRESS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def msmarco_dir() -> Path:
    path = SHARED_DATA / "msmarco-1743"
    if not path.is_dir():
        pytest.fail(f"{path} is missing: ../shared/data must sit beside the checkout")
    return path


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A cache private to this session. Its ``models`` folder (the embedded LLM assembled
    from its parts and requantized, about 1.1 GB) is one folder for all xdist workers of
    the session, which write it under dualview's own file locks, as processes sharing a
    user's cache do; every other cache folder stays private to its worker."""
    cache = tmp_path_factory.mktemp("dualview-cache")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared_models = tmp_path_factory.getbasetemp().parent / "dualview-models"
        shared_models.mkdir(exist_ok=True)
        (cache / "models").symlink_to(shared_models, target_is_directory=True)
    os.environ["DUALVIEW_CACHE"] = str(cache)
