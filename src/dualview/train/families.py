"""Model families: what training needs to know about one ``model.kind``, behind one interface.

A `ModelFamily` builds the model from its config, says how loader workers tokenize a batch,
runs one step (through `dualview.train.gradcache.chunked_step`), measures a GradCache token
budget and saves the trained model. The trainer calls these and knows no kind by name; the
training config checks a kind and its objective against the family (`scores_pairs`).

What the saved folder is to evaluation, teachers and model cards (whether it scores pairs,
how it is loaded, its card lines) is the family's `ModelFamily.saved_kind`: the
`dualview.models.kinds.SavedKind` of the folder `ModelFamily.save` writes, one layer down,
where evaluation can read it.

Built in: ``bi_encoder`` (`BiEncoderFamily`: queries and documents embedded apart) and every
reranker kind of `dualview.models.kinds.MODEL_KINDS` (`RerankerFamily`: ``cross_encoder``,
``llm_reranker``; each scores (query, document) pairs together). A new kind is one module
with its model and a `ModelFamily` registered in `FAMILIES` (or through the entry-point group
``dualview.model_families``), plus its `SavedKind` in `dualview.models.kinds.MODEL_KINDS`
(group ``dualview.model_kinds``) when it saves a folder of a new kind: a reranker kind is
trained by `RerankerFamily(kind)`, which builds it through its saved kind's ``build``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import ClassVar, Protocol

from torch import nn

from dualview.io.atomic import atomic_copy, atomic_write_text
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.models.kinds import MODEL_KINDS, SavedKind
from dualview.models.reranker import build_reranker
from dualview.models.saved import BI_ENCODER, TRAIN_CONFIG_FILE, TRAIN_MANIFEST_FILE
from dualview.registry import Registry, UnknownNameError
from dualview.train.loader import BatchTokenizer, PairTokenizer
from dualview.train.memory import TokenBudget, auto_token_budget
from dualview.train.objectives import Objective
from dualview.train.rerank_step import rerank_step
from dualview.train.step import StepStats, contrastive_step, text_groups


class StepFunction(Protocol):
    """`dualview.train.step.contrastive_step` and `dualview.train.rerank_step.rerank_step`."""

    def __call__(self, model: nn.Module, loss_fn: Objective, batch, **options) -> StepStats: ...


class ModelFamily:
    """One trainable model kind (see the module docstring)."""

    #: The `dualview.models.kinds.MODEL_KINDS` name of the folder `save` writes (None: the
    #: family's own kind).
    saved_as: ClassVar[str | None] = None
    #: True: the step rounds GradCache chunk widths to ``pad_multiple`` (else to 8 only).
    rounds_chunk_widths: ClassVar[bool] = False

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @property
    def saved_kind(self) -> SavedKind:
        """What the saved folder is to evaluation, teachers and cards (module docstring);
        a family whose folder's kind nobody registered is one located error."""
        where = f"model.kind: {self.kind!r} saves a folder whose kind (ModelFamily.saved_as)"
        return MODEL_KINDS.get(self.saved_as or self.kind, where=where)

    @property
    def scores_pairs(self) -> bool:
        """True: the objective scores (query, document) pairs (a ``rerank_*`` or
        ``distill_*`` objective) and the model is evaluated as a reranker over a first stage."""
        return self.saved_kind.scores_pairs

    def build(self, config: ModelConfig) -> nn.Module:
        """The untrained model of ``config``."""
        raise NotImplementedError

    def step(self) -> StepFunction:
        """The step that accumulates one batch's gradient (`chunked_step` underneath)."""
        raise NotImplementedError

    def batch_preparation(
        self, model: nn.Module, loss_fn: Objective
    ) -> BatchTokenizer | PairTokenizer:
        """What a loader worker does to a batch before the step (tokenize its texts)."""
        raise NotImplementedError

    def token_budget(
        self, model: nn.Module, autocast: Callable[[], AbstractContextManager], config: ModelConfig
    ) -> TokenBudget:
        """GradCache's measured token budget for ``model`` (`auto_token_budget`)."""
        raise NotImplementedError

    def save(self, model: nn.Module, folder: Path, config_yaml: str, manifest: Path) -> Path:
        """Write the trained model with its training config and data manifest to ``folder``."""
        raise NotImplementedError


class BiEncoderFamily(ModelFamily):
    """``bi_encoder``: `dualview.models.bi_encoder.BiEncoder`, saved as a
    sentence-transformers folder."""

    rounds_chunk_widths = True
    saved_as = BI_ENCODER.name

    def build(self, config: ModelConfig) -> nn.Module:
        return BiEncoder(config)

    def step(self) -> StepFunction:
        return contrastive_step

    def batch_preparation(self, model: nn.Module, loss_fn: Objective) -> BatchTokenizer:
        lengths = {"query": model.max_length("query"), "document": model.max_length("document")}
        groups = functools.partial(
            text_groups, loss_fn=loss_fn, interaction=model.config.interaction
        )
        return BatchTokenizer(model.tokenizer, lengths, groups)

    def token_budget(self, model, autocast, config: ModelConfig) -> TokenBudget:
        length = max(config.query_max_length, config.document_max_length)
        return auto_token_budget(model, autocast, length)

    def save(self, model: nn.Module, folder: Path, config_yaml: str, manifest: Path) -> Path:
        return model.save(folder, train_config_yaml=config_yaml, manifest=manifest)


class RerankerFamily(ModelFamily):
    """A reranker kind (`dualview.models.reranker.TrainableReranker`, built by its
    `dualview.models.kinds.SavedKind`'s ``build``), saved as its own folder plus the
    training config and manifest."""

    def build(self, config: ModelConfig) -> nn.Module:
        return build_reranker(config)

    def step(self) -> StepFunction:
        return rerank_step

    def batch_preparation(self, model: nn.Module, loss_fn: Objective) -> PairTokenizer:
        return PairTokenizer(model.tokenize_pairs)

    def token_budget(self, model, autocast, config: ModelConfig) -> TokenBudget:
        return auto_token_budget(model, autocast, model.max_length, lambda inputs: model(**inputs))

    def save(self, model: nn.Module, folder: Path, config_yaml: str, manifest: Path) -> Path:
        model.save(folder)
        atomic_write_text(folder / TRAIN_CONFIG_FILE, config_yaml)
        if manifest.exists():
            atomic_copy(manifest, folder / TRAIN_MANIFEST_FILE)
        return folder


#: ``model.kind`` -> its family; plugins: entry-point group ``dualview.model_families``.
FAMILIES: Registry[ModelFamily] = Registry(
    "model kind",
    field="model.kind",
    group="dualview.model_families",
    entries={
        "bi_encoder": BiEncoderFamily("bi_encoder"),
        "cross_encoder": RerankerFamily("cross_encoder"),
        "llm_reranker": RerankerFamily("llm_reranker"),
    },
)


def pair_scoring_kinds() -> list[str]:
    """The registered kinds whose family scores pairs (the reranker kinds), for messages;
    a family whose saved kind is not registered is left out."""
    names = []
    for name, family in FAMILIES.items():
        try:
            if family.scores_pairs:
                names.append(name)
        except UnknownNameError:
            continue
    return names


def family_of(kind: str) -> ModelFamily:
    """The family of ``model.kind`` (one located error for a kind nobody registered)."""
    return FAMILIES.get(kind)
