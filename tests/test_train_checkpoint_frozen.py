"""Checkpoints of a model with frozen parameters keep only what trains (and the buffers):
the frozen weights come back from the base when the run is built again."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from dualview.errors import DataError
from dualview.train import checkpoint as ckpt


def _model(seed: int, frozen: int | None = 0) -> nn.Module:
    """Linear, batch norm, linear; the layer at ``frozen`` does not train."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    if frozen is not None:
        model[frozen].requires_grad_(False)
    return model


def _save(model: nn.Module, root: Path) -> Path:
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model(torch.randn(3, 4)).sum().backward()  # moves the batch-norm buffers and the grads
    optimizer.step()
    return ckpt.save_checkpoint(root, ckpt.TrainState(step=1), model, optimizer, scheduler)


def _load(model: nn.Module, path: Path) -> None:
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    ckpt.load_checkpoint(path, model, optimizer, scheduler)


def test_a_checkpoint_leaves_out_frozen_weights_and_resumes_to_the_same_model(tmp_path) -> None:
    trained = _model(0)
    path = _save(trained, tmp_path)
    saved = torch.load(path / "model.pt", weights_only=True)
    assert "0.weight" not in saved and "0.bias" not in saved  # frozen: not kept
    assert {"2.weight", "2.bias", "1.weight", "1.running_mean"} <= set(saved)
    rebuilt = _model(0)  # the same base, built again as a resumed run builds it
    _load(rebuilt, path)
    for name, value in trained.state_dict().items():
        assert torch.equal(rebuilt.state_dict()[name], value), name


def test_every_weight_is_kept_when_everything_trains(tmp_path) -> None:
    path = _save(_model(0, frozen=None), tmp_path)
    assert "0.weight" in torch.load(path / "model.pt", weights_only=True)


def test_a_checkpoint_with_frozen_weights_too_still_loads(tmp_path) -> None:
    """One written before frozen weights were left out (everything saved)."""
    trained = _model(0)
    path = _save(trained, tmp_path)
    torch.save(trained.state_dict(), path / "model.pt")
    rebuilt = _model(0)
    _load(rebuilt, path)
    assert torch.equal(rebuilt[2].weight, trained[2].weight)


def test_a_trainable_weight_missing_from_the_checkpoint_is_a_located_error(tmp_path) -> None:
    path = _save(_model(0), tmp_path)
    with pytest.raises(DataError, match=r"model\.pt.*no weights for '0\.(weight|bias)'"):
        _load(_model(0, frozen=2), path)  # resumed with the first layer training, not the last
    with pytest.raises(DataError, match=r"model\.pt.*does not fit.*0\.weight"):
        _load(_model(0, frozen=None), path)  # everything training
    saved = torch.load(path / "model.pt", weights_only=True)
    torch.save({**saved, "3.weight": torch.zeros(1)}, path / "model.pt")
    with pytest.raises(DataError, match=r"unexpected weights '3\.weight'"):
        _load(_model(0), path)
