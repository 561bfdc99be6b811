r"""MarginMSE distillation (``loss.objective: distill_margin_mse``), as sentence-transformers'
``MarginMSELoss`` and the MS MARCO cross-encoders use it (Hofstätter et al., 2020).

Inputs (`dualview.train.objectives.distill`): per record :math:`i` the student's logits
:math:`s_{ik}`, the teacher's scores :math:`t_{ik}` and the labels :math:`y_{ik}` of its
candidates (positives :math:`P_i`, negatives :math:`N_i`). Over every (record, positive,
negative) triple :math:`T = \{(i, p, n): p \in P_i, n \in N_i\}`:

.. math:: \mathcal{L} = \frac{1}{|T|}\sum_{(i,p,n) \in T}
          \big((s_{ip} - s_{in}) - (t_{ip} - t_{in})\big)^2

the mean squared error between the student's and the teacher's margins (with one positive
and one negative per record, exactly ``MSELoss(student_margin, teacher_margin)``). Only
margins are matched, so the student's scores may sit at any offset from the teacher's; no
temperature. A batch without such a triple gives 0.
"""

from __future__ import annotations

import torch

from dualview.train.objectives.base import register_objective
from dualview.train.objectives.distill import DistillObjective, DistillSettings


class MarginMSE(DistillObjective):
    """See the module docstring."""

    def forward(
        self, scores: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        triples = (labels == 1).unsqueeze(2) & (labels == -1).unsqueeze(1)  # [B, p, n]
        if not bool(triples.any()):
            return scores.sum() * 0.0
        student = scores.unsqueeze(2) - scores.unsqueeze(1)
        target = teacher.unsqueeze(2) - teacher.unsqueeze(1)
        return ((student - target) ** 2)[triples].mean()


def _margin_mse(config: DistillSettings) -> MarginMSE:
    return MarginMSE()


register_objective("distill_margin_mse", _margin_mse, DistillSettings)
