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


def train_tiny_model(
    tmp_path: Path, train_file: Path, epochs: int = 1, query_max_length: int = 32
) -> Path:
    """Train the tiny encoder on ``train_file`` with dualview's trainer; the saved model folder."""
    from dualview.config import validate_config
    from dualview.train.config import TrainConfig
    from dualview.train.trainer import train

    tiny = make_tiny_encoder(tmp_path / "tiny-base", dropout=0.0)
    config = {
        "model": {
            "name_or_path": str(tiny),
            "query_max_length": query_max_length,
            "document_max_length": 48,
        },
        "data": {"train_file": str(train_file), "num_workers": 0},
        "optim": {"lr": 1e-3, "warmup_steps": 0},
        "output_dir": str(tmp_path / "tiny-run"),
        "batch_size": 2,
        "epochs": epochs,
    }
    train(validate_config(TrainConfig, config, "train_tiny_model"))
    return tmp_path / "tiny-run" / "model"
