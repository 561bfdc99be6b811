"""Content hashes of model weights: the part of a fingerprint that names what a model computes.

Equal hashes mean equal weights (names, shapes, dtypes and bytes); hashing costs about a second
per GB. Evaluation keys its caches on fingerprints built from this (embeddings in
`dualview.retrieval.encode`, reranker scores through `dualview.models.reranker.Reranker`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def update_with_weights(digest: Any, module: nn.Module) -> None:
    """Feed every tensor of ``module.state_dict()`` (name, shape, dtype, bytes) to ``digest``."""
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(dtype=torch.uint8).numpy())
