"""One writer per run folder and per synthesis cache: a second writer exits 2 naming the
holder's pid; a lock left by a killed process is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dualview.lock import LOCK_FILE, LockedError, exclusive, folder_lock, read_holder
from tests.conftest import FIXTURES
from tests.helpers import run_cli
from tests.test_fuzz_cli import experiment

HOLD = (
    "import sys, time\n"
    "from dualview.lock import exclusive\n"
    "with exclusive(sys.argv[1]):\n"
    "    print('locked', flush=True)\n"
    "    time.sleep(120)\n"
)


def hold(lock_path: Path) -> subprocess.Popen:
    """A separate process holding ``lock_path`` until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr[-2000:]
    return errors[0]


def test_a_second_run_on_the_same_folder_exits_2_naming_the_holder(tmp_path: Path) -> None:
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump(experiment(tmp_path)))
    run_dir = tmp_path / "run"
    holder = hold(run_dir / LOCK_FILE)
    try:
        result = run_cli("run", str(config), timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2
    line = one_error_line(result.stderr)
    assert f"pid {holder.pid}" in line and str(run_dir) in line
    assert not list(run_dir.glob("*-*")), "the refused run must not have started a stage"


def test_a_second_synth_on_the_same_output_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    holder = hold(tmp_path / "out.jsonl.cache.jsonl.lock")
    try:
        result = run_cli(
            "synth", str(FIXTURES / "synth" / "orig.jsonl"), str(out),
            "--backend", "openai", "--base-url", "http://127.0.0.1:9", "--model", "stub",
        )  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2
    assert f"pid {holder.pid}" in one_error_line(result.stderr)
    assert not out.exists()


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    lock = tmp_path / "run" / LOCK_FILE
    holder = hold(lock)
    with pytest.raises(LockedError, match=f"pid {holder.pid}"), folder_lock(tmp_path / "run"):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert read_holder(lock)["pid"] == holder.pid  # the dead holder's note is still there
    with folder_lock(tmp_path / "run") as me:
        assert me["pid"] == os.getpid() and read_holder(lock)["pid"] == os.getpid()
        with pytest.raises(LockedError), exclusive(lock):  # held: not even by ourselves twice
            pass
    with folder_lock(tmp_path / "run"):  # released at the end of the block
        pass


def test_a_second_training_on_the_same_output_folder_exits_2(tmp_path: Path) -> None:
    """The lock is taken before anything is loaded or written (here the model path does not
    even exist: without the lock the error would be about the model)."""
    out = tmp_path / "model-out"
    config = tmp_path / "train.yaml"
    train_file = FIXTURES / "train" / "dv_small.jsonl"
    config.write_text(
        f"data: {{train_file: {train_file}}}\noutput_dir: {out}\n"
        f"model: {{name_or_path: {tmp_path / 'no-such-model'}}}\n"
    )
    holder = hold(out / LOCK_FILE)
    try:
        result = run_cli("train", str(config))
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2
    line = one_error_line(result.stderr)
    assert f"pid {holder.pid}" in line and "training folder" in line
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing else written
