"""`dualview run` resuming a training stage whose checkpoint an older dualview wrote: the
changed keys stop it (exit 2) unless `--allow-config-change`, which records them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from dualview.data.gold import load_gold
from dualview.eval.export import export_paired
from dualview.pipeline.stages import DONE_FILE, read_done
from dualview.train.config_drift import CHANGES_FILE, SNAPSHOT_FILE
from tests.helpers import run_cli


def _experiment(tmp_path: Path) -> Path:
    eval_dir = tmp_path / "paired"
    export_paired(load_gold("test")[:4], eval_dir)
    config = {
        "name": "drift",
        "run_dir": str(tmp_path / "run"),
        "instructions": {"path": "gold:train", "views": ["orig"], "limit": 8},
        "synthesis": {"enabled": False},
        "mixes": [{"name": "Ins-orig", "preset": "ins-orig", "size": 8}],
        "negatives": {"total": 4},
        "training": {
            "config": {
                "model": {"query_max_length": 32, "document_max_length": 48},
                "data": {"train_file": "unused", "num_negatives": 2},
                "output_dir": "unused",
                "batch_size": 2,
                "max_steps": 2,
                "checkpoint_every": 1,
            }
        },
        "evaluation": {"benchmarks": [f"paired={eval_dir}"]},
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _stop_training_after_its_first_checkpoint(path: Path, tmp_path: Path) -> Path:
    """Run the experiment and SIGKILL it as its training starts the second checkpoint: the
    stage is left partial, its step-1 checkpoint complete (a finished stage keeps none).
    The kill point is counted from a logged run of the same experiment."""
    scope = {"DUALVIEW_FAULT_SCOPE": "train-Ins-orig"}
    log = tmp_path / "fault.log"
    counted = run_cli("run", str(path), env={**scope, "DUALVIEW_FAULT_LOG": str(log)})
    assert counted.returncode == 0, counted.stderr[-3000:]
    labels = [line.split("\t")[1] for line in log.read_text().splitlines()]
    second = [i for i, label in enumerate(labels, 1) if label == "checkpoint rng"][1]
    shutil.rmtree(tmp_path / "run")
    killed = run_cli("run", str(path), env={**scope, "DUALVIEW_FAULT_KILL_AT": str(second)})
    assert killed.returncode != 0
    (train_dir,) = (tmp_path / "run").glob("train-Ins-orig-*")
    assert not (train_dir / DONE_FILE).exists()
    return train_dir


def _as_if_an_older_version_stopped_at_step_1(train_dir: Path) -> None:
    """The partial stage's step-1 checkpoint as an older dualview wrote it: its config
    snapshot lacks a key that this version resolves with a default (``optim.head_lr``)."""
    (first,) = sorted((train_dir / "checkpoints").glob("step-*[0-9]"))
    snapshot_path = first / SNAPSHOT_FILE
    snapshot = json.loads(snapshot_path.read_text())
    del snapshot["config"]["optim"]["head_lr"]
    snapshot_path.write_text(json.dumps(snapshot))


@pytest.mark.slow
def test_run_resumes_under_a_changed_training_config_only_when_allowed(tmp_path):
    path = _experiment(tmp_path)
    train_dir = _stop_training_after_its_first_checkpoint(path, tmp_path)
    _as_if_an_older_version_stopped_at_step_1(train_dir)

    refused = run_cli("run", str(path))
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "optim.head_lr: null -> 0.001" in refused.stderr
    assert "--allow-config-change" in refused.stderr
    assert not (train_dir / DONE_FILE).exists()

    allowed = run_cli("run", str(path), "--allow-config-change")
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    done = read_done(train_dir)
    assert done["resumed"] is True and done["steps"] == 2
    (entry,) = json.loads((train_dir / CHANGES_FILE).read_text())
    assert entry["step"] == 1
    assert entry["changes"] == [{"key": "optim.head_lr", "old": None, "new": 0.001}]
