"""The training speed options (issue 33) compute what the default path computes, on CPU.

- ``pad_multiple``: bucketed chunk widths (padding masked) give the default step's loss and
  gradients (tolerance: ``step_checks.assert_same_step``, rel 1e-5 on the loss, 1e-4 of the
  gradient's scale);
- ``compile: layers``: each transformer layer compiled (``aot_eager`` backend here: inductor
  compiles for minutes on CPU; the GPU run uses inductor) gives the eager step;
- ``optim.fused``: fused and unfused AdamW make the same update (1e-6), and the default on
  CPU stays unfused;
- the options that only act with GradCache or packing are located errors without it;
- the torch flash varlen kernel's autograd wiring (`unpadded._TorchFlashVarlen`) with the
  kernel itself replaced by per-text SDPA (the real kernel needs CUDA): same outputs and
  gradients as SDPA on each text.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError

from dualview.errors import ConfigError
from dualview.models import unpadded
from dualview.models.bi_encoder import BiEncoder
from dualview.models.compiled import compile_backbone, transformer_layers
from dualview.models.config import ModelConfig
from dualview.models.tokens import padded_width, plan_chunks
from dualview.train.config import OptimConfig, TrainConfig
from dualview.train.memory import TokenBudget
from dualview.train.step import Chunking
from dualview.train.trainer import Trainer, build_optimizer
from tests.step_checks import assert_same_step, run_step
from tests.train_tiny import make_tiny_encoder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


def _model(path: Path) -> BiEncoder:
    model = BiEncoder(
        ModelConfig(name_or_path=str(path), query_max_length=32, document_max_length=48)
    )
    return model.eval()


def test_bucketed_chunks_give_the_same_step(tiny: Path) -> None:
    model = _model(tiny)
    default = run_step(model, "infonce", Chunking(max_tokens=200))
    bucketed = run_step(model, "infonce", Chunking(max_tokens=200, pad_multiple=64))
    assert_same_step(bucketed, default)
    # the widths really are bucketed: a 13-token text pads to 64 (48 at most: the limit)
    assert padded_width(13, None, 64) == 64 and padded_width(13, 48, 64) == 48


def test_bucketed_plan_counts_bucketed_widths() -> None:
    # 3 texts of 10 tokens: 3 x 16 = 48 fits a budget of 50 at multiple 8; at 64, one per chunk
    assert plan_chunks([10, 10, 10], max_tokens=50) == [[0, 1, 2]]
    assert plan_chunks([10, 10, 10], max_tokens=64, multiple=64) == [[0], [1], [2]]


def test_compiled_layers_give_the_eager_step(tiny: Path) -> None:
    eager = run_step(_model(tiny), "infonce", Chunking(max_tokens=200))
    model = _model(tiny)
    compile_backbone(model.backbone, "layers", backend="aot_eager")
    layers = transformer_layers(model.backbone)
    assert len(layers) == 2 and all(layer._compiled_call_impl for layer in layers)
    torch._dynamo.reset()
    compiled = run_step(model, "infonce", Chunking(max_tokens=200))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # it did compile
    assert_same_step(compiled, eager)


def test_compile_mode_unknown_is_an_error(tiny: Path) -> None:
    with pytest.raises(ConfigError, match="compile"):
        compile_backbone(_model(tiny).backbone, "everything")  # type: ignore[arg-type]


def test_fused_adamw_makes_the_same_update(tiny: Path) -> None:
    results = []
    for fused in (False, True):
        model = _model(tiny)
        optimizer = build_optimizer(model, OptimConfig(fused=fused))
        assert bool(optimizer.defaults["fused"]) is fused
        run_step(model, "infonce", Chunking(max_tokens=200))
        optimizer.step()
        results.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.testing.assert_close(results[1], results[0], rtol=0, atol=1e-6)
    assert not build_optimizer(_model(tiny), OptimConfig()).defaults["fused"]  # CPU default


def _config(**settings) -> TrainConfig:
    base = {"data": {"train_file": "t.jsonl"}, "output_dir": "out"}
    return TrainConfig.model_validate({**base, **settings})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"gradcache_max_tokens": 4096}, "gradcache_max_tokens: needs gradcache_chunk_size"),
        ({"gradcache_chunk_size": 8, "gradcache_max_tokens": 4096}, "needs gradcache_chunk_size"),
        ({"pad_multiple": 64}, "pad_multiple: rounds GradCache chunks"),
        ({"gradcache_retain_tokens": 4096}, "gradcache_retain_tokens: keeps GradCache"),
        (
            {
                "gradcache_chunk_size": 8,
                "gradcache_retain_last": False,
                "gradcache_retain_tokens": 0,
            },
            "set gradcache_chunk_size and gradcache_retain_last: true",
        ),
        ({"varlen_kernel": "torch_flash"}, "varlen_kernel: chooses the kernel of model.unpadded"),
    ],
)
def test_options_without_their_path_are_errors(settings: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _config(**settings)


def test_speed_options_validate_together() -> None:
    config = _config(
        gradcache_chunk_size="auto",
        gradcache_max_tokens=4096,
        gradcache_retain_tokens=8192,
        pad_multiple=64,
        compile="layers",
        model={"unpadded": True},
        varlen_kernel="nested",
        optim={"fused": True},
    )
    assert config.compile == "layers" and config.optim.fused is True
    assert _config().compile is False and _config().pad_multiple == 8  # defaults unchanged


def _reference_forward(q, k, v, cu, max_len, dropout, scale):
    """Per-text SDPA standing in for the CUDA kernel (same contract as `flash_forward`)."""
    bounds = cu.tolist()
    parts = [
        F.scaled_dot_product_attention(
            *(t[a:b].transpose(0, 1) for t in (q, k, v)), scale=scale
        ).transpose(0, 1)
        for a, b in itertools.pairwise(bounds)
    ]
    return torch.cat(parts), None, None, None


def _reference_backward(grad, q, k, v, saved, cu, max_len, dropout, scale):
    with torch.enable_grad():
        inputs = [t.detach().requires_grad_(True) for t in (q, k, v)]
        out = _reference_forward(*inputs, cu, max_len, dropout, scale)[0]
        return torch.autograd.grad(out, inputs, grad)


def test_torch_flash_wiring_matches_per_text_attention(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unpadded, "flash_forward", _reference_forward)
    monkeypatch.setattr(unpadded, "flash_backward", _reference_backward)
    monkeypatch.setattr(unpadded, "_half_on_cuda", lambda q: True)
    torch.manual_seed(0)
    lengths = torch.tensor([5, 9, 3])
    cu = F.pad(torch.cumsum(lengths, 0), (1, 0)).to(torch.int32)
    # [1, N, h, d] leaves seen as [1, h, N, d], as transformers hands them over
    leaves = [torch.randn(1, 17, 2, 8, requires_grad=True) for _ in range(3)]
    results = []
    for kernel in ("torch_flash", "nested"):
        q, k, v = (t.transpose(1, 2) for t in leaves)
        out, _ = unpadded.varlen_attention(
            None, q, k, v, None, scaling=0.3, kernel=kernel, cu_seq_lens=cu, max_seq_len=9
        )
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        results.append((out.detach(), [t.grad.clone() for t in leaves]))
        for t in leaves:
            t.grad = None
    (out, grads), (expected, expected_grads) = results
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_torch_flash_on_cpu_says_why() -> None:
    q = torch.randn(1, 2, 4, 8)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(ConfigError, match="torch_flash: needs CUDA"):
        unpadded.varlen_attention(
            None, q, q, q, None, kernel="torch_flash", cu_seq_lens=cu, max_seq_len=4
        )
    with pytest.raises(ConfigError, match="varlen kernel 'fast'"):
        unpadded.implementation_name("fast")


#: What a GPU's probe could measure: 65,536-token chunks, 200,000 tokens of graphs fit.
GPU_BUDGET = TokenBudget(65_536, 1e6, 2e11, 200_000)


@pytest.mark.parametrize(
    ("settings", "budget", "expected"),
    [
        ({"gradcache_chunk_size": 8}, TokenBudget(16_384), Chunking(max_items=8)),  # CPU
        ({"gradcache_chunk_size": 8}, GPU_BUDGET, Chunking(max_items=8, retain_tokens=200_000)),
        (
            {"gradcache_chunk_size": "auto"},
            GPU_BUDGET,
            Chunking(max_tokens=65_536, retain_tokens=200_000),
        ),
        (
            {"gradcache_chunk_size": "auto", "gradcache_max_tokens": 4096},
            GPU_BUDGET,
            Chunking(max_tokens=4096, retain_tokens=200_000),
        ),
        (
            {"gradcache_chunk_size": "auto", "gradcache_retain_tokens": 0},
            GPU_BUDGET,
            Chunking(max_tokens=65_536),
        ),
        (
            {"gradcache_chunk_size": 8, "gradcache_retain_last": False},
            GPU_BUDGET,
            Chunking(max_items=8, retain_last=False),
        ),
    ],
)
def test_kept_graphs_default_to_what_the_measured_memory_fits(
    settings: dict, budget: TokenBudget, expected: Chunking
) -> None:
    """``gradcache_retain_tokens`` unset: the probe's uncapped fit on a GPU, 0 on CPU (the
    last chunk only); set, or retain_last off, it is used as given."""
    trainer = SimpleNamespace(
        config=_config(**settings),
        family=SimpleNamespace(token_budget=lambda model, autocast, config: budget),
        model=None,
        _autocast=None,
        accelerator=SimpleNamespace(is_main_process=False),
    )
    assert Trainer._chunking(trainer) == expected
