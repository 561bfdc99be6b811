"""The bi-encoder: a Hugging Face backbone + pooling (cls | mean | last-token) + L2 norm.

Queries and documents share one backbone and differ only in their text and maximum length.
A query's text is the query joined with its instruction through a template
(`dualview.data.formats.common.query_text`); a document's text is ``title text``, as
in evaluation (`dualview.retrieval.text.doc_text`, used by the batching).

`BiEncoder.save` writes a sentence-transformers folder (Transformer -> Pooling ->
Normalize, per-task lengths, empty prompts because the instruction is already in the text)
plus what `dualview.models.saved` names (``dualview_model.json``, ``dualview_train.yaml``,
``data_manifest.json``), so ``SentenceTransformer(path).encode_query(query_text(record))``
reproduces our embeddings. The model card (``README.md``) is not written here: whoever saves
a model for a user (the CLI, the pipeline) writes it, with `dualview.hub.model_card`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoTokenizer

from dualview.data.formats.common import query_text
from dualview.data.schema import Record
from dualview.io.atomic import atomic_copy, atomic_write_text
from dualview.io.folder import atomic_dir, staging_dir
from dualview.models import unpadded
from dualview.models.config import ModelConfig
from dualview.models.decoder import add_lora, configure_tokenizer, export_backbone, save_adapter
from dualview.models.pooling import ST_POOLING, pool
from dualview.models.pretrained import from_pretrained
from dualview.models.saved import (
    MODEL_INFO_FILE,
    TRAIN_CONFIG_FILE,
    TRAIN_MANIFEST_FILE,
    head_class,
)
from dualview.models.tokens import PAD_MULTIPLE, TokenizedTexts, tokenize_texts

TextKind = Literal["query", "document"]


def record_query_text(record: Record, template: str) -> str:
    """The text a query is encoded from: query + instruction through ``template``."""
    return query_text(record, template)


class BiEncoder(nn.Module):
    """Shared-weight query/document encoder; see the module docstring."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        name, remote = config.name_or_path, config.trust_remote_code
        kwargs = {"attn_implementation": config.attn_implementation}
        if config.attn_implementation is None:
            kwargs = {}
        self.backbone = from_pretrained(
            AutoModel.from_pretrained, name, trust_remote_code=remote, **kwargs
        )
        self.tokenizer = from_pretrained(
            AutoTokenizer.from_pretrained, name, trust_remote_code=remote
        )
        configure_tokenizer(self.tokenizer, config)  # pad token; left padding + EOS (decoders)
        if config.lora is not None:
            self.backbone = add_lora(self.backbone, config.lora)
        if config.unpadded:
            unpadded.enable(self.backbone)
        self.head = None  # an interaction head (dualview.models.interaction), else concat
        head = head_class(config.interaction)
        if head is not None:
            self.head = head(self.dim, config.pooling)

    def head_parameters(self) -> list[nn.Parameter]:
        """The interaction head's parameters (none for concatenation); the trainer gives them
        their own optimizer group."""
        return list(self.head.parameters()) if self.head is not None else []

    def replicated_parameters(self) -> list[nn.Parameter]:
        """Parameters applied to the whole gathered batch on every rank (the head)."""
        return self.head_parameters()

    @property
    def dim(self) -> int:
        return int(self.backbone.config.hidden_size)

    def max_length(self, kind: TextKind) -> int:
        cfg = self.config
        return cfg.query_max_length if kind == "query" else cfg.document_max_length

    def tokenize_ids(self, texts: list[str], kind: TextKind) -> TokenizedTexts:
        """Unpadded, truncated token ids of ``texts`` (see `dualview.models.tokens`)."""
        return tokenize_texts(self.tokenizer, texts, self.max_length(kind))

    def pad(
        self,
        tokens: TokenizedTexts,
        indices: Sequence[int] | torch.Tensor,
        kind: TextKind,
        multiple: int = PAD_MULTIPLE,
    ) -> dict[str, torch.Tensor]:
        """Model inputs for ``tokens[indices]``, padded on the tokenizer's side to the longest
        text rounded up to ``multiple`` (never past the kind's max length), on device."""
        device = next(self.backbone.parameters()).device
        if self.config.unpadded:  # one packed sequence (dualview.models.unpadded)
            packed = unpadded.pack(tokens, indices, unpadded.position_start(self.backbone))
            return {k: v.to(device) if torch.is_tensor(v) else v for k, v in packed.items()}
        inputs = tokens.pad(
            indices,
            pad_id=int(self.tokenizer.pad_token_id),
            left=self.tokenizer.padding_side == "left",
            max_length=self.max_length(kind),
            multiple=multiple,
        )
        return {key: value.to(device, non_blocking=True) for key, value in inputs.items()}

    def tokenize(self, texts: list[str], kind: TextKind) -> dict[str, torch.Tensor]:
        """Padded model inputs of ``texts`` on the model's device."""
        return self.pad(self.tokenize_ids(texts, kind), range(len(texts)), kind)

    def embed(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Embeddings of padded inputs (``input_ids``, ``attention_mask``), differentiable."""
        if unpadded.is_packed(inputs):
            states = unpadded.packed_states(self.backbone, inputs)
            return self.finish(unpadded.pool_packed(states, inputs, self.config.pooling))
        hidden = self.token_states(inputs)
        return self.finish(pool(hidden, inputs["attention_mask"], self.config.pooling))

    def token_states(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The backbone's last hidden states [B, T, H] of padded (or packed) inputs."""
        if unpadded.is_packed(inputs):
            states = unpadded.packed_states(self.backbone, inputs)
            return unpadded.repad_states(states, inputs, self.tokenizer.padding_side == "left")
        return self.backbone(**inputs).last_hidden_state

    def finish(self, embeddings: torch.Tensor) -> torch.Tensor:
        """L2-normalised (when configured) pooled embeddings."""
        if self.config.normalize:
            embeddings = F.normalize(embeddings.float(), p=2, dim=-1)
        return embeddings

    def forward(self, texts: list[str], kind: TextKind) -> torch.Tensor:
        """Embeddings [len(texts), dim] (differentiable)."""
        return self.embed(self.tokenize(texts, kind))

    @torch.no_grad()
    def encode(self, texts: list[str], kind: TextKind, batch_size: int = 64) -> torch.Tensor:
        """Inference embeddings on CPU, in eval mode, batched."""
        was_training = self.training
        self.eval()
        try:
            parts = [
                self(texts[i : i + batch_size], kind).float().cpu()
                for i in range(0, len(texts), batch_size)
            ]
        finally:
            self.train(was_training)
        return torch.cat(parts) if parts else torch.empty(0, self.dim)

    def save(
        self,
        path: str | Path,
        train_config_yaml: str | None = None,
        manifest: Path | None = None,
    ) -> Path:
        """Write a sentence-transformers folder (see module docstring); returns ``path``."""
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import (
            Normalize,
            Pooling,
            Transformer,
        )

        path = Path(path)
        cfg = self.config
        with staging_dir(path) as tmp:
            export_backbone(self.backbone).save_pretrained(tmp)  # LoRA: merged copy
            self.tokenizer.save_pretrained(tmp)
            remote = {"trust_remote_code": True} if cfg.trust_remote_code else {}
            transformer = Transformer(
                tmp,
                max_seq_length=max(cfg.query_max_length, cfg.document_max_length),
                query_length=cfg.query_max_length,
                document_length=cfg.document_max_length,
                model_kwargs=remote or None,
                config_kwargs=remote or None,
                processor_kwargs=remote or None,
            )
            modules: list[nn.Module] = [transformer, Pooling(self.dim, ST_POOLING[cfg.pooling])]
            if cfg.normalize:
                modules.append(Normalize())
            st_model = SentenceTransformer(
                modules=modules, prompts={"query": "", "document": ""}, device="cpu"
            )
            with atomic_dir(path) as out:  # the previous model stays whole until this one is
                st_model.save(str(out))
                self._save_extras(out, train_config_yaml, manifest)
        return path

    def _save_extras(self, out: Path, train_config_yaml: str | None, manifest: Path | None) -> None:
        """What dualview adds to the sentence-transformers folder ``out`` (see `save`)."""
        cfg = self.config
        save_adapter(self.backbone, out)  # LoRA: the adapter alone, under lora_adapter/
        info = {"query_template": cfg.query_template, "document_text": "title + ' ' + text"}
        if self.head is not None:
            self.head.save(out)
            info["interaction"] = cfg.interaction
        atomic_write_text(out / MODEL_INFO_FILE, json.dumps(info, indent=2))
        if train_config_yaml is not None:
            atomic_write_text(out / TRAIN_CONFIG_FILE, train_config_yaml)
        if manifest is not None and manifest.exists():
            atomic_copy(manifest, out / TRAIN_MANIFEST_FILE)
