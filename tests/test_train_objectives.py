"""The objective registry: config names -> objectives; the step asks an objective what to
encode and hands it the embeddings, so a new objective is one module and one registration."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dualview.config import validate_config
from dualview.errors import ConfigError
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.train.config import LossConfig, TrainConfig
from dualview.train.objectives import (
    InfEmbedLoss,
    RelationInfoNCE,
    build_objective,
    objective_names,
    register_objective,
)
from dualview.train.objectives.base import OBJECTIVES
from dualview.train.step import contrastive_step
from tests.plugins.dualview_example_plugin.objective import HingeMargin
from tests.step_checks import step_batch
from tests.train_tiny import make_tiny_encoder


@pytest.fixture
def margin_registered():
    register_objective("test_margin", lambda config: HingeMargin(config.temperature))
    yield
    OBJECTIVES.remove("test_margin")


def test_builtin_objectives_are_registered_by_name() -> None:
    assert {"infonce", "inf_univariate", "inf_multivariate"} <= set(objective_names())
    infonce = build_objective({"temperature": 0.05, "in_batch_negatives": True})
    assert isinstance(infonce, RelationInfoNCE) and infonce.in_batch_negatives
    assert infonce.temperature == 0.05 and infonce.needs == {"queries", "documents"}
    uni = build_objective({"objective": "inf_univariate", "inf_sets": ["P", "I"]})
    assert isinstance(uni, InfEmbedLoss) and not uni.multivariate
    assert uni.needs == {"queries", "documents", "cross"}
    multi = build_objective({"objective": "inf_multivariate", "inf_sets": ["P", "IQ"]})
    assert multi.multivariate and multi.needs == {"queries", "documents"}  # no I: no cross


def test_an_unknown_objective_is_a_config_error_listing_the_names() -> None:
    with pytest.raises(ConfigError, match=r"loss\.objective: .*unknown objective 'infonse'"):
        validate_config(
            TrainConfig,
            {"data": {"train_file": "x"}, "output_dir": "o", "loss": {"objective": "infonse"}},
            "t.yaml",
        )


def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_objective("infonce", lambda config: RelationInfoNCE())


def test_a_registered_objective_trains_through_the_unchanged_step(
    tmp_path: Path, margin_registered: None
) -> None:
    """The new objective is reachable from a config and the step computes exactly its loss on
    the model's embeddings, with gradients."""
    config = LossConfig(objective="test_margin", temperature=0.3)
    objective = build_objective(config)
    assert isinstance(objective, HingeMargin) and objective.margin == 0.3
    tiny = make_tiny_encoder(tmp_path / "tiny", dropout=0.0)
    model = BiEncoder(ModelConfig(name_or_path=str(tiny), query_max_length=32))
    model.eval()
    batch = step_batch()
    stats = contrastive_step(model, objective, batch)
    with torch.no_grad():
        queries = model(batch.query_texts, "query")
        documents = model(batch.doc_texts, "document")
    expected = objective.batch_loss({"queries": queries, "documents": documents}, batch)
    assert stats.loss == pytest.approx(float(expected), rel=1e-5)
    assert expected > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
