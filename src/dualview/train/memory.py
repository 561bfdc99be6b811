"""``gradcache_chunk_size: auto``: the largest GradCache chunk that fits, in tokens.

A chunk's cost is its activations, which grow with its padded size (texts x longest text;
attention through SDPA kernels keeps no ``T x T`` matrix). One forward + backward of a small
probe chunk at the document length measures the bytes per token; the budget is what is left
of the GPU after the weights, their gradients and AdamW's two moments, times a safety
margin, divided by that, capped at `MAX_TOKENS` (larger chunks gain little speed). The uncapped
figure, ``fit_tokens``, is what GradCache may keep alive at once: the trailing chunks it
fits are not run twice (``gradcache_retain_tokens``). The probe's RNG use and gradients are
undone, so it changes nothing in the run. On CPU there is no device limit to fit: a fixed
budget is used, and nothing is kept beyond the last chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import nn

from dualview.models.bi_encoder import BiEncoder
from dualview.train.gradcache import rng_state, set_rng_state

#: Token budget per chunk on CPU (memory is host RAM; this keeps chunks cache-friendly).
CPU_TOKEN_BUDGET = 16_384
#: Share of the GPU's total memory the budget may plan for.
SAFETY = 0.8
PROBE_TEXTS = 8
#: Larger chunks gain little (XLM-R-large on an H100: 269 TFLOP/s at 16k tokens, 308 at 65k).
MAX_TOKENS = 65_536


@dataclass(frozen=True)
class TokenBudget:
    """The chosen budget and what it was derived from (logged at start-up)."""

    max_tokens: int
    bytes_per_token: float | None = None
    available_bytes: float | None = None
    fit_tokens: int = 0  # tokens whose activations fit at once (uncapped); 0 on CPU

    def describe(self) -> str:
        if self.bytes_per_token is None:
            return f"gradcache auto: {self.max_tokens} tokens per chunk (CPU default)"
        return (
            f"gradcache auto: {self.max_tokens} tokens per chunk, graphs of up to "
            f"{self.fit_tokens} kept ({self.bytes_per_token / 2**20:.2f} MiB/token measured, "
            f"{self.available_bytes / 2**30:.1f} GiB for activations)"
        )


def _probe_inputs(
    model: BiEncoder | nn.Module, length: int, device: torch.device
) -> dict[str, torch.Tensor]:
    vocab = int(model.backbone.config.vocab_size)
    low = min(1000, vocab - 1)
    ids = torch.randint(low, vocab, (PROBE_TEXTS, length), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def auto_token_budget(
    model: BiEncoder | nn.Module,
    autocast: Callable[[], AbstractContextManager],
    length: int,
    forward: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None = None,
) -> TokenBudget:
    """Tokens per GradCache chunk that fit on the model's GPU (see the module docstring).

    ``forward`` runs the model on padded inputs (default: the bi-encoder's ``embed``; a
    reranker passes its scoring forward)."""
    forward = forward or model.embed
    device = next(model.parameters()).device
    if device.type != "cuda":
        return TokenBudget(CPU_TOKEN_BUDGET)
    trainable = [p for p in model.parameters() if p.requires_grad]
    weight_bytes = sum(p.numel() * p.element_size() for p in trainable)
    state = rng_state()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    with autocast():
        out = forward(_probe_inputs(model, length, device))
    torch.cuda.synchronize(device)
    # Activations kept for the backward pass, plus the forward's transient peak. (Measured
    # before the backward: during it, activations are freed as parameter gradients appear,
    # so the backward's peak mixes the two and undercounts a larger chunk.)
    peak = torch.cuda.max_memory_allocated(device) - base
    del out
    set_rng_state(state)
    per_token = max(peak, 1) / (PROBE_TEXTS * length)
    total = torch.cuda.get_device_properties(device).total_memory
    # weights are in `base`; gradients and AdamW's two fp32 moments come on the first step
    available = total * SAFETY - base - weight_bytes - 2 * sum(p.numel() * 4 for p in trainable)
    fit = max(int(available / per_token), length)
    torch.cuda.empty_cache()
    return TokenBudget(min(fit, MAX_TOKENS), per_token, available, fit)
