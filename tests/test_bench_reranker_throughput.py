"""``benchmarks/reranker_throughput.py --tiny`` scores one LLM-reranker and one cross-encoder
folder by dualview and by sentence-transformers' ``CrossEncoder``, with the same scores, and
writes every field it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN_FIELDS = {
    "reranker",
    "pairs",
    "batch_size",
    "max_abs_diff",
    "ours_pairs_per_s",
    "theirs_pairs_per_s",
    "speedup",
    "cpu_speedup",
    "times_s",
    "cpu_times_s",
}

pytest.importorskip("peft")  # the LLM reranker's folder is saved through dualview[lora]'s code


def test_tiny_run_scores_both_folders_alike_and_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "reranker_throughput.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/reranker_throughput.py", "--tiny", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sentence-transformers" in proc.stdout and "machine:" in proc.stdout  # the table
    result = json.loads(out.read_text())
    assert result["benchmark"] == "reranker_throughput"
    assert "load_avg_before" in result["machine"] and "load_avg_after" in result["machine"]
    assert [run["reranker"] for run in result["runs"]] == ["llm_reranker", "cross_encoder"]
    for run in result["runs"]:
        assert set(run) >= RUN_FIELDS
        assert run["pairs"] == 8 and run["max_abs_diff"] < 1e-4  # same pairs, same scores
        for side in ("ours", "theirs"):
            assert len(run["times_s"][side]) == 2 and all(t > 0 for t in run["times_s"][side])
        ours_s = sorted(run["times_s"]["ours"])
        theirs_s = sorted(run["times_s"]["theirs"])
        median = lambda times: (times[0] + times[1]) / 2  # noqa: E731
        assert run["speedup"] == pytest.approx(median(theirs_s) / median(ours_s), rel=0.01)
