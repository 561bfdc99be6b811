"""``torch.compile`` of a backbone: the whole model, or each transformer layer on its own.

Compiling the whole backbone with dynamic shapes traces the embeddings, the mask building
and every layer as one graph per shape class; for XLM-R-large at the paper's shape that
did not finish its first step in 200 s on an H100 (``benchmarks/gpu_train.py``). Compiling
each layer on its own ("regional compilation") traces one layer: the layers share their
Python code, so dynamo compiles it once and reuses it for all of them (their weights are
inputs of the graph), which cuts compile time by about the number of layers. The
embeddings, the pooling and the loss stay eager.

Chunk widths rounded up to a multiple of 64 (``pad_multiple``) keep the number of shapes,
and so of recompilations, small.
"""

from __future__ import annotations

from typing import Literal

from torch import nn

from dualview.errors import ConfigError

CompileMode = bool | Literal["layers"]


def transformer_layers(backbone: nn.Module) -> nn.ModuleList:
    """The backbone's stack of transformer layers: its largest `nn.ModuleList` of modules of
    one type (``encoder.layer`` of BERT and XLM-R, ``layers`` of decoders), also inside a
    LoRA wrapper."""
    best: nn.ModuleList | None = None
    for module in backbone.modules():
        if not isinstance(module, nn.ModuleList) or len(module) == 0:
            continue
        if len({type(m) for m in module}) != 1:
            continue
        if best is None or len(module) > len(best):
            best = module
    if best is None:
        raise ConfigError(f"compile: layers: no stack of layers found in {type(backbone).__name__}")
    return best


def compile_backbone(backbone: nn.Module, mode: CompileMode, backend: str = "inductor") -> None:
    """Compile ``backbone`` in place: ``True`` the whole model (dynamic shapes), ``"layers"``
    each transformer layer (shapes dynamic only where they are seen to change); ``False``
    leaves it eager. ``backend``: torch.compile's (tests use ``aot_eager``)."""
    if mode is False:
        return
    if mode is True:
        backbone.compile(dynamic=True, backend=backend)
        return
    if mode != "layers":
        raise ConfigError(f"compile: {mode!r}: expected true, false or 'layers'")
    for layer in transformer_layers(backbone):
        layer.compile(backend=backend)


__all__ = ["compile_backbone", "transformer_layers"]
