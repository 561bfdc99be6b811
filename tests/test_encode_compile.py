"""``Encoder(compile=...)`` compiles each transformer layer of the model that runs and gives
the eager vectors (``aot_eager`` here: inductor compiles for minutes on CPU; the GPU
benchmark ``benchmarks/gpu_encode.py`` measures ``ids+compile`` with inductor)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from dualview.models.compiled import transformer_layers
from dualview.retrieval.encode import Encoder
from tests.train_tiny import make_tiny_encoder

TEXTS = [
    "a short text",
    "a somewhat longer text about the tides of the northern sea and their timing",
    "bicycles",
    "the third text is of middling length and talks about bread",
]


def test_compiled_layers_encode_as_eager(tmp_path: Path) -> None:
    folder = str(make_tiny_encoder(tmp_path / "tiny"))
    eager = Encoder(folder, cache=False, show_progress=False, batch_size=2)
    compiled = Encoder(folder, cache=False, show_progress=False, batch_size=2, compile="aot_eager")
    torch._dynamo.reset()
    got = compiled.encode(TEXTS)
    layers = transformer_layers(compiled.runner[0].auto_model)
    assert all(layer._compiled_call_impl is not None for layer in layers)  # it did compile
    eager_modules = eager.runner[0].auto_model.modules()
    assert not any(getattr(m, "_compiled_call_impl", None) for m in eager_modules)
    np.testing.assert_allclose(got, eager.encode(TEXTS), rtol=1e-5, atol=1e-6)
