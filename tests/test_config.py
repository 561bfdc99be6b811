from __future__ import annotations

import pytest

from dualview.config import StrictModel, dump_config, load_config
from dualview.errors import ConfigError


class Inner(StrictModel):
    lr: float = 1e-5
    steps: int = 10


class Outer(StrictModel):
    name: str = "x"
    train: Inner = Inner()


def test_typo_is_an_error_naming_key_and_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: run\ntrain:\n  lr: 0.1\n  stpes: 5\n")
    with pytest.raises(ConfigError) as info:
        load_config(Outer, path)
    assert f"{path}: train.stpes: unknown key" in str(info.value)


def test_wrong_type_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  steps: many\n")
    with pytest.raises(ConfigError, match=r"train\.steps"):
        load_config(Outer, path)
    path.write_text("train:\n  steps: 3\n")
    config = load_config(Outer, path, overrides=["train.lr=0.5", "name=abc"])
    assert (config.name, config.train.lr, config.train.steps) == ("abc", 0.5, 3)


def test_dump_round_trip(tmp_path):
    config = Outer(name="y", train=Inner(lr=2.0))
    dump_config(config, tmp_path / "out.yaml")
    assert load_config(Outer, tmp_path / "out.yaml") == config


def test_missing_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(Outer, tmp_path / "none.yaml")
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(Outer, tmp_path / "bad.yaml")
