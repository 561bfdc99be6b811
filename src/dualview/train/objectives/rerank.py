r"""Reranker objectives (``loss.objective: rerank_bce | rerank_listwise | rerank_lambda``).

A reranker scores every labelled (query, document) pair of a batch
(`dualview.train.batching.Batch.pair_index`: each record's positives and its first
``num_negatives`` labelled negatives, instruction negatives first). The objectives receive
those logits as the ``pairs`` group, a flat tensor [P], and group them per record: record
:math:`i` has its logits :math:`s_{ik}` and labels :math:`y_{ik} \in \{+1, -1\}` (positive,
negative). In a dual-view batch the passage that is the positive of one view is an
instruction negative of the other, so only the instruction tells the two pairs apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from dualview.train.objectives.base import Objective, ObjectiveSettings, register_objective
from dualview.train.objectives.infonce import full_precision, relation_contrast

if TYPE_CHECKING:
    from dualview.train.batching import Batch


def group_pairs(
    scores: torch.Tensor, rows: torch.Tensor, labels: torch.Tensor, num_rows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat pair logits [P] (row-major, ``rows`` sorted) as ``(S, Y)`` [num_rows, K]: each
    record's logits and labels, padded with logit 0 and label 0 to the longest record."""
    counts = torch.bincount(rows, minlength=num_rows)
    width = int(counts.max()) if rows.numel() else 0
    starts = torch.cumsum(counts, 0) - counts
    slots = torch.arange(rows.numel(), device=rows.device) - starts[rows]
    grouped = scores.new_zeros(num_rows, width)
    grouped = grouped.index_put((rows, slots), scores)
    grouped_labels = torch.zeros(num_rows, width, dtype=torch.int8, device=rows.device)
    grouped_labels[rows, slots] = labels.to(torch.int8)
    return grouped, grouped_labels


class RerankObjective(Objective):
    """Base of the reranker objectives: the ``pairs`` logits, grouped per record."""

    needs = frozenset({"pairs"})

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss from grouped logits ``scores`` [B, K] and labels [B, K] (0: padding)."""
        raise NotImplementedError

    def batch_loss(self, embeddings: Mapping[str, torch.Tensor], batch: Batch) -> torch.Tensor:
        flat = full_precision(embeddings["pairs"])
        rows, cols = batch.pair_index()
        rows, cols = rows.to(flat.device), cols.to(flat.device)
        labels = batch.relations.to(flat.device)[rows, cols]
        scores, grouped = group_pairs(flat, rows, labels, len(batch.records))
        return self(scores, grouped)


class PointwiseBCE(RerankObjective):
    r"""Pointwise binary cross-entropy on the raw logits (``rerank_bce``):

    .. math:: \frac{1}{|P|}\sum_{(i,k)} -\big[t_{ik}\log\sigma(s_{ik})
              + (1 - t_{ik})\log(1 - \sigma(s_{ik}))\big],\quad t_{ik} = [y_{ik} = +1]

    over all labelled pairs; no temperature (the logit is the prediction).
    """

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        valid = labels != 0
        targets = (labels == 1).to(scores.dtype)
        return F.binary_cross_entropy_with_logits(scores[valid], targets[valid])


class ListwiseSoftmax(RerankObjective):
    r"""Listwise softmax cross-entropy over each record's group (``rerank_listwise``).

    With :math:`z = s / \tau`, positives :math:`P_i` and negatives :math:`N_i` of record i:

    .. math:: \ell_{ip} = -z_{ip} + \log\Big(e^{z_{ip}} + \sum_{n \in N_i} e^{z_{in}}\Big)

    and the loss :math:`\frac{1}{|B^+|}\sum_{i \in B^+}\frac{1}{|P_i|}\sum_{p \in P_i}\ell_{ip}`
    over the records :math:`B^+` that have a positive: the relation InfoNCE of the bi-encoder
    (`dualview.train.objectives.infonce.relation_contrast`) on the record's own candidates.
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return relation_contrast(scores / self.temperature, labels)


class PairwiseLambda(RerankObjective):
    r"""Pairwise logistic loss weighted by LambdaRank's NDCG swap (``rerank_lambda``).

    For record i, rank :math:`r_{ik}` (1 = best) of each candidate by its current logit (no
    gradient through the ranks), gain 1 for a positive, 0 for a negative, and
    :math:`\mathrm{IDCG}_i = \sum_{j=1}^{|P_i|} 1/\log_2(1 + j)`. Each (positive p, negative n)
    pair weighs what swapping them changes in NDCG,

    .. math:: \Delta_{ipn} = \frac{|1/\log_2(1 + r_{ip}) - 1/\log_2(1 + r_{in})|}{\mathrm{IDCG}_i}

    and the loss is :math:`\frac{1}{|B^+|}\sum_{i \in B^+}\frac{1}{|P_i||N_i|}\sum_{p, n}
    \Delta_{ipn}\,\log\big(1 + e^{-(s_{ip} - s_{in})/\tau}\big)` over the records :math:`B^+`
    that have a positive and a negative.
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        valid, positive, negative = labels != 0, labels == 1, labels == -1
        ranked = scores.detach().masked_fill(~valid, float("-inf"))
        order = torch.argsort(ranked, dim=1, descending=True, stable=True)
        ranks = torch.empty_like(order)
        positions = torch.arange(1, order.shape[1] + 1, device=order.device).expand_as(order)
        ranks.scatter_(1, order, positions)
        discount = 1.0 / torch.log2(1.0 + ranks.to(scores.dtype))
        ideal_positions = torch.arange(1, scores.shape[1] + 1, device=scores.device)
        ideal_gain = 1.0 / torch.log2(1.0 + ideal_positions.to(scores.dtype))
        ideal = (ideal_gain.unsqueeze(0) * (ideal_positions <= positive.sum(1, keepdim=True))).sum(
            1
        )
        pairs = positive.unsqueeze(2) & negative.unsqueeze(1)  # [B, p, n]
        delta = (discount.unsqueeze(2) - discount.unsqueeze(1)).abs() / ideal.clamp(min=1e-12)[
            :, None, None
        ]
        margin = (scores.unsqueeze(2) - scores.unsqueeze(1)) / self.temperature
        loss = (delta * F.softplus(-margin)).masked_fill(~pairs, 0.0)
        counts = pairs.sum((1, 2))
        kept = counts > 0
        if not bool(kept.any()):
            return scores.sum() * 0.0
        per_record = loss.sum((1, 2))[kept] / counts[kept].to(scores.dtype)
        return per_record.mean()


def _bce(config: ObjectiveSettings) -> PointwiseBCE:
    return PointwiseBCE()


register_objective("rerank_bce", _bce)
register_objective("rerank_listwise", lambda config: ListwiseSoftmax(config.temperature))
register_objective("rerank_lambda", lambda config: PairwiseLambda(config.temperature))
