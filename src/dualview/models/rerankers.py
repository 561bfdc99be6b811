"""The reranker contract and loaders in one import (`dualview.models.reranker`): kept because
saved model cards and user code import `load_reranker` from here.

Every kind is known wherever rerankers are loaded: `dualview.models.kinds.MODEL_KINDS` holds
the built-in kinds as lazy entries, so nothing needs importing for its side effect.
"""

from __future__ import annotations

from dualview.models.reranker import (
    RERANKER_FILE,
    Reranker,
    TrainableReranker,
    build_reranker,
    load_reranker,
    reranker_kind,
)

__all__ = [
    "RERANKER_FILE",
    "Reranker",
    "TrainableReranker",
    "build_reranker",
    "load_reranker",
    "reranker_kind",
]
