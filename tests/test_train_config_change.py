"""``dualview train --resume`` under a changed config: refused (exit 2) with the differing
keys, allowed with ``--allow-config-change`` (and recorded), moved paths not counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from dualview.config import load_config
from dualview.train.config import TrainConfig
from dualview.train.config_drift import config_changes, flatten, snapshot
from dualview.train.step_log import read_loss_log
from dualview.train.trainer import train
from tests.helpers import run_cli
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
ENV = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, Path]:
    """A 4-step tiny run (checkpoints at 2 and 4); its config file and output folder."""
    tmp = tmp_path_factory.mktemp("drift")
    data = tmp / "data" / "train.jsonl"
    data.parent.mkdir()
    shutil.copy(FIXTURE, data)
    tiny = make_tiny_encoder(tmp / "tiny", dropout=0.0)
    out = tmp / "run"
    config = {
        "model": {"name_or_path": str(tiny), "query_max_length": 32, "document_max_length": 48},
        "data": {"train_file": str(data), "num_workers": 0},
        "optim": {"lr": 2e-4, "warmup_steps": 0},
        "output_dir": str(out),
        "batch_size": 4,
        "max_steps": 4,
        "checkpoint_every": 2,
    }
    path = tmp / "train.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    train(load_config(TrainConfig, path, []))
    assert (out / "checkpoints" / "step-00000004" / "config.json").exists()
    return path, out


def _resume(config: Path, out: Path, *extra: str):
    return run_cli("train", str(config), "--resume", *extra, env=ENV)


def test_changed_config_stops_with_the_differences(finished_run) -> None:
    config, out = finished_run
    log_before = (out / "train_log.jsonl").read_text(encoding="utf-8")
    result = _resume(config, out, "--set", "optim.lr=1e-3", "--set", "batch_size=2")
    assert result.returncode == 2, result.stderr
    assert "optim.lr: 0.0002 -> 0.001" in result.stderr
    assert "batch_size: 4 -> 2" in result.stderr
    assert "--allow-config-change" in result.stderr
    assert "Traceback" not in result.stderr
    assert (out / "train_log.jsonl").read_text(encoding="utf-8") == log_before
    assert not (out / "config_changes.json").exists()


def test_moved_data_file_is_not_a_change_but_edited_one_is(finished_run, tmp_path) -> None:
    config, out = finished_run
    saved = json.loads((out / "checkpoints" / "step-00000004" / "config.json").read_text())
    current = load_config(TrainConfig, config, [])
    moved = tmp_path / "elsewhere.jsonl"
    shutil.copy(current.data.train_file, moved)
    assert config_changes(saved, current.model_copy(update={"output_dir": tmp_path})) == []
    operational = ["data.num_workers=2", "log_every=3", "checkpoint_every=7", "tracking=none"]
    assert config_changes(saved, load_config(TrainConfig, config, operational)) == []
    moved_config = load_config(TrainConfig, config, [f"data.train_file={moved}"])
    assert config_changes(saved, moved_config) == []
    with moved.open("a", encoding="utf-8") as handle:  # same path, other content: a change
        handle.write(FIXTURE.read_text(encoding="utf-8").splitlines()[0] + "\n")
    [change] = config_changes(saved, moved_config)
    assert change.key == "data.train_file" and change.new == str(moved)


def test_moved_data_file_resumes_through_the_cli(finished_run, tmp_path) -> None:
    config, out = finished_run
    moved = tmp_path / "moved.jsonl"
    shutil.copy(FIXTURE, moved)
    result = _resume(config, out, "--set", f"data.train_file={moved}")
    assert result.returncode == 0, result.stderr
    assert "changed config" not in result.stdout


def test_allowed_change_is_recorded_in_log_and_manifests(finished_run) -> None:
    config, out = finished_run
    result = _resume(config, out, "--set", "optim.lr=1e-3", "--allow-config-change")
    assert result.returncode == 0, result.stderr
    assert "optim.lr: 0.0002 -> 0.001" in result.stdout
    lines = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    events = [x for x in lines if x.get("event") == "config_change"]
    expected = [{"key": "optim.lr", "old": 0.0002, "new": 0.001}]
    assert events == [{"step": 4, "event": "config_change", "changes": expected}]
    for path in (out / "config_changes.json", out / "model" / "config_changes.json"):
        assert json.loads(path.read_text()) == events
    # the report's loss curve still reads every step and skips the event line
    assert [s for s, _ in read_loss_log(out / "train_log.jsonl")] == [1, 2, 3, 4]


def test_flatten_and_snapshot_hash_only_existing_files(tmp_path) -> None:
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": {}}) == {
        "a.b": 1,
        "a.c.d": [1, 2],
        "e": {},
    }
    config = TrainConfig.model_validate(
        {"data": {"train_file": str(FIXTURE)}, "output_dir": str(tmp_path)}
    )
    assert list(snapshot(config)["file_sha256"]) == ["data.train_file"]


def test_checkpoint_without_snapshot_is_not_compared(tmp_path, capsys) -> None:
    from dualview.train.config_drift import check_resume

    old = tmp_path / "checkpoints" / "step-00000002"
    old.mkdir(parents=True)
    (old / "state.json").write_text('{"step": 2, "epoch": 0, "batch_index": 2}')
    config = TrainConfig.model_validate(
        {"data": {"train_file": str(FIXTURE)}, "output_dir": str(tmp_path)}
    )
    assert check_resume(config, old, allow=False).snapshot["changes"] == []
    assert "was not compared" in capsys.readouterr().out
