"""Relation-matrix InfoNCE, the dual-view paper's objective (``loss.objective: infonce``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from dualview.train.objectives.base import Objective, ObjectiveSettings, register_objective

if TYPE_CHECKING:
    from dualview.train.batching import Batch


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """At least float32 (half-precision embeddings are scored in float32)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def contrast(positive: torch.Tensor, negatives: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per-row ``-s_pos + log(exp(s_pos) + sum exp(negatives))``; masked entries are -inf."""
    logits = torch.cat([positive.unsqueeze(1), *negatives], dim=1)
    return torch.logsumexp(logits, dim=1) - positive


def relation_contrast(
    scores: torch.Tensor, relations: torch.Tensor, in_batch_negatives: bool = False
) -> torch.Tensor:
    """`RelationInfoNCE`'s loss from the scaled logits ``scores`` [Q, D] (see its docstring)."""
    negative = relations == -1
    if in_batch_negatives:
        negative = negative | (relations == 0)
    negative_logits = scores.masked_fill(~negative, float("-inf"))
    rows, cols = torch.nonzero(relations == 1, as_tuple=True)
    if rows.numel() == 0:
        return scores.sum() * 0.0
    pair_loss = contrast(scores[rows, cols], [negative_logits[rows]])
    positives_per_row = (relations == 1).sum(1).clamp(min=1).to(pair_loss.dtype)
    weights = 1.0 / positives_per_row[rows]
    return (pair_loss * weights).sum() / (relations == 1).any(1).sum()


class RelationInfoNCE(Objective):
    r"""InfoNCE over a relation matrix.

    Inputs: query embeddings ``q`` [Q, H], document embeddings ``d`` [D, H] (the batch's
    de-duplicated documents) and relations ``R`` [Q, D] with 1 = positive, -1 = labelled
    negative, 0 = unlabelled. With :math:`s_{qd} = \langle q, d \rangle / \tau` and the
    negative set :math:`N_q = \{d : R_{qd} = -1\}` (plus :math:`\{d : R_{qd} = 0\}` when
    ``in_batch_negatives``), each positive pair (q, p) contributes

    .. math:: \ell_{qp} = -s_{qp} + \log\Big(e^{s_{qp}} + \sum_{n \in N_q} e^{s_{qn}}\Big)

    (other positives of q are neither in the numerator nor the denominator). The loss is
    :math:`\frac{1}{|Q^+|}\sum_{q \in Q^+} \frac{1}{|P_q|}\sum_{p \in P_q} \ell_{qp}`, the mean
    over queries that have a positive of the mean over their positives.
    """

    def __init__(self, temperature: float = 0.02, in_batch_negatives: bool = False) -> None:
        super().__init__()
        self.temperature = temperature
        self.in_batch_negatives = in_batch_negatives

    def forward(self, q: torch.Tensor, d: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        scores = (full_precision(q) @ full_precision(d).T) / self.temperature
        return relation_contrast(scores, relations, self.in_batch_negatives)

    def batch_loss(self, embeddings: Mapping[str, torch.Tensor], batch: Batch) -> torch.Tensor:
        queries = embeddings["queries"]
        return self(queries, embeddings["documents"], batch.relations.to(queries.device))


class InfoNCESettings(ObjectiveSettings):
    """``loss:`` of ``infonce``."""

    # True: every other document of the batch is a negative of each query (unlabelled ones
    # too); false: only its labelled negatives (DESIGN.md: unlabelled documents are masked).
    in_batch_negatives: bool = False


def _infonce(config: InfoNCESettings) -> RelationInfoNCE:
    return RelationInfoNCE(config.temperature, config.in_batch_negatives)


register_objective("infonce", _infonce, InfoNCESettings)
