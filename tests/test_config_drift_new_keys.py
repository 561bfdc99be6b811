"""A checkpoint written before a config key existed resumes: the new key at its default is no
change (issue 33 added ``pad_multiple``, ``compile: layers``, ``optim.fused``, ...); set to
anything else, it is one."""

from __future__ import annotations

from pathlib import Path

from dualview.train.config import TrainConfig
from dualview.train.config_drift import config_changes, snapshot

NEW_KEYS = (
    "pad_multiple",
    "gradcache_max_tokens",
    "gradcache_retain_tokens",
    "varlen_kernel",
    "optim.fused",
)


def _config(tmp_path: Path, **settings) -> TrainConfig:
    train = tmp_path / "train.jsonl"
    train.write_text("{}\n")
    base = {"data": {"train_file": str(train)}, "output_dir": str(tmp_path / "out")}
    return TrainConfig.model_validate({**base, "gradcache_chunk_size": "auto", **settings})


def _old_snapshot(config: TrainConfig) -> dict:
    """The snapshot as a checkpoint made before the new keys existed holds it."""
    saved = snapshot(config)
    for key in NEW_KEYS:
        *parents, name = key.split(".")
        section = saved["config"]
        for parent in parents:
            section = section[parent]
        del section[name]
    return saved


def test_new_keys_at_their_defaults_are_no_change(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert config_changes(_old_snapshot(config), config) == []


def test_new_keys_set_otherwise_are_changes(tmp_path: Path) -> None:
    old = _old_snapshot(_config(tmp_path))
    config = _config(tmp_path, pad_multiple=64, optim={"fused": True})
    changes = {c.key: (c.old, c.new) for c in config_changes(old, config)}
    assert changes == {"pad_multiple": (None, 64), "optim.fused": (None, True)}


def test_a_missing_key_whose_default_changes_the_run_is_a_change(tmp_path: Path) -> None:
    """``optim.head_lr`` is not neutral (older runs trained the head at the model's lr): a
    snapshot without it differs from a config that resolves it to its default."""
    config = _config(tmp_path)
    old = snapshot(config)
    del old["config"]["optim"]["head_lr"]
    changes = {c.key: (c.old, c.new) for c in config_changes(old, config)}
    assert changes == {"optim.head_lr": (None, 0.001)}
