"""``benchmarks/host_ceiling.py`` runs its tiny configuration and writes every field it promises."""

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
    "texts_per_cpu_s",
    "tokens_per_s",
    "padding",
    "bytes_per_text",
    "vs_raw",
    "cpu_vs_raw",
}


def test_tiny_run_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "host_ceiling.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/host_ceiling.py", "--tiny", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x raw" in proc.stdout and "training batch" in proc.stdout  # the table
    result = json.loads(out.read_text())
    assert result["benchmark"] == "host_ceiling"
    assert "load_avg_before" in result["machine"] and "load_avg_after" in result["machine"]
    assert [c["texts"] for c in result["encode"]] == ["long", "msmarco"]
    for case in result["encode"]:
        runs = case["runs"]
        assert set(runs) == {"raw", "workers=1", "workers=2"}
        for name, run in runs.items():
            assert set(run) >= RUN_FIELDS
            assert run["texts"] == case["n"] and run["tokens_per_s"] > run["texts_per_s"] > 0
            # the encoder saw exactly the raw tokenizer's tokens and padding
            assert run["padding"] == runs["raw"]["padding"]
            if name == "raw":
                assert run["vs_raw"] == 1.0 and run["bytes_per_text"] is None
            else:  # int64 ids + mask (+ token types) per padded position, handed over
                assert run["bytes_per_text"] >= 16 * (1 - run["padding"]) * 10
    long = result["encode"][0]["runs"]["raw"]
    assert long["tokens_per_s"] / long["texts_per_s"] > 400  # long texts fill 512 tokens
    for case in result["padding"]:
        assert case["packed"] == 0.0 and case["train_chunks_padded"] >= 0
    assert [c["texts"] for c in result["packed_vs_padded"]] == ["msmarco"]
    for case in result["packed_vs_padded"]:
        assert case["n"] == 8 and case["padded_cpu_s"] > 0 and case["packed_cpu_s"] > 0
    msmarco = result["padding"][1]
    assert msmarco["encode_batches_padded"] > 0.05  # MS MARCO lengths vary: padding to remove
    train = result["train"]
    assert train["queries"] == 8 and train["documents"] == 4 * 4  # 4 pairs x (1 + 3) shared
    assert len(train["prepare_s"]) == 3 and len(train["stall_s"]) == 2
    assert train["tokenize_documents"]["texts"] == 16
    assert train["tokenize_documents"]["backend_cpu_s"] > 0
    assert all(t > 0 for t in train["prepare_cpu_s"]) and 0 <= train["padding"] < 1
    assert set(result["goals"]) == {
        "long workers=1 >= 0.8x raw",
        "long workers=2 >= 1.5x raw",
        "train prepare <= 1.5 s",
        "train never waited on (2 workers)",
    }
