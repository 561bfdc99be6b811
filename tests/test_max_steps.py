"""``max_steps`` as in Hugging Face's Trainer: it sets the number of optimizer steps and
overrides ``epochs`` (batches cycle over epochs), the schedule is computed from it, the
step log shows the lr each step used, and a schedule with a step at lr 0 or a ``max_steps``
beyond one pass over the data is announced on stderr."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from dualview.config import validate_config
from dualview.train.config import TrainConfig
from dualview.train.schedule import StepPlan, plan_steps, schedule_warnings
from dualview.train.trainer import LOG_FILE, MODEL_DIR, train
from tests.train_tiny import make_tiny_encoder

# 8 orig + 8 dv records: with batch_size 8 (4 instances, both views) 2 batches per epoch
FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
LR = 1e-3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny") / "enc", dropout=0.0)


def _config(tiny: Path, out: Path, **top) -> TrainConfig:
    optim = {"lr": LR, "warmup_steps": top.pop("warmup_steps", 0), "schedule": "linear"}
    config = {
        "model": {"name_or_path": str(tiny), "query_max_length": 16, "document_max_length": 16},
        "data": {"train_file": str(FIXTURE), "num_workers": 0, "num_negatives": 1},
        "optim": optim,
        "output_dir": str(out),
        "batch_size": 8,
        "epochs": 1,
        **top,
    }
    return validate_config(TrainConfig, config, "test_max_steps")


def _log(out: Path) -> list[dict]:
    lines = (out / LOG_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_max_steps_overrides_epochs_and_a_resume_reaches_the_same_run(
    tiny: Path, tmp_path: Path, capsys
):
    out = tmp_path / "run"
    config = _config(tiny, out, max_steps=5, checkpoint_every=3)
    result = train(config)
    log = _log(out)
    assert result.steps == 5 and [r["step"] for r in log] == [1, 2, 3, 4, 5]
    # 2 steps per epoch: steps 3-4 read the second pass, step 5 the third
    assert [r["epoch"] for r in log] == [0, 1, 1, 2, 2]
    # linear decay over 5 steps, no warm-up: each step's own lr, the first at the peak
    assert [r["lr"] for r in log] == pytest.approx([LR * (5 - k) / 5 for k in range(5)])
    err = capsys.readouterr().err
    assert f"warning: {FIXTURE}: max_steps 5 is more than one pass over the data" in err
    assert "(2 steps per epoch): training runs 2.5 epochs" in err
    assert "at lr 0" not in err
    straight = load_file(out / MODEL_DIR / "model.safetensors")
    # as if killed after the step-3 checkpoint (mid second epoch): resume to the same end
    shutil.rmtree(out / MODEL_DIR)
    result = train(config, resume=True)
    assert result.steps == 5 and [r["step"] for r in _log(out)] == [1, 2, 3, 4, 5]
    resumed = load_file(out / MODEL_DIR / "model.safetensors")
    assert max((straight[k] - resumed[k]).abs().max().item() for k in straight) <= 1e-6


def test_a_step_at_lr_0_is_announced(tiny: Path, tmp_path: Path, capsys):
    result = train(_config(tiny, tmp_path / "run", warmup_steps=1, max_steps=2))
    assert result.steps == 2
    assert _log(tmp_path / "run")[0]["lr"] == 0.0  # the log says what the step used
    err = capsys.readouterr().err
    assert "warning: 1 of 2 steps trains at lr 0 (step 1: Hugging Face's warm-up" in err
    assert "more than one pass" not in err  # 2 steps: exactly one pass


@pytest.mark.parametrize(
    ("batches", "accumulation", "epochs", "max_steps", "plan"),
    [
        (2, 1, 1, 5, StepPlan(5, 2, 3, 5)),  # 2.5 passes: the stream opens 3 epochs
        (3, 2, 1, 4, StepPlan(4, 1, 3, 4)),  # 8 batches of 3 a pass: accumulation spans epochs
        (10, 1, 20, 4, StepPlan(4, 10, 1, 4)),  # max_steps overrides a larger epochs too
        (10, 1, 2, None, StepPlan(20, 10, 2)),
        (1, 2, 1, 3, StepPlan(0, 0, 1)),  # too few batches for one step: the trainer refuses
    ],
)
def test_plan_steps(batches, accumulation, epochs, max_steps, plan):
    assert plan_steps(batches, accumulation, epochs, max_steps) == plan


def test_warnings_say_when_nothing_trains_and_how_many_epochs():
    lines = schedule_warnings(StepPlan(1, 1, 1, 1), [1], "t.jsonl")
    assert lines == [
        "warning: 1 of 1 steps trains at lr 0 (step 1: Hugging Face's warm-up starts from 0), "
        "so the run changes no weights; with optim.warmup_steps and optim.warmup_ratio 0 "
        "every step trains"
    ]
    # warm-up's first step of a 40-step run trains at lr 0 by design: not announced
    assert schedule_warnings(StepPlan(40, 40, 1, None), [1], "t.jsonl") == []
    (line,) = schedule_warnings(StepPlan(3, 1, 3, 3), [], "t.jsonl")
    assert line.endswith("(1 step per epoch): training runs 3 epochs")
    (line,) = schedule_warnings(StepPlan(40, 13, 4, 40), [], "t.jsonl")
    assert line.endswith(
        "max_steps 40 is more than one pass over the data (13 steps per "
        "epoch): training runs 3.08 epochs"
    )
