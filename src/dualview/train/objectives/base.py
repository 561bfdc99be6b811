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

**Settings by objective.** The ``loss:`` block is validated by the settings class of the
objective it names (`ObjectiveSettings`, or a subclass the objective registers with it:
`ObjectiveFactory`), chosen by `objective_settings` through the registry; a key that the
chosen objective does not use is a located error naming it (``loss.inf_sets: objective
'infonce' uses no inf_sets``). Old files stay valid: a key that every ``loss:`` block had
before objectives had their own settings (`LEGACY_FIELDS`) is accepted when it holds the
value it had when left out, and every settings object is written with those keys, so saved
configs, checkpoints' config snapshots and stage keys read as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from pydantic import Field, ValidationError, model_serializer
from pydantic_core import InitErrorDetails, PydanticCustomError
from torch import nn

from dualview.config import StrictModel
from dualview.errors import DualviewError
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


#: ``loss.objective`` when the block leaves it out.
DEFAULT_OBJECTIVE = "infonce"
#: Keys of every ``loss:`` block before objectives had their own settings, with the value
#: each had when left out, in their old order (module docstring: "Settings by objective").
LEGACY_FIELDS: dict[str, Any] = {
    "objective": DEFAULT_OBJECTIVE,
    "temperature": 0.02,
    "in_batch_negatives": False,
    "inf_sets": ["P", "I"],
    "teacher": None,
}


class ObjectiveSettings(StrictModel):
    """The ``loss:`` block of an objective whose only setting is its temperature; an
    objective with more settings registers a subclass (`ObjectiveFactory`)."""

    objective: str = DEFAULT_OBJECTIVE
    # Bi-encoders: 0.02 (cosine similarities); rerankers: 1.0 when left out (raw logits).
    temperature: float = Field(0.02, gt=0)

    @model_serializer(mode="wrap")
    def _with_legacy_keys(self, handler: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """The keys every ``loss:`` block was written with (`LEGACY_FIELDS`, their old
        order), then this objective's own."""
        data = handler(self)
        legacy = {key: data.pop(key, default) for key, default in LEGACY_FIELDS.items()}
        return {**legacy, **data}


#: Old name of `ObjectiveSettings` (the ``loss:`` block; `dualview.train.config.LossConfig`).
LossSettings = ObjectiveSettings
Factory = Callable[[Any], "Objective"]


@dataclass(frozen=True)
class ObjectiveFactory:
    """A registered objective: ``build(settings)`` makes it, ``settings`` validates its
    ``loss:`` block. A plain callable registered in `OBJECTIVES` (a plugin's function) has
    the settings `ObjectiveSettings`."""

    build: Factory
    settings: type[ObjectiveSettings] = ObjectiveSettings

    def __call__(self, settings: ObjectiveSettings) -> Objective:
        return self.build(settings)


#: ``loss.objective`` name -> factory; plugins use the entry-point group ``dualview.objectives``.
OBJECTIVES: Registry[Factory] = Registry(
    "objective", field="loss.objective", group="dualview.objectives"
)


def register_objective(
    name: str, factory: Factory, settings: type[ObjectiveSettings] = ObjectiveSettings
) -> None:
    """Make ``loss.objective: NAME`` build ``factory(settings)``, its ``loss:`` block
    validated by ``settings``."""
    OBJECTIVES.register(name, ObjectiveFactory(factory, settings))


def objective_names() -> list[str]:
    """Registered objective names, sorted."""
    return OBJECTIVES.names()


def settings_class(name: str) -> type[ObjectiveSettings]:
    """The settings class of the objective ``name`` (`ObjectiveSettings` unless it brings one)."""
    return getattr(OBJECTIVES.get(name), "settings", ObjectiveSettings)


def _error(title: str, key: str, kind: str, message: str, value: Any) -> ValidationError:
    """A validation error at ``key`` of the ``loss:`` block (located by the caller's field)."""
    detail = InitErrorDetails(
        type=PydanticCustomError(kind, "{message}", {"message": message}),
        loc=(key,),
        input=value,
    )
    return ValidationError.from_exception_data(title, [detail])


def _left_as_default(key: str, value: Any) -> bool:
    """True for a legacy key holding the value it had when left out (an old file's)."""
    return key in LEGACY_FIELDS and LEGACY_FIELDS[key] == value


def objective_settings(data: Any) -> Any:
    """The ``loss:`` block ``data`` (a mapping, or settings of any objective) as the
    settings of the objective it names (module docstring); anything else is returned for
    pydantic to reject."""
    if isinstance(data, ObjectiveSettings):
        if type(data) is settings_class(data.objective):
            return data
        data = {key: getattr(data, key) for key in data.model_fields_set | {"objective"}}
    if not isinstance(data, Mapping):
        return data
    name = data.get("objective", DEFAULT_OBJECTIVE)
    if not isinstance(name, str) or name not in OBJECTIVES:
        message = OBJECTIVES.unknown_message(name, where="")
        raise _error("loss", "objective", "unknown_objective", message, name)
    cls = settings_class(name)
    own = cls.model_fields
    kept = {k: v for k, v in data.items() if k in own or not _left_as_default(k, v)}
    for key, value in kept.items():
        if key not in own:
            known = ", ".join(own)
            message = f"objective {name!r} uses no {key} (its settings: {known})"
            raise _error(cls.__name__, key, "not_a_setting", message, value)
    return cls.model_validate(kept)


def objectives_needing(group: str) -> list[str]:
    """The registered objectives whose `Objective.needs` holds ``group`` (``pairs``: the
    reranker objectives), each built from its settings' defaults; one that cannot be is left
    out (for messages that list the choices)."""
    names = []
    for name in OBJECTIVES.names():
        settings = settings_class(name).model_construct(objective=name)
        try:
            objective = OBJECTIVES.get(name)(settings)
        except (DualviewError, ValueError, TypeError, AttributeError):
            continue
        if group in objective.needs:
            names.append(name)
    return names


def build_objective(config: Any) -> Objective:
    """The objective ``config.objective`` names, built from its settings
    (`objective_settings`: a ``loss:`` mapping or settings of any objective)."""
    settings = objective_settings(config)
    return OBJECTIVES.get(settings.objective)(settings)
