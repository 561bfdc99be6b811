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
from pydantic import ValidationInfo, field_validator

from dualview.errors import ConfigError
from dualview.train.objectives.base import Objective, ObjectiveSettings
from dualview.train.objectives.infonce import full_precision
from dualview.train.objectives.rerank import group_pairs

if TYPE_CHECKING:
    from dualview.train.batching import Batch


class DistillSettings(ObjectiveSettings):
    """``loss:`` of a distillation objective."""

    # The teacher whose cached scores the reranker learns, a bi-encoder (its cosine) or a
    # reranker folder, as a path or a name (embedded:minilm).
    teacher: str | None = None

    @field_validator("teacher")
    @classmethod
    def _teacher_set(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            raise ValueError(
                f"loss.objective {info.data.get('objective')!r} distils from a teacher; set "
                "loss.teacher to a bi-encoder or reranker (a path or a name: embedded:minilm)"
            )
        return value


class DistillObjective(Objective):
    """Base of the distillation objectives: student logits and teacher scores per record."""

    needs = frozenset({"pairs"})
    #: The batch must carry teacher scores (`DistillSettings` requires ``loss.teacher``).
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
