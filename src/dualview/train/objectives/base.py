"""What a training objective is, and the registry that maps config names to objectives.

An objective is an ``nn.Module`` that

- declares the text groups it needs encoded (`Objective.needs`): ``queries`` (each
  record's query with its instruction), ``documents`` (the batch's de-duplicated documents)
  ``cross`` (every instruction paired with every query of the batch, B x B), or, for a
  reranker, ``pairs`` (the relevance logit of every labelled (query, document) pair of
  `dualview.train.batching.Batch.pair_index`, shape [P]);
- computes its loss from the gathered embeddings of those groups and the batch
  (`Objective.batch_loss`); its ``forward`` is the math on plain tensors.

The training step asks the objective what to encode and hands it the embeddings: it knows
no objective by name. A new objective is one module that subclasses `Objective` and calls
`register_objective` once, plus a line importing that module in
``dualview/train/objectives/__init__.py``; code outside the package registers through
`OBJECTIVES` or the entry-point group ``dualview.objectives`` (`dualview.registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import torch
from torch import nn

from dualview.registry import Registry

if TYPE_CHECKING:
    from dualview.train.batching import Batch

#: Every text group an objective may ask for.
TEXT_GROUPS = ("queries", "documents", "cross", "pairs")


class Objective(nn.Module):
    """Base of every training objective (see the module docstring)."""

    #: Text groups this objective needs (a subclass may compute it per instance).
    needs: ClassVar[frozenset[str]] = frozenset({"queries", "documents"})

    def batch_loss(self, embeddings: Mapping[str, torch.Tensor], batch: Batch) -> torch.Tensor:
        """The loss of ``batch`` from the gathered embeddings of `needs`."""
        raise NotImplementedError


class LossSettings(Protocol):
    """What a factory reads of the ``loss:`` block (`dualview.train.config.LossConfig`)."""

    objective: str
    temperature: float
    in_batch_negatives: bool
    inf_sets: Sequence[str]


Factory = Callable[[LossSettings], Objective]

#: ``loss.objective`` name -> factory; plugins use the entry-point group ``dualview.objectives``.
OBJECTIVES: Registry[Factory] = Registry(
    "objective", field="loss.objective", group="dualview.objectives"
)


def register_objective(name: str, factory: Factory) -> None:
    """Make ``loss.objective: NAME`` build ``factory(loss_config)``."""
    OBJECTIVES.register(name, factory)


def objective_names() -> list[str]:
    """Registered objective names, sorted."""
    return OBJECTIVES.names()


def build_objective(config: LossSettings) -> Objective:
    """The objective ``config.objective`` names, built from ``config``."""
    return OBJECTIVES.get(config.objective)(config)
