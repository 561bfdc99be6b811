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
    # bi-encoders divide cosine similarities by the paper's 0.02; rerankers' logits stay raw
    assert config.loss.temperature == (0.02 if config.model.kind == "bi_encoder" else 1.0)


def test_a_set_below_training_overrides_adds_one_override(tmp_path):
    """``--set training.overrides.model.name_or_path=X`` adds that key beside the file's
    other overrides (``model.query_max_length`` ...): before, it became ``model: {...}`` and
    replaced the whole model section of the training config."""
    path = REPO_ROOT / "configs" / "experiments" / "gold-cross-encoder-distill-cpu.yaml"
    folder = str(tmp_path / "distilled")
    keys = [f"training.overrides.model.name_or_path={folder}", "training.overrides.seed=7"]
    experiment = load_experiment(path, keys)
    assert experiment.training.overrides["model.name_or_path"] == folder
    assert experiment.training.overrides["model.query_max_length"] == 96  # the file's, kept
    data = train_config_dict(experiment, None)
    assert data["model"]["name_or_path"] == folder and data["seed"] == 7
    assert data["model"]["kind"] == "cross_encoder"  # the base file's model section, kept
    assert data["model"]["query_max_length"] == 96 and data["data"]["num_negatives"] == 6
    sweep_keys = load_sweep(path, keys)  # no sweep block: None, and no error
    assert sweep_keys is None


def test_the_experiment_seed_is_the_trainers_seed():
    """``--set seed=N`` reaches the trainer even when the base training file sets a seed
    (``minilm-cpu.yaml``: 42); before, the file's seed won and N only changed the mixes'
    sampling. ``training.overrides.seed`` still sets another one."""
    path = REPO_ROOT / "configs" / "experiments" / "gold-cpu.yaml"
    assert load_config(TrainConfig, REPO_ROOT / "configs/train/minilm-cpu.yaml").seed == 42
    seeds = [train_config_dict(load_experiment(path, [f"seed={n}"]), None)["seed"] for n in (2, 3)]
    assert seeds == [2, 3]
    pinned = load_experiment(path, ["seed=2", "training.overrides.seed=42"])
    assert train_config_dict(pinned, None)["seed"] == 42
