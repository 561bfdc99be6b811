"""Reranker objectives against hand computations on small tensors."""

from __future__ import annotations

import math

import pytest
import torch

from dualview.train.batching import build_batch
from dualview.train.config import LossConfig
from dualview.train.objectives import build_objective
from dualview.train.objectives.rerank import (
    ListwiseSoftmax,
    PairwiseLambda,
    PointwiseBCE,
    group_pairs,
)
from tests.helpers import doc, make_record

# Record 0: positive 2.0, negatives 1.0 and -1.0; record 1: negative 0.5, positive 0.0.
SCORES = torch.tensor([[2.0, 1.0, -1.0], [0.5, 0.0, 0.0]])
LABELS = torch.tensor([[1, -1, -1], [-1, 1, 0]], dtype=torch.int8)


def _softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def test_bce_by_hand() -> None:
    terms = [_softplus(-2.0), _softplus(1.0), _softplus(-1.0), _softplus(0.5), _softplus(-0.0)]
    assert float(PointwiseBCE()(SCORES, LABELS)) == pytest.approx(sum(terms) / 5, rel=1e-6)


def test_listwise_by_hand() -> None:
    tau = 0.5
    row0 = -2.0 / tau + math.log(math.exp(2.0 / tau) + math.exp(1.0 / tau) + math.exp(-1.0 / tau))
    row1 = -0.0 / tau + math.log(math.exp(0.0) + math.exp(0.5 / tau))
    got = float(ListwiseSoftmax(tau)(SCORES, LABELS))
    assert got == pytest.approx((row0 + row1) / 2, rel=1e-6)


def test_lambda_by_hand() -> None:
    tau = 1.0
    # Record 0 ranks positive 1st, negatives 2nd and 3rd; one positive: IDCG = 1.
    d = [1.0, 1 / math.log2(3), 1 / math.log2(4)]
    row0 = ((d[0] - d[1]) * _softplus(-(2.0 - 1.0)) + (d[0] - d[2]) * _softplus(-(2.0 + 1.0))) / 2
    # Record 1 ranks the negative (0.5) 1st and the positive (0.0) 2nd; padding is ignored.
    row1 = (d[0] - d[1]) * _softplus(-(0.0 - 0.5))
    got = float(PairwiseLambda(tau)(SCORES, LABELS))
    assert got == pytest.approx((row0 + row1) / 2, rel=1e-6)


def test_lambda_gradient_pushes_the_positive_up() -> None:
    scores = SCORES.clone().requires_grad_(True)
    PairwiseLambda(1.0)(scores, LABELS).backward()
    assert scores.grad[1, 1] < 0 < scores.grad[1, 0]  # descent raises 0.0, lowers 0.5
    assert scores.grad[1, 2] == 0  # padding


def test_group_pairs_lays_out_records() -> None:
    rows = torch.tensor([0, 0, 0, 1, 1])
    scores, labels = group_pairs(
        torch.tensor([2.0, 1.0, -1.0, 0.5, 0.0]), rows, torch.tensor([1, -1, -1, -1, 1]), 2
    )
    assert torch.equal(scores, SCORES) and torch.equal(labels, LABELS)


def test_batch_loss_reads_the_pairs_of_the_batch() -> None:
    """Dual views: the passage that is one view's positive is the other's negative."""
    orig = make_record(
        "a",
        positives=[doc("p", "p")],
        instruction_negatives=[doc("q", "q")],
        hard_negatives=[],
    )
    dual = make_record(
        "a-dv",
        view="dv",
        parent_id="a",
        instruction="only physics for adults",
        positives=[doc("q", "q")],
        instruction_negatives=[doc("p", "p")],
        hard_negatives=[],
    )
    batch = build_batch([orig, dual], 30, "{query} {instruction}")
    rows, cols = batch.pair_index()
    assert rows.tolist() == [0, 0, 1, 1] and cols.tolist() == [0, 1, 0, 1]
    queries, passages = batch.pair_texts()
    assert passages == ["p", "q", "p", "q"] and queries[0] != queries[2]
    flat = torch.tensor([3.0, 1.0, 0.0, 2.0])  # orig: p 3 vs q 1; dv: q 2 vs p 0
    settings = LossConfig(objective="rerank_listwise", temperature=1.0)
    loss = build_objective(settings).batch_loss({"pairs": flat}, batch)
    # each view: -s_pos + log(e^s_pos + e^s_neg) with a margin of 2
    assert float(loss) == pytest.approx(_softplus(-2.0), rel=1e-6)
