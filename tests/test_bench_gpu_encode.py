"""``benchmarks/gpu_encode.py`` runs on CPU (tiny shape) and writes every field it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_FIELDS = {
    "texts",
    "times_s",
    "best_s",
    "texts_per_s",
    "tokens_per_s",
    "tflops",
    "mfu",
    "peak_memory_gib",
    "padding",
}


def test_tiny_run_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "gpu_encode.json"
    cmd = [sys.executable, "benchmarks/gpu_encode.py", "--tiny", "--n", "96", "--repeats", "1"]
    proc = subprocess.run(
        [*cmd, "--device", "cpu", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x st-fp32" in proc.stdout  # the table
    result = json.loads(out.read_text())
    assert result["benchmark"] == "gpu_encode" and result["peak_bf16_tflops"] is None
    assert result["machine"]["cores"] >= 1 and "load_avg_after" in result["machine"]
    assert [(c["shape"], c["texts"]) for c in result["cases"]] == [
        ("tiny", "msmarco"),
        ("tiny", "long"),
    ]
    for case in result["cases"]:
        assert case["n"] == case["baseline_n"] == 96
        assert case["ours_precision"] == "fp32" and case["ours_workers"] == 0
        assert case["ours_tokens_match"]
        assert case["min_cosine_vs_st_fp32"] > 0.999  # fp32 on CPU: the same vectors
        assert case["ours_vs_st_fp32"] > 0 and case["ours_vs_st_bf16"] > 0
        assert set(case["runs"]) == {"st-fp32", "st-bf16", "ours"}
        for run in case["runs"].values():
            assert set(run) >= RUN_FIELDS
            assert run["texts_per_s"] > 0 and run["tokens_per_s"] > run["texts_per_s"]
            assert run["tflops"] > 0 and run["mfu"] is None and run["peak_memory_gib"] is None
            assert 0 <= run["padding"] < 0.6
    long = result["cases"][1]
    assert long["mean_tokens"] > 400  # long texts fill the 512 tokens
    assert set(result["goals"]) == {"tiny/msmarco ours >= 0.9 st", "tiny/long ours >= 0.9 st"}
