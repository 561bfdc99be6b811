"""Pooling of token states into one vector per text (cls | mean | last-token)."""

from __future__ import annotations

import torch

# Our pooling names -> sentence-transformers' pooling_mode.
ST_POOLING = {"cls": "cls", "mean": "mean", "last_token": "lasttoken"}


def pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Pool token states ``hidden`` [B, T, H] under attention ``mask`` [B, T] to [B, H].

    - ``cls``: the first token;
    - ``mean``: average of the unmasked tokens;
    - ``last_token``: the last unmasked token (works for left and right padding).
    """
    if mode == "cls":
        return hidden[:, 0]
    if mode == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    if mode == "last_token":
        positions = torch.arange(mask.shape[1], device=mask.device)
        last = (mask.long() * positions).argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    raise ValueError(f"unknown pooling {mode!r}")
