"""Padding-free encoding: the texts of a chunk packed into one sequence, attention per text.

A padded chunk of length-sorted texts still spends work on padding: every position runs
through every linear layer whether it holds a token or not. Packed, the chunk is one row of
``sum(lengths)`` tokens; position ids restart at each text, and attention stays within each
text through a variable-length kernel, so the result is the padded one without the padding:

- ``flash_attn_varlen_func`` when the flash-attn package is installed and the tensors are on
  CUDA;
- else PyTorch's scaled-dot-product attention on a nested (jagged) tensor, which runs on CPU
  and on CUDA (its fused kernels there);
- on request (``kernel="torch_flash"``), PyTorch's own flash-attention varlen kernel
  (``aten._flash_attention_forward`` with ``cu_seq_lens``, dropout included; CUDA, fp16/bf16
  only), which needs no package and no nested tensors.

`KERNELS` names the choices (``auto`` is the first two in that order). Each is registered
with transformers as an attention implementation (`VARLEN`, ``VARLEN + "_" + kernel``); it hands
padded inputs (no ``cu_seq_lens``) to transformers' own SDPA, so the backbone still serves
padded callers. Supported backbones: BERT-style bidirectional encoders whose attention goes
through transformers' attention interface and whose embeddings take ``position_ids``
(`SUPPORTED`). Not supported, with the reason given by `unsupported_reason`: decoders
(causal, left-padded, last-token pooling; transformers packs them for flash-attn only),
LoRA-wrapped backbones (untested), and ModernBERT (its own unpadding needs flash-attn's CUDA
kernels: on a GPU with flash-attn, ``attn_implementation: flash_attention_2`` gets it).

Equivalence: the packed path computes the same function as the padded one (the CPU test
compares embeddings and gradients, `tests/test_unpadded.py`); with dropout on, the masks
differ (another layout of the same random draws), as between any two chunkings.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from dualview.errors import ConfigError
from dualview.models.tokens import TokenizedTexts

#: Name of the packed-attention implementation registered with transformers.
VARLEN = "dualview_varlen"
#: Model types whose packed forward is supported (bidirectional, attention interface,
#: ``position_ids`` honoured by the embeddings).
SUPPORTED = ("bert", "roberta", "xlm-roberta", "camembert")
#: Of those, the ones whose positions start after the padding index (RoBERTa's convention).
PADDING_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")
#: Keys of packed model inputs (a dict like padded inputs, so it travels the same way).
CU_SEQ_LENS, MAX_LENGTH = "cu_seq_lens", "max_seq_len"
#: Kernels of packed attention (``auto``: flash-attn's when installed, else ``nested``).
KERNELS = ("auto", "nested", "torch_flash", "flash_attn")


def unsupported_reason(backbone: Any) -> str | None:
    """Why ``backbone`` cannot run packed, or ``None`` when it can."""
    config = backbone.config
    model_type = getattr(config, "model_type", "?")
    if hasattr(backbone, "peft_config"):
        return "LoRA-wrapped backbones are not supported padding-free (untested)"
    if model_type == "modernbert":
        return (
            "ModernBERT unpads by itself only with flash-attn on CUDA "
            "(attn_implementation: flash_attention_2)"
        )
    if getattr(config, "is_decoder", False) or model_type not in SUPPORTED:
        return (
            f"model type {model_type!r} is not supported padding-free "
            f"(supported: {', '.join(SUPPORTED)})"
        )
    return None


#: Attention-implementation name of each kernel (none may contain "flash": transformers
#: would then look for a flash-attention package of that name).
_NAMES = {
    "auto": VARLEN,
    "nested": f"{VARLEN}_nested",
    "torch_flash": f"{VARLEN}_torch_fa",
    "flash_attn": f"{VARLEN}_fa_package",
}


def implementation_name(kernel: str = "auto") -> str:
    """The attention-implementation name registered for ``kernel`` (one of `KERNELS`)."""
    if kernel not in KERNELS:
        raise ConfigError(f"varlen kernel {kernel!r}: choose from {', '.join(KERNELS)}")
    return _NAMES[kernel]


def register() -> None:
    """Register one attention implementation per kernel of `KERNELS` (attention and mask
    functions) with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    # PyTorch's CPU fallback for jagged SDPA builds a strided nested tensor and warns each time
    warnings.filterwarnings("ignore", "The PyTorch API of nested tensors", UserWarning)
    for kernel in KERNELS:
        name = implementation_name(kernel)
        AttentionInterface.register(name, functools.partial(varlen_attention, kernel=kernel))
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)  # packed: no mask is built


def enable(backbone: Any, kernel: str = "auto") -> None:
    """Make ``backbone`` run packed inputs through ``kernel`` (padded ones still work);
    `ConfigError` when it cannot, naming why."""
    reason = unsupported_reason(backbone)
    if reason is not None:
        raise ConfigError(f"model.unpadded: {reason}")
    name = implementation_name(kernel)
    register()
    backbone.set_attn_implementation(name)


def _flash_varlen() -> Any:
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        return None
    return flash_attn_varlen_func


def _half_on_cuda(q: torch.Tensor) -> bool:
    return q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)


class _TorchFlashVarlen(torch.autograd.Function):
    """PyTorch's flash-attention varlen kernel (``aten._flash_attention_forward`` with
    ``cu_seq_lens``) and its backward, dropout included (the backward replays the forward's
    dropout mask from the philox seed and offset it returns)."""

    @staticmethod
    def forward(ctx, q, k, v, cu, max_len: int, dropout: float, scale: float | None):
        out, lse, seed, offset = flash_forward(q, k, v, cu, max_len, dropout, scale)
        ctx.save_for_backward(q, k, v, out, lse, cu, seed, offset)
        ctx.max_len, ctx.dropout, ctx.scale = max_len, dropout, scale
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse, cu, seed, offset = ctx.saved_tensors
        saved = (out, lse, seed, offset)
        dq, dk, dv = flash_backward(
            grad.contiguous(), q, k, v, saved, cu, ctx.max_len, ctx.dropout, ctx.scale
        )
        return dq, dk, dv, None, None, None, None


def flash_forward(q, k, v, cu, max_len: int, dropout: float, scale: float | None):
    """``(out, logsumexp, philox seed, philox offset)`` of PyTorch's flash varlen kernel on
    ``[N, heads, d]`` inputs with text boundaries ``cu`` (int32)."""
    out, lse, seed, offset, _ = torch.ops.aten._flash_attention_forward(
        q, k, v, cu, cu, max_len, max_len, dropout, False, False, scale=scale
    )
    return out, lse, seed, offset


def flash_backward(grad, q, k, v, saved, cu, max_len: int, dropout: float, scale: float | None):
    """``(dq, dk, dv)`` of `flash_forward` (``saved``: its outputs)."""
    out, lse, seed, offset = saved
    n = max_len
    return torch.ops.aten._flash_attention_backward(
        grad, q, k, v, out, lse, cu, cu, n, n, dropout, False, seed, offset, scale=scale
    )


def _torch_flash(q, k, v, cu_seq_lens, max_len, dropout, scaling) -> torch.Tensor:
    if not _half_on_cuda(q):
        raise ConfigError("varlen kernel torch_flash: needs CUDA tensors in fp16 or bf16")
    cu = cu_seq_lens.to(device=q.device, dtype=torch.int32)
    q, k, v = (t.contiguous() for t in (q, k, v))
    return _TorchFlashVarlen.apply(q, k, v, cu, int(max_len), float(dropout), scaling)


def varlen_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    kernel: str = "auto",
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention within each packed text (``cu_seq_lens`` in ``kwargs``) through ``kernel``
    (`KERNELS`), else transformers' SDPA. Inputs ``[1, heads, N, d]``; returns
    ``[1, N, heads, d]`` as transformers expects."""
    cu_seq_lens = kwargs.pop(CU_SEQ_LENS, None)
    max_len = kwargs.pop(MAX_LENGTH, None)
    if cu_seq_lens is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # [N, heads, d]
    if kernel == "torch_flash":
        return _torch_flash(q, k, v, cu_seq_lens, max_len, dropout, scaling).unsqueeze(0), None
    flash = _flash_varlen() if kernel in ("auto", "flash_attn") and _half_on_cuda(q) else None
    if kernel == "flash_attn" and flash is None:
        raise ConfigError(
            "varlen kernel flash_attn: needs the flash-attn package and CUDA tensors in fp16/bf16"
        )
    if flash is not None:
        cu = cu_seq_lens.to(torch.int32)
        out = flash(q, k, v, cu, cu, int(max_len), int(max_len), dropout, softmax_scale=scaling)
        return out.unsqueeze(0), None
    offsets = cu_seq_lens.to(torch.int64)
    nested = [
        torch.nested.nested_tensor_from_jagged(t, offsets, max_seqlen=max_len).transpose(1, 2)
        for t in (q, k, v)
    ]
    out = F.scaled_dot_product_attention(*nested, dropout_p=dropout, scale=scaling)
    return out.transpose(1, 2).values().unsqueeze(0), None


def pack(
    tokens: TokenizedTexts, indices: Sequence[int] | torch.Tensor, position_start: int = 0
) -> dict[str, Any]:
    """Packed model inputs of ``tokens[indices]``: ``input_ids`` and ``position_ids``
    [1, sum(lengths)], ``cu_seq_lens`` [len(indices) + 1] (text boundaries) and
    ``max_seq_len`` (the longest text). Positions count from ``position_start``."""
    index = torch.as_tensor(indices, dtype=torch.int64)
    lengths = tokens.lengths[index]
    starts = tokens.offsets[index]
    total = int(lengths.sum())
    text_of = torch.repeat_interleave(torch.arange(len(index)), lengths, output_size=total)
    cu = F.pad(torch.cumsum(lengths, 0), (1, 0))
    within = torch.arange(total, dtype=torch.int64) - cu[:-1][text_of]
    ids = tokens.ids.to(torch.int64)[starts[text_of] + within]
    return {
        "input_ids": ids.unsqueeze(0),
        "position_ids": (within + position_start).unsqueeze(0),
        CU_SEQ_LENS: cu.to(torch.int32),
        MAX_LENGTH: int(lengths.max()) if len(index) else 0,
    }


def position_start(backbone: Any) -> int:
    """First position id of a text: 0, or past the padding index for RoBERTa-style models."""
    config = backbone.config
    if getattr(config, "model_type", "") in PADDING_OFFSET_POSITIONS:
        return int(config.pad_token_id) + 1
    return 0


def is_packed(inputs: dict[str, Any]) -> bool:
    return CU_SEQ_LENS in inputs


def packed_states(backbone: Any, inputs: dict[str, Any]) -> torch.Tensor:
    """Token states [N, H] of packed ``inputs`` (see `pack`)."""
    return backbone(**inputs).last_hidden_state[0]


def pool_packed(states: torch.Tensor, inputs: dict[str, Any], mode: str) -> torch.Tensor:
    """Pool packed token states [N, H] to one vector per text [B, H] (as `pool` does padded)."""
    cu = inputs[CU_SEQ_LENS].to(device=states.device, dtype=torch.int64)
    if mode == "cls":
        return states[cu[:-1]]
    if mode == "last_token":
        return states[cu[1:] - 1]
    if mode == "mean":
        lengths = cu[1:] - cu[:-1]
        text_of = torch.repeat_interleave(
            torch.arange(len(lengths), device=states.device), lengths, output_size=states.shape[0]
        )
        sums = states.new_zeros(len(lengths), states.shape[1]).index_add(0, text_of, states)
        return sums / lengths.clamp(min=1).unsqueeze(1).to(states.dtype)
    raise ValueError(f"unknown pooling {mode!r}")


def repad_states(states: torch.Tensor, inputs: dict[str, Any], left: bool) -> torch.Tensor:
    """Packed token states [N, H] laid out padded [B, longest, H] (zeros at the padding)."""
    cu = inputs[CU_SEQ_LENS].to(device=states.device, dtype=torch.int64)
    lengths = cu[1:] - cu[:-1]
    width = int(inputs[MAX_LENGTH])
    text_of = torch.repeat_interleave(
        torch.arange(len(lengths), device=states.device), lengths, output_size=states.shape[0]
    )
    within = torch.arange(states.shape[0], device=states.device) - cu[:-1][text_of]
    if left:
        within = within + (width - lengths)[text_of]
    out = states.new_zeros(len(lengths), width, states.shape[1])
    return out.index_put((text_of, within), states)


def padding_share(lengths: Sequence[int], chunks: Sequence[Sequence[int]], width_of) -> float:
    """Share of padded positions when each chunk of texts is padded to ``width_of(longest)``."""
    tokens = sum(lengths[i] for chunk in chunks for i in chunk)
    positions = sum(len(c) * width_of(max(lengths[i] for i in c)) for c in chunks if c)
    return 1 - tokens / positions if positions else 0.0


__all__ = [
    "KERNELS",
    "SUPPORTED",
    "VARLEN",
    "enable",
    "implementation_name",
    "is_packed",
    "pack",
    "packed_states",
    "pool_packed",
    "position_start",
    "repad_states",
    "unsupported_reason",
    "varlen_attention",
]
