"""A tiny randomly initialised BERT with MiniLM's tokenizer, for fast training tests."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from dualview.resources import embedded_encoder_path


def make_tiny_encoder(folder: Path, dropout: float = 0.1) -> Path:
    """Write a 2-layer, 32-dim BERT (fixed seed) and the MiniLM tokenizer to ``folder``."""
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_encoder_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
