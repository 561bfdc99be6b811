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
    os.environ["DUALVIEW_CACHE"] = str(tmp_path_factory.mktemp("dualview-cache"))
