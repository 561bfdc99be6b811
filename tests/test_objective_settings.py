"""Objective settings by type (`dualview.train.objectives.base`, "Settings by objective"): the
``loss:`` block is validated by the settings class of the objective it names, a key of another
objective is a located error naming it, a plugin objective brings its own settings, and files
written before stay valid and are written the same."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import Field

from dualview.config import load_config, validate_config
from dualview.errors import ConfigError
from dualview.train.config import TrainConfig
from dualview.train.config_drift import config_changes, snapshot
from dualview.train.objectives import (
    OBJECTIVES,
    Objective,
    ObjectiveSettings,
    build_objective,
    register_objective,
)
from dualview.train.objectives.infonce import InfoNCESettings
from tests.plugins.dualview_example_plugin.objective import HingeMargin

CONFIGS = Path(__file__).parents[1] / "configs" / "train"
#: How ``loss:`` was written for every objective before each had its own settings class.
OLD_LOSS_KEYS = ["objective", "temperature", "in_batch_negatives", "inf_sets", "teacher"]


def _config(loss: dict, kind: str = "bi_encoder") -> dict:
    return {"model": {"kind": kind}, "data": {"train_file": "x"}, "output_dir": "o", "loss": loss}


@pytest.mark.parametrize(
    ("loss", "kind", "key"),
    [
        ({"objective": "rerank_listwise", "inf_sets": ["P"]}, "cross_encoder", "inf_sets"),
        ({"objective": "infonce", "inf_sets": ["IQ"]}, "bi_encoder", "inf_sets"),
        ({"objective": "inf_univariate", "in_batch_negatives": True}, "bi_encoder", "in_b"),
        ({"objective": "rerank_bce", "teacher": "embedded:minilm"}, "cross_encoder", "teacher"),
    ],
)
def test_a_key_of_another_objective_is_a_located_error(loss: dict, kind: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config(TrainConfig, _config(loss, kind), "t.yaml")
    message = str(caught.value)
    assert message.startswith(f"t.yaml: loss.{key}") and "InF-Embed" not in message
    assert f"objective {loss['objective']!r} uses no" in message and "its settings:" in message


def test_each_objective_gets_its_own_settings_class() -> None:
    config = validate_config(TrainConfig, _config({"in_batch_negatives": True}), "t")
    assert type(config.loss) is InfoNCESettings and config.loss.in_batch_negatives
    sets = validate_config(TrainConfig, _config({"objective": "inf_univariate"}), "t")
    assert sets.loss.inf_sets == ["P", "I"] and not hasattr(sets.loss, "in_batch_negatives")
    with pytest.raises(ConfigError, match=r"t: loss\.inf_sets: List should have at least 1"):
        validate_config(TrainConfig, _config({"objective": "inf_univariate", "inf_sets": []}), "t")


class MarginSettings(ObjectiveSettings):
    """A plugin objective's own setting."""

    margin: float = Field(0.2, gt=0)


@pytest.fixture
def margin_objective():
    register_objective("test_own_margin", lambda s: HingeMargin(s.margin), MarginSettings)
    yield
    OBJECTIVES.remove("test_own_margin")


def test_a_plugin_objective_brings_its_own_settings(margin_objective: None) -> None:
    loss = {"objective": "test_own_margin", "margin": 0.7}
    config = validate_config(TrainConfig, _config(loss), "t")
    assert isinstance(config.loss, MarginSettings) and build_objective(config.loss).margin == 0.7
    dumped = config.model_dump(mode="json")["loss"]
    assert list(dumped) == [*OLD_LOSS_KEYS, "margin"] and dumped["margin"] == 0.7
    with pytest.raises(ConfigError, match=r"t: loss\.margin: Input should be greater than 0"):
        validate_config(TrainConfig, _config({**loss, "margin": 0}), "t")
    with pytest.raises(ConfigError, match=r"t: loss\.margin: objective 'infonce' uses no margin"):
        validate_config(TrainConfig, _config({"margin": 0.7}), "t")


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_configs_validate_and_write_loss_as_before(path: Path) -> None:
    """Every shipped config still validates; its ``loss:`` is written with the keys (and
    order) of before; the written config reads back to the same settings."""
    config = load_config(TrainConfig, path)
    dumped = config.model_dump(mode="json")
    assert list(dumped["loss"]) == OLD_LOSS_KEYS
    again = validate_config(TrainConfig, yaml.safe_load(yaml.safe_dump(dumped)), "again")
    assert again.loss == config.loss and type(again.loss) is type(config.loss)


def test_a_snapshot_written_before_loss_teacher_existed_resumes_unchanged() -> None:
    config = validate_config(TrainConfig, _config({}), "t")
    saved = snapshot(config)
    del saved["config"]["loss"]["teacher"]
    assert config_changes(saved, config) == []
    saved["config"]["loss"]["inf_sets"] = ["P"]  # what this run would not do: a change
    assert [c.key for c in config_changes(saved, config)] == ["loss.inf_sets"]


class PairObjective(Objective):
    """A reranker objective from "another package" (it scores pairs)."""

    needs = frozenset({"pairs"})


def test_the_kind_and_objective_mismatch_lists_the_registered_choices() -> None:
    register_objective("test_pair_objective", lambda settings: PairObjective())
    try:
        with pytest.raises(ConfigError, match=r"scores pairs \(.*rerank_bce.*test_pair_objective"):
            validate_config(TrainConfig, _config({"objective": "infonce"}, "cross_encoder"), "t")
        loss = {"objective": "test_pair_objective"}
        with pytest.raises(ConfigError, match=r"model\.kind \(cross_encoder, llm_reranker\)"):
            validate_config(TrainConfig, _config(loss, "bi_encoder"), "t")
    finally:
        OBJECTIVES.remove("test_pair_objective")
