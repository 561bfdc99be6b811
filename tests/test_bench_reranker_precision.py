"""``benchmarks/reranker_precision.py --tiny`` opens one LLM reranker folder in fp32 and in
bf16 through `open_reranker`, scores the same candidate groups, and writes every field it
promises; the agreement measures are checked on hand-made scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from reranker_precision import agreement, kendall_tau  # noqa: E402

pytest.importorskip("peft")  # the LLM reranker's folder is saved through dualview[lora]'s code


def test_kendall_tau_and_agreement_on_hand_made_scores() -> None:
    assert kendall_tau([3, 2, 1], [30, 20, 10]) == 1.0
    assert kendall_tau([3, 2, 1], [10, 20, 30]) == -1.0
    assert kendall_tau([3, 2, 1], [2, 3, 1]) == pytest.approx(1 / 3)
    full = np.array([3.0, 2.0, 1.0, 0.5, 0.4])
    other = np.array([3.0, 2.0, 1.0, 0.4, 0.4])  # group 2's order lost: a tie
    got = agreement([[0, 1, 2], [3, 4]], full, other)
    assert got == {"max_abs_diff": 0.1, "same_top1": 1.0, "mean_kendall_tau": 0.0, "ties": 1}


def test_tiny_run_scores_both_precisions_and_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "reranker_precision.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/reranker_precision.py", "--tiny", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "precision" in proc.stdout and "machine:" in proc.stdout  # the table
    result = json.loads(out.read_text())
    assert result["benchmark"] == "reranker_precision" and "load_avg_after" in result["machine"]
    fp32, bf16 = result["runs"]
    assert (fp32["precision"], bf16["precision"]) == ("fp32", "bf16")
    assert fp32["speedup"] == 1.0 and fp32["max_abs_diff"] == 0.0 and fp32["same_top1"] == 1.0
    assert fp32["fingerprint"] != bf16["fingerprint"]  # the cast happened, the caches differ
    assert 0 < bf16["max_abs_diff"] < 0.5
    for run in (fp32, bf16):
        assert run["pairs"] <= 16 and run["groups"] >= 1 and len(run["times_s"]) == 2
        median = sum(run["times_s"]) / 2
        assert run["pairs_per_s"] == pytest.approx(run["pairs"] / median, rel=0.01)


def test_an_output_on_the_data_it_reads_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text("{}\n", encoding="utf-8")
    cmd = [sys.executable, "benchmarks/reranker_precision.py", "--tiny", "--data", str(data)]
    proc = subprocess.run(
        [*cmd, "--out", str(data)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0 and "is the input" in proc.stderr
    assert data.read_text(encoding="utf-8") == "{}\n"  # untouched
