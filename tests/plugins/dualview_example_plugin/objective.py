"""``loss.objective: hinge_margin``: ``mean over records of max(0, m - s(q, p+) + s(q, n-))``
with s the cosine, p+ the hardest positive and n- the hardest negative of each query, and
the margin m = ``loss.temperature``."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from dualview.train.objectives import Objective


class HingeMargin(Objective):
    """Hinge loss on the gap between the hardest positive and the hardest negative."""

    def __init__(self, margin: float) -> None:
        super().__init__()
        self.margin = margin

    def batch_loss(self, embeddings: Mapping[str, torch.Tensor], batch) -> torch.Tensor:
        scores = embeddings["queries"] @ embeddings["documents"].T
        relations = batch.relations.to(scores.device)
        positive = scores.masked_fill(relations != 1, float("inf")).min(1).values
        negative = scores.masked_fill(relations != -1, float("-inf")).max(1).values
        return torch.relu(self.margin - positive + negative).mean()


def build(config) -> HingeMargin:
    """The factory the objective registry calls with the ``loss:`` block."""
    return HingeMargin(config.temperature)
