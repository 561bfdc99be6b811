"""Model kinds as the code below training sees them: one `SavedKind` per ``model.kind``.

A `SavedKind` says what a saved folder of its kind is to whoever reads it without training
it: whether it scores (query, document) pairs (a reranker: `build` makes the trainable model
from a `dualview.models.config.ModelConfig`, `load` reads a saved folder back as a
`dualview.models.reranker.Reranker`) or embeds them apart (a first stage, read by
sentence-transformers), which of its files describes it, and what its model card says
(`CardFacts`, `SavedKind.card_lines`). Evaluation, teacher loading and the model card look a
folder's kind up here (`dualview.models.saved.saved_kind`) and call it; none of them names a
kind. Training's side of a kind (its step, batches, token budget) is its
`dualview.train.families.ModelFamily`.

`MODEL_KINDS` holds the built-in kinds as lazy ``module:attribute`` paths, each kind object
next to its model (importing this module imports no model); code outside the package
registers a kind with ``MODEL_KINDS.register`` or the entry-point group
``dualview.model_kinds``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualview.errors import ConfigError
from dualview.models.pretrained import ModelLoadError
from dualview.registry import Registry

#: What a card reads: the model's ``model:`` block of its training config and the JSON
#: object of the kind's description file (``{}`` when absent).
CardLines = Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class CardFacts:
    """What a model card says of one kind: what it is, its Hub tags, how to use it."""

    what: str
    pipeline_tag: str
    tags: tuple[str, ...]
    usage: tuple[str, ...]
    library: str = "sentence-transformers"


#: How a card tells to use a reranker read through `dualview.models.rerankers.load_reranker`.
LOAD_RERANKER_USAGE = (
    "from dualview.models.rerankers import load_reranker",
    'model = load_reranker("PATH")',
    'query, instruction = "what can replace eggs in baking?", "Only vegan answers."',
    'print(model.score([query], [instruction], ["Flax seeds bind a batter."]))',
)


def no_card_lines(model: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    """A kind with no facts of its own on the card."""
    return []


@dataclass(frozen=True)
class SavedKind:
    """One model kind's saved folder (see the module docstring).

    ``build`` and ``load`` are set for a kind that scores pairs (`scores_pairs`): ``build(
    model_config)`` is a fresh `dualview.models.reranker.TrainableReranker`, ``load(folder,
    device)`` the `dualview.models.reranker.Reranker` saved in ``folder``. A kind without
    them embeds queries and documents apart, and evaluation reads its folder as a first stage.
    """

    name: str
    card: CardFacts
    #: the JSON file of the folder that describes the model (its query template...)
    description_file: str
    card_lines: CardLines = no_card_lines
    build: Callable[[Any], Any] | None = None
    load: Callable[[Path, str | None], Any] | None = None

    @property
    def scores_pairs(self) -> bool:
        """True: a reranker, evaluated over a first stage; False: a first stage itself."""
        return self.load is not None

    def load_reranker(self, folder: Path, device: str | None) -> Any:
        """The reranker saved in ``folder``; a kind that embeds, or weights or a tokenizer
        that cannot be read, is one located error."""
        if self.load is None:
            raise ConfigError(
                f"{folder}: a {self.name} folder embeds queries and documents; it is "
                "evaluated as a first-stage MODEL, not as a reranker"
            )
        try:
            return self.load(folder, device)
        except ModelLoadError as exc:  # its weights or tokenizer, not its description file
            label = self.name.replace("_", "-")
            raise ConfigError(f"{folder}: not a readable {label} folder ({exc.reason})") from None

    def build_reranker(self, config: Any) -> Any:
        """A fresh trainable reranker of ``config`` (a kind that embeds is an error)."""
        if self.build is None:
            raise ConfigError(f"model.kind: {self.name!r} is not a reranker kind")
        return self.build(config)


#: ``model.kind`` -> its saved kind; plugins: entry-point group ``dualview.model_kinds``.
MODEL_KINDS: Registry[SavedKind] = Registry(
    "model kind",
    field="model.kind",
    group="dualview.model_kinds",
    entries={
        "bi_encoder": "dualview.models.saved:BI_ENCODER",
        "cross_encoder": "dualview.models.cross_encoder:SAVED_KIND",
        "llm_reranker": "dualview.models.llm_reranker:SAVED_KIND",
    },
)


def reranker_kinds() -> list[str]:
    """The registered kinds that score pairs (every kind is imported)."""
    return [name for name, kind in MODEL_KINDS.items() if kind.scores_pairs]
