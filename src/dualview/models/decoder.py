"""Decoder-only retrievers: last-token pooling on an appended EOS, left padding, LoRA.

A causal LM (Llama, Qwen2, ...) is loaded with ``AutoModel`` (its base model, no LM head)
and used as an encoder: every text ends with the tokenizer's EOS token and the embedding is
that token's last hidden state (``pooling: last_token``), the only position that has seen the
whole text under causal attention.

- **EOS.** Appended by the tokenizer itself (its post-processor, ``add_eos_token``), so the
  saved tokenizer does the same when sentence-transformers loads the folder, and truncation
  keeps the EOS (it counts against ``max_length``). A tokenizer that already ends every text
  with EOS is left alone.
- **Left padding.** Padded batches end every row with its EOS, at the same column. Rotary
  position embeddings see only position differences, so the shift that left padding adds to
  all positions of a text leaves its embedding unchanged (up to float rounding).
- **LoRA** (``model.lora``, needs ``pip install 'dualview[lora]'``): rank-``r`` adapters
  ``W + (alpha / r) B A`` on the named linear layers through ``peft``; the base weights are
  frozen, only ``A`` and ``B`` train. A saved model folder holds the *merged* weights (a plain
  sentence-transformers model, no peft needed to use it) plus the adapter alone under
  ``lora_adapter/`` (peft's format; `load_adapter` puts it back on a fresh base).
"""

from __future__ import annotations

import copy
from pathlib import Path

from torch import nn

from dualview.errors import ConfigError
from dualview.models.config import LoraSettings, ModelConfig
from dualview.resources import optional_import

ADAPTER_DIR = "lora_adapter"


def appends_eos(config: ModelConfig, tokenizer) -> bool:
    """Whether texts get an EOS token.

    ``append_eos`` when set (``true`` with a tokenizer that has no EOS is an error); by
    default only with last-token pooling and a tokenizer that has an EOS token. Encoder
    tokenizers such as BERT's have none and already end every text with ``[SEP]``.
    """
    if config.append_eos is not None:
        return config.append_eos
    return config.pooling == "last_token" and tokenizer.eos_token_id is not None


def configure_tokenizer(tokenizer, config: ModelConfig) -> None:
    """EOS appended to every text and left padding when configured (decoders).

    Left padding goes with the appended EOS only: an encoder with absolute position
    embeddings (BERT) would see its positions shifted by left padding, so its embeddings
    would depend on the batch; pooling the last token works with either side.
    """
    ensure_pad_token(tokenizer)
    if appends_eos(config, tokenizer):
        ensure_eos(tokenizer)
        tokenizer.padding_side = "left"


def ensure_pad_token(tokenizer) -> None:
    """Pad with the EOS token when the tokenizer has no pad token (decoders often lack one)."""
    if tokenizer.pad_token is not None:
        return
    if tokenizer.eos_token is None:
        raise ConfigError(
            f"model.name_or_path: {type(tokenizer).__name__} has neither a pad token nor an EOS "
            "token to pad with; use a tokenizer that has one of them"
        )
    tokenizer.pad_token = tokenizer.eos_token


def ensure_eos(tokenizer) -> None:
    """Make ``tokenizer`` end every encoded text with its EOS token (BOS kept as it was)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ConfigError("model.append_eos: the tokenizer has no EOS token")
    probe = tokenizer("a")["input_ids"]
    if probe and probe[-1] == eos:
        return
    if not hasattr(tokenizer, "update_post_processor"):
        raise ConfigError(
            f"model.append_eos: {type(tokenizer).__name__} is not a fast (tokenizers) tokenizer"
        )
    bos = tokenizer.bos_token_id
    tokenizer.add_bos_token = bool(probe) and bos is not None and probe[0] == bos
    tokenizer.add_eos_token = True
    if tokenizer("a")["input_ids"][-1] != eos:
        raise ConfigError(f"model.append_eos: could not make {type(tokenizer).__name__} add EOS")


def _peft():
    return optional_import("peft", "model.lora")


def add_lora(backbone: nn.Module, settings: LoraSettings) -> nn.Module:
    """``backbone`` wrapped with fresh LoRA adapters (peft); only the adapters train."""
    peft = _peft()
    lora = peft.LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        bias="none",
    )
    try:
        return peft.get_peft_model(backbone, lora)
    except ValueError as exc:  # e.g. no module matches target_modules
        raise ConfigError(f"model.lora: {exc}") from None


def is_lora(backbone: nn.Module) -> bool:
    return hasattr(backbone, "peft_config")


def export_backbone(backbone: nn.Module) -> nn.Module:
    """The model to save as weights: a merged copy for LoRA (the trained one is untouched)."""
    if not is_lora(backbone):
        return backbone
    return copy.deepcopy(backbone).merge_and_unload()


def save_adapter(backbone: nn.Module, folder: Path) -> Path | None:
    """Write the LoRA adapter alone to ``folder/lora_adapter`` (nothing without LoRA)."""
    if not is_lora(backbone):
        return None
    target = folder / ADAPTER_DIR
    # no embedding layer is resized or trained whole, so none is saved; "auto" would look
    # for the base's config.json, which a GGUF-loaded base lacks, and warn
    backbone.save_pretrained(str(target), save_embedding_layers=False)
    return target


def load_adapter(backbone: nn.Module, folder: Path) -> None:
    """Load adapter weights saved by `save_adapter` into a LoRA-wrapped ``backbone``."""
    peft = _peft()
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    weights = Path(folder) / ADAPTER_DIR / "adapter_model.safetensors"
    if not is_lora(backbone) or not weights.is_file():
        raise ConfigError(f"{folder}: no LoRA adapter to load (expected {weights})")
    try:
        state = load_file(str(weights))
    except SafetensorError as exc:
        raise ConfigError(f"{weights}: the adapter's weights file is damaged ({exc})") from None
    result = peft.set_peft_model_state_dict(backbone, state)
    if getattr(result, "unexpected_keys", None):
        raise ConfigError(f"{weights}: adapter does not fit the model: {result.unexpected_keys}")
