"""Every built-in reranker kind, registered: import `load_reranker` from here to read any
saved reranker folder (`dualview.models.reranker` holds the contract and the registry).

A module that implements a kind calls `register_reranker_kind` when imported; its import
line below makes the kind known wherever rerankers are loaded.
"""

from __future__ import annotations

from dualview.models import (
    cross_encoder,  # noqa: F401  (registers "cross_encoder")
    llm_reranker,  # noqa: F401  (registers "llm_reranker")
)
from dualview.models.reranker import (
    RERANKER_FILE,
    RERANKER_KINDS,
    Reranker,
    TrainableReranker,
    build_reranker,
    is_reranker,
    load_reranker,
    reranker_kind,
)

__all__ = [
    "RERANKER_FILE",
    "RERANKER_KINDS",
    "Reranker",
    "TrainableReranker",
    "build_reranker",
    "is_reranker",
    "load_reranker",
    "reranker_kind",
]
