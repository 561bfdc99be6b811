"""``benchmarks/gpu_train.py`` runs on CPU (tiny shape) and writes what it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_tiny_run_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "gpu_train.json"
    cmd = [sys.executable, "benchmarks/gpu_train.py", "--shape", "tiny", "--batch-size", "4"]
    cmd += ["--negatives", "3", "--steps", "2", "--warmup", "1", "--st-steps", "1"]
    cmd += ["--max-length", "64", "--texts", "msmarco", "--variants", "fixed32,ours,st"]
    proc = subprocess.run(
        [*cmd, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x fixed32" in proc.stdout
    result = json.loads(out.read_text())
    assert result["peak_bf16_tflops"] is None  # CPU: MFU is n/a
    runs = {r["variant"]: r for r in result["results"]}
    assert set(runs) == {"fixed32", "ours", "st"} and not any("error" in r for r in runs.values())
    for run in runs.values():
        assert run["s_per_step"] > 0 and run["tokens_per_s"] > 0 and run["mfu"] is None
        assert run["hfu"] is None and run["hw_tflops"] >= run["tflops"] >= 0  # (rounded)
    # GradCache: HFU counts the no-grad pass too (the trainer's log rounds CPU rates to 0.0)
    assert runs["st"]["hw_tflops"] == pytest.approx(runs["st"]["tflops"] * 4 / 3)
    # ours encodes each shared document once; sentence-transformers every column
    assert runs["st"]["documents_per_step"] == 2 * runs["ours"]["documents_per_step"]
    assert runs["ours"]["gradcache_replay_max_abs_diff"] == 0.0
    assert len(result["losses_fixed32_vs_ours"]["b"]) == 3
