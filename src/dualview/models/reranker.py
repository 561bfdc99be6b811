"""Rerankers: models that read the instruction, the query and a passage together and score them.

Two families implement this contract:

- cross-encoders (``model.kind: cross_encoder``): an encoder with a one-logit scoring head,
  saved as a sentence-transformers ``CrossEncoder`` folder;
- LLM rerankers (``model.kind: llm_reranker``): a causal LM whose relevance score is the
  log-odds of "true" against "false" after a prompt (FollowIR-7B, Rank1), trained with LoRA.

Training and evaluation meet a reranker only through this module:

- `Reranker` is what evaluation needs: `Reranker.score` scores (query, instruction, passage)
  triples and `Reranker.fingerprint` identifies weights, template and precision (the key of
  the score cache);
- `TrainableReranker` is what the training step needs: tokenize pairs, score token ids with
  gradients, save a folder;
- a saved reranker folder holds ``dualview_reranker.json`` (`RERANKER_FILE`) naming its
  ``kind``; `load_reranker` reads any such folder through the loader registered for its kind
  (`register_reranker_kind`);
- training builds a fresh reranker from its `ModelConfig` through the builder registered for
  ``model.kind`` (`register_reranker_builder`, `build_reranker`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from dualview.errors import ConfigError
from dualview.io.files import read_json_file
from dualview.models.config import ModelConfig
from dualview.models.pretrained import ModelLoadError

#: The file that marks a saved folder as a dualview reranker: ``{"kind": ..., ...}``.
RERANKER_FILE = "dualview_reranker.json"

#: Model kinds that rerank (``model.kind`` in a training config); the bi-encoder is the default.
RERANKER_KINDS = ("cross_encoder", "llm_reranker")


@runtime_checkable
class Reranker(Protocol):
    """A model that scores (query, instruction, passage) triples; higher is more relevant."""

    @property
    def fingerprint(self) -> str:
        """Weights, template and precision in one string: equal fingerprints, equal scores."""
        ...

    def score(
        self,
        queries: Sequence[str],
        instructions: Sequence[str],
        passages: Sequence[str],
        batch_size: int = 32,
    ) -> np.ndarray:
        """Relevance of ``passages[i]`` to ``queries[i]`` under ``instructions[i]``, float32 [n]."""
        ...


@runtime_checkable
class TrainableReranker(Protocol):
    """What the training step needs of a reranker (an ``nn.Module``)."""

    def tokenize_pairs(self, query_texts: Sequence[str], passages: Sequence[str]) -> Any:
        """Token ids of each (query text with its instruction, passage) pair."""
        ...

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Relevance logits [n] of a padded chunk of pairs, with gradients."""
        ...

    def save(self, folder: str | Path) -> None:
        """Write the folder `load_reranker` reads (with `RERANKER_FILE`)."""
        ...

    # What the trainer (`dualview.train.rerank_step`) also uses: ``tokenize_pairs`` returns a
    # `dualview.models.tokens.TokenizedTexts` (it may be called from loader threads), and
    # ``pad_pairs(tokens, indices)`` gives the ``forward(**inputs)`` inputs of a chunk on the
    # model's device.
    def pad_pairs(self, tokens: Any, indices: Sequence[int] | torch.Tensor) -> dict:
        """Padded inputs of the pairs ``tokens[indices]`` on the model's device."""
        ...


Loader = Callable[[Path, str | None], Reranker]
_LOADERS: dict[str, Loader] = {}


def register_reranker_kind(kind: str, loader: Loader) -> None:
    """Make `load_reranker` read folders whose `RERANKER_FILE` says ``kind`` with ``loader``
    (called as ``loader(folder, device)``)."""
    if kind in _LOADERS:
        raise ValueError(f"reranker kind {kind!r} is already registered")
    _LOADERS[kind] = loader


Builder = Callable[[ModelConfig], TrainableReranker]
_BUILDERS: dict[str, Builder] = {}


def register_reranker_builder(kind: str, builder: Builder) -> None:
    """Make `build_reranker` build ``model.kind: kind`` as ``builder(model_config)``."""
    if kind in _BUILDERS:
        raise ValueError(f"reranker builder {kind!r} is already registered")
    _BUILDERS[kind] = builder


def build_reranker(config: ModelConfig) -> TrainableReranker:
    """A fresh trainable reranker of ``config.kind`` (from ``config.name_or_path``)."""
    builder = _BUILDERS.get(config.kind)
    if builder is None:
        known = ", ".join(sorted(_BUILDERS)) or "none registered"
        raise ConfigError(f"model.kind: {config.kind!r} is not a trainable reranker ({known})")
    return builder(config)


def reranker_kind(folder: str | Path) -> str | None:
    """The ``kind`` a saved folder declares in `RERANKER_FILE`, or None for other folders."""
    path = Path(folder) / RERANKER_FILE
    if not path.is_file():
        return None
    info = read_json_file(path)  # the one reader policy: BOM, CRLF, located errors
    kind = info.get("kind") if isinstance(info, dict) else None
    if not isinstance(kind, str):
        raise ConfigError(f"{path}: field 'kind': missing; expected one of {RERANKER_KINDS}")
    return kind


def is_reranker(folder: str | Path) -> bool:
    """True for a folder saved by a dualview reranker."""
    return reranker_kind(folder) is not None


def load_reranker(folder: str | Path, device: str | None = None) -> Reranker:
    """The reranker saved in ``folder``, ready to score on ``device`` (None: the best one)."""
    folder = Path(folder)
    kind = reranker_kind(folder)
    if kind is None:
        raise ConfigError(f"{folder}: not a dualview reranker folder (no {RERANKER_FILE})")
    loader = _LOADERS.get(kind)
    if loader is None:
        known = ", ".join(sorted(_LOADERS)) or "none registered"
        raise ConfigError(f"{folder / RERANKER_FILE}: field 'kind': unknown {kind!r} ({known})")
    try:
        return loader(folder, device)
    except ModelLoadError as exc:  # its weights or tokenizer, not what RERANKER_FILE says
        label = kind.replace("_", "-")
        raise ConfigError(f"{folder}: not a readable {label} folder ({exc.reason})") from None
