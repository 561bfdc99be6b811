"""Multi-process training end to end: ``torchrun`` and ``accelerate launch`` on CPU (gloo).

Two processes with the same global batch must give the losses and weights of one process.
Tolerance 1e-5 (absolute, losses and weights): each rank encodes half of the batch and the
parameter gradients are summed over ranks by an all-reduce, so float32 sums are added in
another order than in one full-batch backward (measured: 3e-7 on weights, 2e-6 on losses
after 8 steps). Dropout is 0: its masks depend on which process draws them, so with dropout
the runs are equally valid but not comparable value by value.

A run whose rank 1 is SIGKILLed and that is then resumed with ``--resume`` must end with
exactly the weights of the uninterrupted 2-process run (same arithmetic, same order).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from safetensors.torch import load_file

from dualview.config import load_config
from dualview.errors import ConfigError
from dualview.train.config import TrainConfig
from dualview.train.launch import check_launch
from dualview.train.trainer import train
from tests.helpers import free_port
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"
STEPS = 12  # 16 records, batch 4 -> 4 steps per epoch, 3 epochs
TOLERANCE = 1e-5


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DUALVIEW_NO_PROGRESS": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def _launch(launcher: str, config: Path, out: Path, *extra: str) -> list[str]:
    train_args = ["-m", "dualview", "train", str(config), "--set", f"output_dir={out}", *extra]
    if launcher == "torchrun":
        prefix = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    else:  # --multi_gpu selects torch.distributed's launcher; on CPU the ranks use gloo
        prefix = ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
        prefix += ["--main_process_port", str(free_port()), "--mixed_precision", "no"]
    return [sys.executable, *prefix, *train_args]


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "training on 2 process(es)" in proc.stdout


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The training config (tiny BERT without dropout) and a one-process reference run."""
    root = tmp_path_factory.mktemp("multiprocess")
    tiny = make_tiny_encoder(root / "tiny", dropout=0.0)
    config = {
        "model": {"name_or_path": str(tiny), "query_max_length": 32, "document_max_length": 48},
        "data": {"train_file": str(FIXTURE), "num_workers": 0},
        "optim": {"lr": 1e-3, "warmup_steps": 2},
        "output_dir": str(root / "unset"),
        "batch_size": 4,
        "epochs": 3,
        "checkpoint_every": 2,
        "keep_checkpoints": 2,
    }
    path = root / "train.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = train(load_config(TrainConfig, path, [f"output_dir={root / 'one'}"]))
    assert result.steps == STEPS
    return path


@pytest.fixture(scope="module")
def torchrun_run(setup: Path) -> Path:
    out = setup.parent / "torchrun"
    _run(_launch("torchrun", setup, out))
    return out


def _weights(out: Path) -> dict:
    return load_file(out / "model" / "model.safetensors")


def _losses(out: Path) -> list[float]:
    lines = (out / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    return [r["loss"] for r in records]


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_processes_equal_one_process(setup: Path, torchrun_run: Path, launcher: str) -> None:
    if launcher == "torchrun":
        out = torchrun_run
    else:
        out = setup.parent / launcher
        _run(_launch(launcher, setup, out))
    one = setup.parent / "one"
    assert max(abs(a - b) for a, b in zip(_losses(one), _losses(out), strict=True)) <= TOLERANCE
    assert _max_diff(_weights(one), _weights(out)) <= TOLERANCE
    moved = _max_diff(_weights(one), load_file(setup.parent / "tiny" / "model.safetensors"))
    assert moved > 1e-3, "training did not change the weights: the comparison proves nothing"


def _rank_pid(launcher: psutil.Process, rank: str) -> int | None:
    for child in launcher.children(recursive=True):
        try:
            if child.environ().get("RANK") == rank:
                return child.pid
        except psutil.Error:
            continue
    return None


@pytest.mark.slow
def test_sigkill_of_one_rank_then_resume_continues_exactly(setup: Path, torchrun_run: Path) -> None:
    out = setup.parent / "killed"
    proc = subprocess.Popen(
        _launch("torchrun", setup, out),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    marker = out / "checkpoints" / "step-00000004"
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    victim = _rank_pid(psutil.Process(proc.pid), "1")
    assert victim is not None, "rank 1 not found (did the run end early?)"
    os.kill(victim, signal.SIGKILL)
    proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert not (out / "model").exists(), "the run finished before rank 1 was killed"

    _run(_launch("torchrun", setup, out, "--resume"))
    assert _losses(out) == _losses(torchrun_run)
    assert _max_diff(_weights(out), _weights(torchrun_run)) <= 1e-6


def test_accelerate_cpu_launcher_with_one_process_of_several_is_an_error() -> None:
    simple = {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    with pytest.raises(ConfigError, match="--multi_gpu"):
        check_launch(simple)
    check_launch({**simple, "WORLD_SIZE": "2", "RANK": "0"})  # torch.distributed's launcher
    check_launch({**simple, "PMI_SIZE": "2"})  # MPI started the other processes
    check_launch({"ACCELERATE_USE_CPU": "True"})  # --num_processes 1: nothing asked for more
