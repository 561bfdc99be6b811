"""Shared by the contrastive-step tests: a fixed batch, the losses under test, one step's loss
and gradients, and the comparison of two such results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from dualview.data.jsonl import iter_records
from dualview.models.bi_encoder import BiEncoder
from dualview.train.batching import build_batch
from dualview.train.objectives import InfEmbedLoss, RelationInfoNCE
from dualview.train.step import Chunking, all_reduce_gradients, contrastive_step

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
LOSSES: dict[str, Callable[[], torch.nn.Module]] = {
    "infonce": lambda: RelationInfoNCE(0.05),
    "infonce_inbatch": lambda: RelationInfoNCE(0.05, in_batch_negatives=True),
    "inf_uni_P_I_IQ": lambda: InfEmbedLoss(["P", "I", "IQ"], False, 0.05),
    "inf_multi_P_I_IQ": lambda: InfEmbedLoss(["P", "I", "IQ"], True, 0.05),
}

StepResult = tuple[float, dict[str, torch.Tensor]]


def step_batch():
    """The first 4 fixture records, 30 negatives, "{query} {instruction}"."""
    return build_batch(list(iter_records(FIXTURE))[:4], 30, "{query} {instruction}")


def run_step(model: BiEncoder, loss_name: str, chunk: int | Chunking | None) -> StepResult:
    """One contrastive step on :func:`step_batch`: the loss and every parameter's gradient."""
    model.zero_grad(set_to_none=True)
    stats = contrastive_step(model, LOSSES[loss_name](), step_batch(), chunk_size=chunk)
    all_reduce_gradients(model)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return stats.loss, grads


def assert_same_step(a: StepResult, b: StepResult) -> None:
    assert a[0] == pytest.approx(b[0], rel=1e-5)
    assert a[1].keys() == b[1].keys() and a[1]
    # float32 sums in a different order: compare against the scale of the whole gradient
    scale = max(float(g.abs().max()) for g in b[1].values())
    for name, grad in a[1].items():
        torch.testing.assert_close(grad, b[1][name], rtol=1e-4, atol=1e-4 * scale, msg=name)
