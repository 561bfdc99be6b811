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
  ``kind``; `load_reranker` reads any such folder through that kind's
  `dualview.models.kinds.SavedKind` (``load``), looked up in `dualview.models.kinds.MODEL_KINDS`
  (lazy entries: the registry is never empty, whichever module it is imported from);
- training builds a fresh reranker from its `ModelConfig` through the same kind's ``build``
  (`build_reranker`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from dualview.errors import ConfigError
from dualview.io.files import read_json_file
from dualview.models.config import ModelConfig
from dualview.models.kinds import MODEL_KINDS, reranker_kinds

#: The file that marks a saved folder as a dualview reranker: ``{"kind": ..., ...}``.
RERANKER_FILE = "dualview_reranker.json"


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


def build_reranker(config: ModelConfig) -> TrainableReranker:
    """A fresh trainable reranker of ``config.kind`` (from ``config.name_or_path``)."""
    return MODEL_KINDS.get(config.kind).build_reranker(config)


def reranker_kind(folder: str | Path) -> str | None:
    """The ``kind`` a saved folder declares in `RERANKER_FILE`, or None for other folders."""
    path = Path(folder) / RERANKER_FILE
    if not path.is_file():
        return None
    info = read_json_file(path)  # the one reader policy: BOM, CRLF, located errors
    kind = info.get("kind") if isinstance(info, dict) else None
    if not isinstance(kind, str):
        known = ", ".join(reranker_kinds())
        raise ConfigError(f"{path}: field 'kind': missing; expected a reranker kind ({known})")
    return kind


def load_reranker(folder: str | Path, device: str | None = None) -> Reranker:
    """The reranker saved in ``folder``, ready to score on ``device`` (None: the best one)."""
    folder = Path(folder)
    kind = reranker_kind(folder)
    if kind is None:
        raise ConfigError(f"{folder}: not a dualview reranker folder (no {RERANKER_FILE})")
    saved = MODEL_KINDS.get(kind, where=f"{folder / RERANKER_FILE}: field 'kind'")
    return saved.load_reranker(folder, device)
