"""What `train` reports: a resumed run's first and last loss include the steps it did not
redo (read back from its train_log.jsonl), also when it resumes at its final step."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dualview.config import validate_config
from dualview.train.config import TrainConfig
from dualview.train.trainer import LOG_FILE, logged_losses, train
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"


def _config(tmp_path: Path) -> TrainConfig:
    tiny = make_tiny_encoder(tmp_path / "tiny", dropout=0.0)
    data = {
        "model": {"name_or_path": str(tiny), "query_max_length": 32, "document_max_length": 48},
        "data": {"train_file": str(FIXTURE), "num_workers": 0},
        "optim": {"lr": 1e-3, "warmup_steps": 0},
        "output_dir": str(tmp_path / "run"),
        "batch_size": 2,
        "epochs": 10,
        "max_steps": 4,
        "checkpoint_every": 2,
        "keep_checkpoints": 2,
    }
    return validate_config(TrainConfig, data, "test")


def test_a_resumed_run_reports_the_losses_of_the_whole_run(tmp_path: Path) -> None:
    config = _config(tmp_path)
    full = train(config)
    assert full.steps == 4 and full.first_loss is not None and full.last_loss is not None
    assert logged_losses(tmp_path / "run" / LOG_FILE) == (full.first_loss, full.last_loss)

    at_the_end = train(config, resume=True)  # the step-4 checkpoint: no step left to run
    assert at_the_end.steps == 4
    assert (at_the_end.first_loss, at_the_end.last_loss) == (full.first_loss, full.last_loss)

    shutil.rmtree(tmp_path / "run" / "checkpoints" / "step-00000004")
    midway = train(config, resume=True)  # from step 2: steps 3-4 rerun
    assert midway.steps == 4
    assert midway.first_loss == full.first_loss  # step 1, from the log
    assert midway.last_loss == pytest.approx(full.last_loss, rel=1e-4)  # step 4, recomputed


def test_logged_losses_of_a_missing_or_lossless_log(tmp_path: Path) -> None:
    assert logged_losses(tmp_path / "none.jsonl") == (None, None)
    log = tmp_path / LOG_FILE
    log.write_text('{"step": 2, "event": "config_change", "changes": []}\n\n')
    assert logged_losses(log) == (None, None)
