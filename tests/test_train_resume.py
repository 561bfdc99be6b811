"""Exact resume: SIGKILL after a checkpoint, SIGTERM mid-run, resume; same final weights."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from dualview.config import load_config
from dualview.train.config import TrainConfig
from dualview.train.trainer import train
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"


def _config(tmp_path: Path) -> Path:
    tiny = make_tiny_encoder(tmp_path / "tiny", dropout=0.1)  # dropout: RNG state matters
    config = {
        "model": {"name_or_path": str(tiny), "query_max_length": 32, "document_max_length": 48},
        "data": {"train_file": str(FIXTURE)},
        "optim": {"lr": 1e-3, "warmup_steps": 2},
        "output_dir": str(tmp_path / "unset"),
        "batch_size": 4,
        "gradcache_chunk_size": "auto",  # token-budget chunks of length-sorted texts
        "epochs": 4,
        "checkpoint_every": 2,
        "keep_checkpoints": 2,
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _cmd(config: Path, out: Path, *extra: str) -> list[str]:
    cli = [sys.executable, "-c", "from dualview.cli import main; main()"]
    # the interrupted runs prepare batches in 2 threads; the straight run in the loop
    workers = ["--set", "data.num_workers=2"]
    return [*cli, "train", str(config), "--set", f"output_dir={out}", *workers, *extra]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DUALVIEW_NO_PROGRESS": "1",
        "OMP_NUM_THREADS": "1",
    }


def _run_until(cmd: list[str], marker: Path, sig: int) -> tuple[int, str]:
    """Start ``cmd``, send ``sig`` as soon as ``marker`` exists; return the exit code and
    the end of what it printed (shown when an assertion fails)."""
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out.decode(errors="replace")[-3000:]


@pytest.mark.slow
def test_killed_and_terminated_run_resumes_to_identical_weights(tmp_path: Path) -> None:
    config = _config(tmp_path)
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    train(load_config(TrainConfig, config, [f"output_dir={straight}", "data.num_workers=0"]))

    ckpts = broken / "checkpoints"
    code, out = _run_until(_cmd(config, broken), ckpts / "step-00000004", signal.SIGKILL)
    assert code == -signal.SIGKILL, out
    assert not (broken / "model").exists(), "the run finished before it could be killed"

    code, out = _run_until(
        _cmd(config, broken, "--resume"), ckpts / "step-00000008", signal.SIGTERM
    )
    assert code == 143, f"SIGTERM must checkpoint and exit 143; the run printed:\n{out}"
    resumed = train(load_config(TrainConfig, config, [f"output_dir={broken}"]), resume=True)
    assert resumed.steps == 16 and not resumed.interrupted

    expected = load_file(straight / "model" / "model.safetensors")
    got = load_file(broken / "model" / "model.safetensors")
    assert expected.keys() == got.keys()
    worst = max(float((expected[k] - got[k]).abs().max()) for k in expected)
    assert worst <= 1e-6
    initial = load_file(tmp_path / "tiny" / "model.safetensors")
    assert max(float((initial[k] - got[k]).abs().max()) for k in initial) > 1e-3

    steps = [json.loads(line)["step"] for line in (broken / "train_log.jsonl").open()]
    assert steps == list(range(1, 17))
