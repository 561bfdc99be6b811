r"""What the distillation objectives share (``loss.objective: distill_margin_mse | distill_kl``).

A distillation objective trains a reranker to score like a teacher (the first-stage
bi-encoder's cosine, or any reranker; ``loss.teacher``) whose scores were computed once
and cached (`dualview.train.teacher`). The batch carries the teacher score :math:`t_{ik}` of
every pair it scores (`dualview.train.batching.Batch.teacher_scores`, aligned with
`dualview.train.batching.Batch.pair_index`); the student's logits :math:`s_{ik}` arrive as
the ``pairs`` group, as for the other reranker objectives (`rerank`), and both are grouped
per record :math:`i` with the labels :math:`y_{ik} \in \{+1, -1\}` (0: padding).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import torch

from dualview.errors import ConfigError
from dualview.train.objectives.base import Objective
from dualview.train.objectives.infonce import full_precision
from dualview.train.objectives.rerank import group_pairs

if TYPE_CHECKING:
    from dualview.train.batching import Batch


class DistillObjective(Objective):
    """Base of the distillation objectives: student logits and teacher scores per record."""

    needs = frozenset({"pairs"})
    #: The batch must carry teacher scores (`dualview.train.config.LossConfig` checks that
    #: ``loss.teacher`` is set).
    needs_teacher: ClassVar[bool] = True

    def forward(
        self, scores: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """The loss from grouped student logits ``scores`` [B, K], teacher scores [B, K] and
        labels [B, K] (0: padding)."""
        raise NotImplementedError

    def batch_loss(self, embeddings: Mapping[str, torch.Tensor], batch: Batch) -> torch.Tensor:
        if batch.teacher_scores is None:
            raise ConfigError("loss.teacher: a distillation objective needs a teacher")
        flat = full_precision(embeddings["pairs"])
        rows, cols = batch.pair_index()
        rows, cols = rows.to(flat.device), cols.to(flat.device)
        labels = batch.relations.to(flat.device)[rows, cols]
        teacher = batch.teacher_scores.to(flat.device, flat.dtype)
        scores, grouped = group_pairs(flat, rows, labels, len(batch.records))
        targets, _ = group_pairs(teacher, rows, labels, len(batch.records))
        return self(scores, targets, grouped)
