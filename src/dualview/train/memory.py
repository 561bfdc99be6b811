"""``gradcache_chunk_size: auto``: the largest GradCache chunk that fits, in tokens.

A chunk's cost is its activations, which grow with its padded size (texts x longest text;
attention through SDPA kernels keeps no ``T x T`` matrix). One forward + backward of a small
probe chunk at the document length measures the bytes per token; the budget is what is left
of the GPU after the weights, their gradients and AdamW's two moments, times a safety
margin, divided by that. The probe's RNG use and gradients are undone, so it changes nothing
in the run. On CPU there is no device limit to fit: a fixed budget is used.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from dualview.train.model import BiEncoder

#: Token budget per chunk on CPU (memory is host RAM; this keeps chunks cache-friendly).
CPU_TOKEN_BUDGET = 16_384
#: Share of the GPU's total memory the budget may plan for.
SAFETY = 0.85
PROBE_TEXTS = 4


@dataclass(frozen=True)
class TokenBudget:
    """The chosen budget and what it was derived from (logged at start-up)."""

    max_tokens: int
    bytes_per_token: float | None = None
    available_bytes: float | None = None

    def describe(self) -> str:
        if self.bytes_per_token is None:
            return f"gradcache auto: {self.max_tokens} tokens per chunk (CPU default)"
        return (
            f"gradcache auto: {self.max_tokens} tokens per chunk "
            f"({self.bytes_per_token / 2**20:.2f} MiB/token measured, "
            f"{self.available_bytes / 2**30:.1f} GiB for activations)"
        )


def _probe_inputs(model: BiEncoder, length: int, device: torch.device) -> dict[str, torch.Tensor]:
    vocab = int(model.backbone.config.vocab_size)
    low = min(1000, vocab - 1)
    ids = torch.randint(low, vocab, (PROBE_TEXTS, length), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def auto_token_budget(
    model: BiEncoder, autocast: Callable[[], AbstractContextManager], length: int
) -> TokenBudget:
    """Tokens per GradCache chunk that fit on the model's GPU (see the module docstring)."""
    device = next(model.parameters()).device
    if device.type != "cuda":
        return TokenBudget(CPU_TOKEN_BUDGET)
    trainable = [p for p in model.parameters() if p.requires_grad]
    weight_bytes = sum(p.numel() * p.element_size() for p in trainable)
    state = torch.get_rng_state(), torch.cuda.get_rng_state_all()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    with autocast():
        out = model.embed(_probe_inputs(model, length, device))
    out.float().sum().backward()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    model.zero_grad(set_to_none=True)
    torch.set_rng_state(state[0])
    torch.cuda.set_rng_state_all(state[1])
    per_token = max(peak - weight_bytes, 1) / (PROBE_TEXTS * length)  # minus the new grads
    total = torch.cuda.get_device_properties(device).total_memory
    # weights are in `base`; gradients and AdamW's two fp32 moments come on the first step
    available = total * SAFETY - base - weight_bytes - 2 * sum(p.numel() * 4 for p in trainable)
    tokens = max(int(available / per_token), length)
    torch.cuda.empty_cache()
    return TokenBudget(tokens, per_token, available)
