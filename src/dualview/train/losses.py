"""Contrastive objectives: relation-matrix InfoNCE and the InF-Embed objectives.

All scores are ``s(x, y) = <x, y> / tau`` over (normally L2-normalised) embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def _full(x: torch.Tensor) -> torch.Tensor:
    """At least float32 (half-precision embeddings are scored in float32)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _contrast(positive: torch.Tensor, negatives: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per-row ``-s_pos + log(exp(s_pos) + sum exp(negatives))``; masked entries are -inf."""
    logits = torch.cat([positive.unsqueeze(1), *negatives], dim=1)
    return torch.logsumexp(logits, dim=1) - positive


class RelationInfoNCE(nn.Module):
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
        scores = (_full(q) @ _full(d).T) / self.temperature
        negative = relations == -1
        if self.in_batch_negatives:
            negative = negative | (relations == 0)
        negative_logits = scores.masked_fill(~negative, float("-inf"))
        rows, cols = torch.nonzero(relations == 1, as_tuple=True)
        if rows.numel() == 0:
            return scores.sum() * 0.0
        pair_loss = _contrast(scores[rows, cols], [negative_logits[rows]])
        positives_per_row = (relations == 1).sum(1).clamp(min=1).to(pair_loss.dtype)
        weights = 1.0 / positives_per_row[rows]
        return (pair_loss * weights).sum() / (relations == 1).any(1).sum()


class InfEmbedLoss(nn.Module):
    r"""InF-Embed objectives over (instruction, query, passage) with marginal negatives.

    For record i of the batch: passage :math:`p_i` (its first positive, column ``target[i]``
    of the documents ``d``), and :math:`iq(j, k)` the embedding of query :math:`Q_k` with
    instruction :math:`I_j`; ``iq`` [B, H] holds :math:`iq(i, i)` and ``cross`` [B, B, H] holds
    ``cross[i, j]`` = :math:`iq(j, i)`. The positive is :math:`s_i = s(p_i, iq(i, i))` and the
    marginal negative sets vary one variable at a time:

    - ``P``: :math:`s(d_m, iq(i, i))` for every batch document m that is not a positive of i;
    - ``I``: :math:`s(p_i, iq(j, i))` for j != i (other instructions on the same query);
    - ``IQ``: :math:`s(p_i, iq(k, k))` for k != i, unless :math:`p_i` is a positive of k.

    *Univariate*: :math:`\sum_{S} \frac{1}{B}\sum_i -s_i + \log(e^{s_i} + \sum_{n \in S_i} e^{n})`,
    one InfoNCE term per chosen set S. *Multivariate*: one term per i whose denominator is the
    union of the chosen sets, :math:`\frac{1}{B}\sum_i -s_i + \log(e^{s_i} + \sum_{S}\sum_{n
    \in S_i} e^{n})`.
    """

    def __init__(
        self,
        sets: Sequence[str] = ("P", "I"),
        multivariate: bool = True,
        temperature: float = 0.02,
    ) -> None:
        super().__init__()
        unknown = set(sets) - {"P", "I", "IQ"}
        if unknown or not sets:
            raise ValueError(f"sets must be a non-empty subset of P, I, IQ; got {list(sets)}")
        self.sets = list(dict.fromkeys(sets))
        self.multivariate = multivariate
        self.temperature = temperature

    @property
    def needs_cross(self) -> bool:
        return "I" in self.sets

    def marginal_logits(
        self,
        iq: torch.Tensor,
        d: torch.Tensor,
        relations: torch.Tensor,
        target: torch.Tensor,
        cross: torch.Tensor | None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The positive scores [B] and each set's masked negative logits [B, K]."""
        tau = self.temperature
        iq, d = _full(iq), _full(d)
        batch = torch.arange(iq.shape[0], device=iq.device)
        passages = d[target]
        positive = (iq * passages).sum(-1) / tau
        off_diagonal = ~torch.eye(iq.shape[0], dtype=torch.bool, device=iq.device)
        logits: dict[str, torch.Tensor] = {}
        if "P" in self.sets:
            scores = iq @ d.T / tau
            logits["P"] = scores.masked_fill(relations == 1, float("-inf"))
        if "I" in self.sets:
            if cross is None:
                raise ValueError("the I set needs the cross embeddings iq(j, i)")
            scores = torch.einsum("ijh,ih->ij", _full(cross), passages) / tau
            logits["I"] = scores.masked_fill(~off_diagonal, float("-inf"))
        if "IQ" in self.sets:
            scores = passages @ iq.T / tau  # [i, k] = s(p_i, iq(k, k))
            shared = (relations[:, target] == 1).T  # [i, k]: p_i is a positive of k
            keep = off_diagonal & ~shared
            keep[batch, batch] = False
            logits["IQ"] = scores.masked_fill(~keep, float("-inf"))
        return positive, logits

    def forward(
        self,
        iq: torch.Tensor,
        d: torch.Tensor,
        relations: torch.Tensor,
        target: torch.Tensor,
        cross: torch.Tensor | None = None,
    ) -> torch.Tensor:
        positive, logits = self.marginal_logits(iq, d, relations, target, cross)
        if self.multivariate:
            return _contrast(positive, [logits[s] for s in self.sets]).mean()
        return sum(_contrast(positive, [logits[s]]).mean() for s in self.sets)
