"""The interaction head's own optimizer group (``optim.head_lr``, ``optim.head_weight_decay``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.train.config import OptimConfig
from dualview.train.trainer import build_optimizer
from tests.train_tiny import make_tiny_encoder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


def _model(path: Path, interaction: str) -> BiEncoder:
    return BiEncoder(ModelConfig(name_or_path=str(path), interaction=interaction))


def test_head_parameters_are_their_own_group(tiny: Path) -> None:
    model = _model(tiny, "cross_attention")
    config = OptimConfig(lr=2e-5, weight_decay=0.01, head_lr=3e-3, head_weight_decay=0.0)
    groups = build_optimizer(model, config).param_groups
    head_ids = {id(p) for p in model.head.parameters()}
    assert head_ids  # the head has parameters
    head_groups = [g for g in groups if any(id(p) in head_ids for p in g["params"])]
    assert len(head_groups) == 1
    (group,) = head_groups
    assert {id(p) for p in group["params"]} == head_ids  # the head alone, all of it
    assert group["lr"] == 3e-3 and group["weight_decay"] == 0.0
    for other in groups:
        if other is not group:
            assert other["lr"] == 2e-5
    assert groups[0]["weight_decay"] == 0.01  # the backbone's decayed weights: group 0
    every = [id(p) for g in groups for p in g["params"]]
    assert sorted(every) == sorted(id(p) for p in model.parameters())  # each once


def test_concat_model_has_no_head_group(tiny: Path) -> None:
    groups = build_optimizer(_model(tiny, "concat"), OptimConfig(head_lr=3e-3)).param_groups
    assert len(groups) == 2 and all(g["lr"] == OptimConfig().lr for g in groups)


def test_head_defaults_are_higher_lr_and_no_decay() -> None:
    config = OptimConfig()
    assert config.head_lr > config.lr and config.head_weight_decay == 0.0


def test_head_group_moves_the_head_at_its_own_rate(tiny: Path) -> None:
    """One AdamW step moves each head weight by about head_lr (Adam's first step is sign(g)
    x lr) and a backbone weight by about lr."""
    torch.manual_seed(0)
    model = _model(tiny, "cross_attention")
    optimizer = build_optimizer(model, OptimConfig(lr=1e-5, head_lr=1e-2, weight_decay=0.0))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    optimizer.step()
    head = (model.head.instruction.weight - before["head.instruction.weight"]).abs()
    torch.testing.assert_close(head.max().item(), 1e-2, rtol=1e-3, atol=0)
    name = "backbone.encoder.layer.0.attention.self.query.weight"
    backbone = dict(model.named_parameters())[name]
    moved = (backbone - before[name]).abs().max().item()
    torch.testing.assert_close(moved, 1e-5, rtol=1e-3, atol=0)
