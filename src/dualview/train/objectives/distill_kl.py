r"""Listwise KL distillation (``loss.objective: distill_kl``): each record's candidate
distribution under the student matched to the teacher's (RankDistiLLM / listwise KD).

Inputs (`dualview.train.objectives.distill`): per record :math:`i` the student's logits
:math:`s_{ik}` and the teacher's scores :math:`t_{ik}` over its candidates :math:`C_i`
(positives and negatives; padding left out), and the temperature :math:`\tau`
(``loss.temperature``; rerankers default to 1.0, a cosine teacher wants about 0.05):

.. math:: p_{ik} = \frac{e^{t_{ik}/\tau}}{\sum_{j \in C_i} e^{t_{ij}/\tau}},\qquad
          q_{ik} = \frac{e^{s_{ik}/\tau}}{\sum_{j \in C_i} e^{s_{ij}/\tau}}

.. math:: \mathcal{L} = \frac{1}{|B|}\sum_{i \in B}\mathrm{KL}(p_i \,\|\, q_i)
          = \frac{1}{|B|}\sum_{i \in B}\sum_{k \in C_i} p_{ik}\,(\log p_{ik} - \log q_{ik})

over the records :math:`B` with at least two candidates (one candidate has nothing to rank);
no :math:`\tau^2` factor. The labels only mark which slots are candidates: the teacher alone
says how they rank.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dualview.train.objectives.base import register_objective
from dualview.train.objectives.distill import DistillObjective, DistillSettings

#: Logit of a padding slot: its softmax weight is exactly 0 in float32.
PADDING_LOGIT = -1e9


class ListwiseKL(DistillObjective):
    """See the module docstring."""

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(
        self, scores: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        valid = labels != 0
        kept = valid.sum(1) >= 2
        if not bool(kept.any()):
            return scores.sum() * 0.0
        # padding: a finite floor (not -inf), so that 0 * (log p - log q) stays 0, never NaN
        student = (scores / self.temperature).masked_fill(~valid, PADDING_LOGIT)
        target = (teacher / self.temperature).masked_fill(~valid, PADDING_LOGIT)
        log_q = F.log_softmax(student[kept], dim=1)
        log_p = F.log_softmax(target[kept], dim=1)
        return (log_p.exp() * (log_p - log_q)).sum(1).mean()


def _listwise_kl(config: DistillSettings) -> ListwiseKL:
    return ListwiseKL(config.temperature)


register_objective("distill_kl", _listwise_kl, DistillSettings)
