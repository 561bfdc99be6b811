"""Tiny random causal LMs (Llama, Qwen2) with tokenizers built on the spot, for the tests of
decoder retrievers and LLM rerankers: 2 layers, 32 dims, fixed seed, saved with the LM head."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2Tokenizer,
)

ARCHS = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}
FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"


def word_tokenizer(
    folder: Path, text: str, specials: list[str], pad_token: str | None = None
) -> PreTrainedTokenizerFast:
    """Llama-like word-level tokenizer (lowercased, BOS added) over the words of ``text``,
    after ``specials`` (which hold ``<unk>``, ``<s>``, ``</s>`` and ``pad_token`` if any)."""
    words = sorted(set(re.findall(r"\w+|[^\w\s]", text.lower())))
    vocab = {token: i for i, token in enumerate(specials + words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    extra = {"pad_token": pad_token} if pad_token else {}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>", **extra
    )
    tokenizer.add_bos_token = True
    tokenizer.save_pretrained(folder)
    return tokenizer


def byte_tokenizer(folder: Path, whole_words: tuple[str, ...] = ()) -> Qwen2Tokenizer:
    """Qwen2's tokenizer class (what AutoTokenizer picks for a qwen2 folder) over raw bytes,
    with merges that make each of ``whole_words`` one token: no BOS, EOS = pad =
    <|endoftext|>."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    merges = []
    for word in whole_words:
        for end in range(2, len(word) + 1):
            merges.append((word[: end - 1], word[end - 1]))
            vocab.setdefault(word[:end], len(vocab))
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges)
    tokenizer.save_pretrained(folder)
    return tokenizer


def save_tiny_lm(
    folder: Path, arch: str, tokenizer: PreTrainedTokenizerBase, **config: object
) -> Path:
    """A 2-layer, 32-dim ``arch`` LM (seed 0) sized to ``tokenizer``, saved in ``folder``
    beside it; ``config``: further config fields (``max_position_embeddings``, ...)."""
    config_cls, model_cls = ARCHS[arch]
    settings = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        **config,
    }
    torch.manual_seed(0)
    model_cls(config_cls(**settings)).save_pretrained(folder)
    return folder
