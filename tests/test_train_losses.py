"""Losses against slow, loop-based reference implementations on random tensors."""

from __future__ import annotations

import math

import pytest
import torch

from dualview.train.objectives import InfEmbedLoss, RelationInfoNCE


def _dot(a: torch.Tensor, b: torch.Tensor, tau: float) -> float:
    return sum(float(x) * float(y) for x, y in zip(a, b, strict=True)) / tau


def _term(positive: float, negatives: list[float]) -> float:
    return -positive + math.log(math.exp(positive) + sum(math.exp(n) for n in negatives))


def reference_infonce(q, d, rel, tau, in_batch):
    per_query = []
    for i in range(q.shape[0]):
        positives = [j for j in range(d.shape[0]) if rel[i, j] == 1]
        negatives = [
            j for j in range(d.shape[0]) if rel[i, j] == -1 or (in_batch and rel[i, j] == 0)
        ]
        if not positives:
            continue
        negs = [_dot(q[i], d[n], tau) for n in negatives]
        terms = [_term(_dot(q[i], d[p], tau), negs) for p in positives]
        per_query.append(sum(terms) / len(terms))
    return sum(per_query) / len(per_query)


def _random_case(seed: int, nq: int = 5, nd: int = 9, h: int = 8):
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(nq, h, generator=gen, dtype=torch.float64), dim=1)
    d = torch.nn.functional.normalize(torch.randn(nd, h, generator=gen, dtype=torch.float64), dim=1)
    rel = torch.randint(-1, 2, (nq, nd), generator=gen).to(torch.int8)
    rel[0] = 0  # a query without any label
    rel[1, :] = -1
    rel[1, 2] = 1  # exactly one positive
    target = torch.tensor([int(torch.randint(0, nd, (1,), generator=gen)) for _ in range(nq)])
    rel[torch.arange(nq), target] = 1
    return q, d, rel, target


@pytest.mark.parametrize("in_batch", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_relation_infonce_matches_reference(seed: int, in_batch: bool) -> None:
    q, d, rel, _ = _random_case(seed)
    tau = 0.05
    loss = RelationInfoNCE(tau, in_batch)(q, d, rel)
    assert loss.item() == pytest.approx(reference_infonce(q, d, rel, tau, in_batch), rel=1e-9)


def test_relation_infonce_dual_view_rows_are_independent() -> None:
    """The same document is +1 in one row and -1 in the other: both rows must count it."""
    q = torch.nn.functional.normalize(torch.tensor([[1.0, 0.2], [0.9, 0.5]]), dim=1)
    d = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=1)
    rel = torch.tensor([[1, -1], [-1, 1]], dtype=torch.int8)
    loss = RelationInfoNCE(0.1)(q, d, rel)
    assert loss.item() == pytest.approx(reference_infonce(q, d, rel, 0.1, False))
    swapped = RelationInfoNCE(0.1)(q, d, -rel)
    assert swapped.item() != pytest.approx(loss.item())


def reference_inf(iq, d, rel, target, cross, sets, multivariate, tau):
    b = iq.shape[0]
    total_by_set = {s: 0.0 for s in sets}
    total_multi = 0.0
    for i in range(b):
        p = d[target[i]]
        positive = _dot(iq[i], p, tau)
        negs = {
            "P": [_dot(iq[i], d[m], tau) for m in range(d.shape[0]) if rel[i, m] != 1],
            "I": [_dot(cross[i, j], p, tau) for j in range(b) if j != i],
            "IQ": [_dot(iq[k], p, tau) for k in range(b) if k != i and rel[k, target[i]] != 1],
        }
        for s in sets:
            total_by_set[s] += _term(positive, negs[s]) / b
        total_multi += _term(positive, [n for s in sets for n in negs[s]]) / b
    return total_multi if multivariate else sum(total_by_set.values())


@pytest.mark.parametrize("multivariate", [False, True])
@pytest.mark.parametrize("sets", [["P"], ["I"], ["IQ"], ["P", "I"], ["P", "IQ"], ["P", "I", "IQ"]])
def test_inf_embed_matches_reference(sets: list[str], multivariate: bool) -> None:
    q, d, rel, target = _random_case(3)
    gen = torch.Generator().manual_seed(7)
    cross = torch.nn.functional.normalize(
        torch.randn(q.shape[0], q.shape[0], q.shape[1], generator=gen, dtype=torch.float64), dim=-1
    )
    loss = InfEmbedLoss(sets, multivariate, 0.05)(q, d, rel, target, cross)
    expected = reference_inf(q, d, rel, target, cross, sets, multivariate, 0.05)
    assert loss.item() == pytest.approx(expected, rel=1e-9)


def test_inf_embed_rejects_unknown_set() -> None:
    with pytest.raises(ValueError, match="subset"):
        InfEmbedLoss(["Q"])
