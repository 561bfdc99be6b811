"""Cross-encoder rerankers (``model.kind: cross_encoder``): an encoder reads the query with its
instruction and one passage as a text pair, and a one-logit head scores the pair.

- **Model.** ``AutoModelForSequenceClassification`` with ``num_labels=1`` on any encoder
  folder (``embedded:minilm``, a bi-encoder, a pretrained cross-encoder); from an encoder that
  has no scoring head the head is new (randomly initialised from the run's seed).
- **Text.** The first text of a pair is the query joined with its instruction through
  ``model.query_template`` (as the bi-encoder joins them); the second is the passage as
  evaluation reads it (``title text``). A pair is truncated ``longest_first`` to
  ``max_length`` = ``query_max_length + document_max_length``, capped at the backbone's
  position limit.
- **Saved folder.** A sentence-transformers ``CrossEncoder`` folder whose activation is the
  identity, so ``CrossEncoder(folder).predict(pairs)`` returns the raw logits that `score`
  returns, plus `dualview.models.reranker.RERANKER_FILE` with the kind, the template and the
  maximum length.

Scoring (`CrossEncoderReranker.score`) tokenizes all pairs at once, sorts them by token
length and runs batches of similar length in ``inference_mode``, each padded to its longest
pair (sentence-transformers sorts by characters; on CUDA widths are rounded up to 8).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from dualview.config import validate_config
from dualview.data.formats.common import join_query_instruction
from dualview.errors import ConfigError
from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_json_file
from dualview.io.folder import atomic_dir, staging_dir
from dualview.models.config import ModelConfig
from dualview.models.decoder import export_backbone
from dualview.models.fingerprint import update_with_weights
from dualview.models.kinds import CardFacts, SavedKind
from dualview.models.pretrained import from_pretrained, load_complete
from dualview.models.reranker import RERANKER_FILE
from dualview.models.thread_tokenizer import ThreadTokenizers
from dualview.models.tokens import PAD_MULTIPLE, TokenizedPairs, tokenize_pairs

KIND = "cross_encoder"


def _check_supported(config: ModelConfig) -> None:
    """Options of `ModelConfig` that only a bi-encoder has."""
    if config.lora is not None:
        raise ConfigError("model.lora: a cross_encoder trains all its weights (set lora: null)")
    if config.interaction != "concat":
        raise ConfigError("model.interaction: a cross_encoder reads the joined text (concat)")
    if config.unpadded:
        raise ConfigError("model.unpadded: not supported for a cross_encoder")


def pair_max_length(config: ModelConfig, backbone: nn.Module) -> int:
    """Tokens of a (query text, passage) pair: both lengths, capped at the position limit."""
    limit = getattr(backbone.config, "max_position_embeddings", None) or 512
    return min(config.query_max_length + config.document_max_length, int(limit))


class CrossEncoderReranker(nn.Module):
    """Backbone + one-logit head over (query text, passage) pairs; see the module docstring.

    Implements `dualview.models.reranker.TrainableReranker` (training) and
    `dualview.models.reranker.Reranker` (scoring).
    """

    kind = KIND

    def __init__(
        self, config: ModelConfig, max_length: int | None = None, complete: bool = False
    ) -> None:
        """``complete``: the folder is a saved cross-encoder, so every weight (the scoring
        head too) must be in it; otherwise a backbone without a head gets a new one."""
        super().__init__()
        _check_supported(config)
        self.config = config
        name, remote = config.name_or_path, config.trust_remote_code
        kwargs = {}
        if config.attn_implementation is not None:
            kwargs["attn_implementation"] = config.attn_implementation
        load = load_complete if complete else from_pretrained
        self.backbone = load(
            AutoModelForSequenceClassification.from_pretrained,
            name,
            num_labels=1,
            trust_remote_code=remote,
            **kwargs,
        )
        self.tokenizer = from_pretrained(
            AutoTokenizer.from_pretrained, name, trust_remote_code=remote
        )
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if self.backbone.config.pad_token_id is None:
            self.backbone.config.pad_token_id = self.tokenizer.pad_token_id
        self.template = config.query_template
        self.max_length = max_length or pair_max_length(config, self.backbone)
        self._uses_types = "token_type_ids" in self.tokenizer.model_input_names
        self._tokenizers = ThreadTokenizers(self.tokenizer)  # one per loader thread

    # -- training (TrainableReranker) ------------------------------------------------------

    def _tokenizer(self) -> Any:
        """This thread's tokenizer (a fast tokenizer keeps its truncation as state)."""
        return self._tokenizers.get()

    def tokenize_pairs(self, query_texts: Sequence[str], passages: Sequence[str]) -> TokenizedPairs:
        """Unpadded ids of each (query text, passage) pair (safe to call from several threads)."""
        return tokenize_pairs(self._tokenizer(), list(query_texts), list(passages), self.max_length)

    def pad_pairs(
        self,
        tokens: TokenizedPairs,
        indices: Sequence[int] | torch.Tensor,
        multiple: int = PAD_MULTIPLE,
    ) -> dict[str, torch.Tensor]:
        """Model inputs of ``tokens[indices]`` on the model's device (``forward(**inputs)``),
        padded to the longest rounded up to ``multiple``."""
        inputs = tokens.pad(
            indices,
            pad_id=int(self.tokenizer.pad_token_id),
            left=self.tokenizer.padding_side == "left",
            max_length=self.max_length,
            multiple=multiple,
        )
        if not self._uses_types:
            inputs.pop("token_type_ids")
        device = next(self.backbone.parameters()).device
        return {key: value.to(device, non_blocking=True) for key, value in inputs.items()}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Relevance logits [n] (``token_type_ids``: from `pad_pairs`; None: all zero)."""
        kwargs = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return out.logits.squeeze(-1)

    def save(self, folder: str | Path) -> Path:
        """Write a sentence-transformers CrossEncoder folder (identity activation, raw logits)
        plus `RERANKER_FILE`; the previous folder stays whole until the new one is."""
        from sentence_transformers import CrossEncoder

        folder = Path(folder)
        with staging_dir(folder) as tmp:
            export_backbone(self.backbone).save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
            remote = {"trust_remote_code": True} if self.config.trust_remote_code else {}
            st_model = CrossEncoder(
                tmp,
                num_labels=1,
                max_length=self.max_length,
                activation_fn=nn.Identity(),
                device="cpu",
                **remote,
            )
            with atomic_dir(folder) as out:
                st_model.save(str(out))
                atomic_write_text(out / RERANKER_FILE, json.dumps(self.description(), indent=2))
        return folder

    def description(self) -> dict:
        """What `RERANKER_FILE` holds."""
        return {
            "kind": KIND,
            "query_template": self.template,
            "max_length": self.max_length,
            "document_text": "title + ' ' + text",
        }

    # -- scoring (Reranker) ----------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """sha256 of the weights, the template, the maximum length and the dtype."""
        digest = hashlib.sha256(json.dumps(self.description(), sort_keys=True).encode())
        update_with_weights(digest, self.backbone)
        return f"{KIND}:{digest.hexdigest()[:32]}"

    def score(
        self,
        queries: Sequence[str],
        instructions: Sequence[str],
        passages: Sequence[str],
        batch_size: int = 32,
    ) -> np.ndarray:
        """Logits of each (query + instruction, passage), float32 [n]; batches of
        length-sorted pairs, each padded to its longest pair (to a multiple of 8 on CUDA),
        in eval mode and ``inference_mode``."""
        texts = [
            join_query_instruction(q, i, self.template)
            for q, i in zip(queries, instructions, strict=True)
        ]
        if len(texts) != len(passages):
            raise ValueError(f"{len(texts)} queries but {len(passages)} passages")
        scores = torch.empty(len(texts), dtype=torch.float32)
        if not texts:
            return scores.numpy()
        tokens = self.tokenize_pairs(texts, passages)
        order = torch.argsort(tokens.lengths, descending=True, stable=True)
        device = next(self.backbone.parameters()).device
        multiple = PAD_MULTIPLE if device.type == "cuda" else 1  # CPU: no padding to shapes
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                for start in range(0, len(texts), batch_size):
                    chunk = order[start : start + batch_size]
                    inputs = self.pad_pairs(tokens, chunk, multiple)
                    scores[chunk] = self(**inputs).float().cpu()
        finally:
            self.train(was_training)
        return scores.numpy()


def _read_description(folder: Path) -> dict:
    path = folder / RERANKER_FILE
    info = read_json_file(path)
    for field, kind in (("query_template", str), ("max_length", int)):
        if not isinstance(info.get(field), kind):
            raise ConfigError(f"{path}: field {field!r}: missing or not a {kind.__name__}")
    return info


def load_cross_encoder(folder: Path, device: str | None = None) -> CrossEncoderReranker:
    """The cross-encoder saved in ``folder`` (by `CrossEncoderReranker.save`), in eval mode;
    weights that are not in the folder (another kind's folder) are an error."""
    info = _read_description(folder)
    data = {"kind": KIND, "name_or_path": str(folder), "query_template": info["query_template"]}
    config = validate_config(ModelConfig, data, str(folder / RERANKER_FILE))
    model = CrossEncoderReranker(config, max_length=info["max_length"], complete=True)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(device).eval()


def _card_lines(model: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    return [f"- Pair length: {info.get('max_length', '-')} tokens"]


#: ``model.kind: cross_encoder`` (`dualview.models.kinds.MODEL_KINDS`).
SAVED_KIND = SavedKind(
    KIND,
    CardFacts(
        "A [sentence-transformers](https://www.sbert.net) cross-encoder reranker",
        "text-ranking",
        ("sentence-transformers", "cross-encoder", "reranker"),
        (
            "from sentence_transformers import CrossEncoder",
            'model = CrossEncoder("PATH_OR_REPO")',
            'query = "what can replace eggs in baking? Only vegan answers."',
            'print(model.predict([(query, "Flax seeds mixed with water bind a batter.")]))',
        ),
    ),
    RERANKER_FILE,
    card_lines=_card_lines,
    build=CrossEncoderReranker,
    load=load_cross_encoder,
)
