"""InF-Embed's objectives over (instruction, query, passage) with marginal negatives
(``loss.objective: inf_univariate`` or ``inf_multivariate``, sets in ``loss.inf_sets``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import torch
from pydantic import Field

from dualview.train.objectives.base import Objective, ObjectiveSettings, register_objective
from dualview.train.objectives.infonce import contrast, full_precision

if TYPE_CHECKING:
    from dualview.train.batching import Batch

#: A marginal-negative set (`InfEmbedLoss`).
MarginalSet = Literal["P", "I", "IQ"]


class InfEmbedSettings(ObjectiveSettings):
    """``loss:`` of ``inf_univariate`` and ``inf_multivariate``."""

    # Which marginal-negative sets enter the objective (at least one).
    inf_sets: list[MarginalSet] = Field(default_factory=lambda: ["P", "I"], min_length=1)


class InfEmbedLoss(Objective):
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

    @property
    def needs(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset({"queries", "documents", *(("cross",) if self.needs_cross else ())})

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
        iq, d = full_precision(iq), full_precision(d)
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
            scores = torch.einsum("ijh,ih->ij", full_precision(cross), passages) / tau
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
            return contrast(positive, [logits[s] for s in self.sets]).mean()
        return sum(contrast(positive, [logits[s]]).mean() for s in self.sets)

    def batch_loss(self, embeddings: Mapping[str, torch.Tensor], batch: Batch) -> torch.Tensor:
        queries = embeddings["queries"]
        relations = batch.relations.to(queries.device)
        cross = embeddings.get("cross")
        if cross is not None:
            n = len(batch.records)
            cross = cross.view(n, n, -1)
        target = batch.first_positive.to(queries.device)
        return self(queries, embeddings["documents"], relations, target, cross)


def _inf_embed(multivariate: bool):
    def build(config: InfEmbedSettings) -> InfEmbedLoss:
        return InfEmbedLoss(config.inf_sets, multivariate, config.temperature)

    return build


register_objective("inf_univariate", _inf_embed(multivariate=False), InfEmbedSettings)
register_objective("inf_multivariate", _inf_embed(multivariate=True), InfEmbedSettings)
