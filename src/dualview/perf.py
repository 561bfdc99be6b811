"""Hardware-efficiency accounting: analytic FLOPs of a transformer encoder, device peaks, MFU.

Model FLOPs utilisation (MFU) is the useful work a run does, counted analytically from the
model's shape and the real (unpadded) token counts, over the device's dense bf16 peak:

- **matrix FLOPs per token, forward**: ``2 * P_lin``, where ``P_lin`` is the number of weights
  in the model's ``nn.Linear`` layers (the embeddings are table lookups, not matrix products;
  a BERT pooler acts on one token per sequence and is left out);
- **attention FLOPs per sequence of length T, forward**: ``4 * L * d_attn * T**2`` (``Q K^T``
  and ``A V`` in each of the ``L`` layers, ``d_attn`` = heads x head size);
- a backward pass costs twice its forward, so training is ``3 x`` forward.

Two utilisations are reported (`training_flops`, `ThroughputMeter`):

- **MFU**, the PaLM paper's definition: the model's forward and backward only, ``3 x``
  forward, whatever the step recomputes (attention included, as PaLM counts it);
- **HFU**, hardware FLOPs utilisation: what the device actually ran, so a GradCache step
  counts ``4 x`` for each text it runs twice (its no-grad pass, the re-forward with
  gradients and the backward) and ``3 x`` for the texts of chunks that kept their graphs.

Without recomputation the two are equal; with GradCache, MFU is at least 3/4 HFU. Padding
tokens are not counted in either: work on padding is waste, and both should show it.
`encoder_flops` can leave attention out for comparison with the simpler ``6 N T`` rule.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s, by a substring of the device name.
#: Most specific names first; vendors' datasheet numbers.
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("GB200", 2500.0),
    ("B200", 2250.0),
    ("H200", 989.4),
    ("GH200", 989.4),
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),  # SXM (e.g. "NVIDIA H100 80GB HBM3")
    ("H800", 989.4),
    ("H20", 148.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("RTX 4090", 165.2),
    ("RTX 3090", 71.0),
    ("V100", 125.0),  # fp16: V100 has no bf16
    ("T4", 65.0),  # fp16
)


def peak_tflops(device_name: str | None) -> float | None:
    """Dense bf16 peak of a GPU by name, or ``None`` (CPU, or a GPU not in the table)."""
    if not device_name:
        return None
    for key, value in PEAK_BF16_TFLOPS:
        if key in device_name:
            return value
    return None


def cuda_half_precision() -> str:
    """The half precision to use on the current CUDA device: ``bf16``, else ``fp16``."""
    import torch

    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def current_device_name() -> str | None:
    """Name of the current CUDA device, or ``None`` without one."""
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


@dataclass(frozen=True)
class ModelShape:
    """What the FLOP count needs of a transformer: its linear weights and attention width."""

    linear_params: int
    layers: int
    attention_dim: int

    @classmethod
    def of(cls, model: Any) -> ModelShape:
        """The shape of a Hugging Face model (or any module with a ``config``)."""
        from torch import nn

        linear = sum(
            module.weight.numel()
            for name, module in model.named_modules()
            # pooler: 1 token per sequence; lm_head: the LLM reranker reads the last position only
            if isinstance(module, nn.Linear) and "pooler" not in name and "lm_head" not in name
        )
        config = model.config
        heads = getattr(config, "num_attention_heads", 0) or 0
        head_dim = getattr(config, "head_dim", None) or (config.hidden_size // max(heads, 1))
        return cls(linear, int(config.num_hidden_layers), int(heads * head_dim))


def encoder_flops(
    shape: ModelShape, lengths: Iterable[int], passes: float = 1.0, attention: bool = True
) -> float:
    """FLOPs of ``passes`` forward-equivalents over sequences of the given real lengths.

    ``passes``: 1 for inference, 3 for forward + backward, 4 for a GradCache step.
    """
    lengths = list(lengths)
    tokens = sum(lengths)
    total = 2.0 * shape.linear_params * tokens
    if attention:
        total += 4.0 * shape.layers * shape.attention_dim * sum(t * t for t in lengths)
    return passes * total


#: Forward-equivalents of one training step: forward + backward (twice the forward).
TRAIN_PASSES = 3
#: What GradCache adds for each text it runs twice: the second forward.
GRADCACHE_EXTRA_PASSES = 1


def training_flops(
    shape: ModelShape, lengths: Iterable[int], rerun: Iterable[int] = ()
) -> tuple[float, float]:
    """``(model FLOPs, hardware FLOPs)`` of one training step over texts of real ``lengths``:
    the PaLM count (forward + backward) and the same plus the forward passes run again over
    texts of real lengths ``rerun`` (GradCache's re-forward; every text without retained
    chunks)."""
    model = encoder_flops(shape, lengths, passes=TRAIN_PASSES)
    return model, model + encoder_flops(shape, rerun, passes=GRADCACHE_EXTRA_PASSES)


def peak_memory_gib() -> float | None:
    """Peak GPU memory allocated by torch since the last reset, in GiB (``None`` on CPU)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_allocated() / 2**30


@dataclass
class ThroughputMeter:
    """Tokens and analytic FLOPs per wall-clock second since the last `reset`.

    ``peak`` is the device's dense bf16 peak in TFLOP/s (``None``: MFU and HFU are not
    reported). ``flops`` are model FLOPs (MFU), ``hardware_flops`` what ran (HFU).
    """

    peak: float | None = None
    tokens: int = 0
    padded_tokens: int = 0
    flops: float = 0.0
    hardware_flops: float = 0.0
    _start: float = field(default_factory=time.perf_counter)

    def add(
        self,
        tokens: int,
        flops: float,
        padded_tokens: int | None = None,
        hardware_flops: float | None = None,
    ) -> None:
        """Count a step: model ``flops`` and, when it recomputed, its ``hardware_flops``."""
        self.tokens += tokens
        self.padded_tokens += tokens if padded_tokens is None else padded_tokens
        self.flops += flops
        self.hardware_flops += flops if hardware_flops is None else hardware_flops

    def reset(self) -> None:
        self.tokens = self.padded_tokens = 0
        self.flops = self.hardware_flops = 0.0
        self._start = time.perf_counter()

    def report(self) -> dict[str, float | None]:
        """``tokens_per_s``, ``tflops`` (model FLOPs), ``hw_tflops`` (hardware FLOPs), ``mfu``
        and ``hfu`` (0-1, None without a known peak), ``padding``."""
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        tflops = self.flops / elapsed / 1e12
        hw_tflops = self.hardware_flops / elapsed / 1e12
        return {
            "tokens_per_s": round(self.tokens / elapsed, 1),
            "tflops": round(tflops, 2),
            "hw_tflops": round(hw_tflops, 2),
            "mfu": round(tflops / self.peak, 4) if self.peak else None,
            "hfu": round(hw_tflops / self.peak, 4) if self.peak else None,
            "padding": round(1 - self.tokens / self.padded_tokens, 4)
            if self.padded_tokens
            else 0.0,
        }
