"""Every config file we ship must load under its strict schema (a typo is an error)."""

from __future__ import annotations

import pytest

from dualview.config import load_config, validate_config
from dualview.pipeline.build import train_config_dict
from dualview.pipeline.experiment import load_experiment
from dualview.pipeline.sweep import load_sweep
from dualview.train.config import TrainConfig
from tests.conftest import REPO_ROOT

EXPERIMENTS = sorted((REPO_ROOT / "configs" / "experiments").glob("*.yaml"))
TRAINING = sorted((REPO_ROOT / "configs" / "train").glob("*.yaml"))


def test_there_are_configs():
    assert len(EXPERIMENTS) >= 5 and len(TRAINING) >= 9


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_experiment_configs_load(path):
    sweep = load_sweep(path)
    experiments = [r.experiment for r in sweep.runs] if sweep else [load_experiment(path)]
    for experiment in experiments:
        assert experiment.mixes and experiment.evaluation.benchmarks
        if experiment.training.base is not None:
            assert (REPO_ROOT / experiment.training.base).is_file()
        if sweep:  # every arm's training settings are valid (a typo under overrides too)
            data = train_config_dict(experiment, None)
            data["data"]["train_file"] = "unused"
            validate_config(TrainConfig, data, str(path))


@pytest.mark.parametrize("path", TRAINING, ids=lambda p: p.name)
def test_training_configs_load(path):
    config = load_config(TrainConfig, path)
    # the paper's value on cosine similarities; rerankers divide raw logits (1.0)
    assert config.loss.temperature == (0.02 if config.model.kind == "bi_encoder" else 1.0)
