"""``benchmarks/gpu_all.py --tiny`` runs every part on CPU, writes every JSON into one folder,
records a failing variant with its error and goes on, and prints the summary table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tiny_run_writes_every_part(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "benchmarks/gpu_all.py", "--tiny", "--out", str(out)]
    # ours+flash needs CUDA: on CPU it must fail alone, recorded, and the run go on
    cmd += ["--train-variants", "ours,ours+flash,ours+bucket64", "--steps", "1"]
    cmd += ["--encode-n", "16"]
    proc = subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "==== summary ====" in proc.stdout
    names = {"checks", "train", "st", "rerank", "encode", "host", "gpu_all"}
    assert {p.stem for p in out.glob("*.json")} == names
    summary = json.loads((out / "gpu_all.json").read_text())
    assert [p["status"] for p in summary["parts"]] == ["ok"] * 6

    checks = {c["name"]: c for c in json.loads((out / "checks.json").read_text())["checks"]}
    assert checks["packed-nested"]["embeddings_rel_err"] < 1e-5
    assert checks["bucket64"]["grads_rel_err"] < 1e-5

    train = {r["variant"]: r for r in json.loads((out / "train.json").read_text())["results"]}
    assert train["ours"]["s_per_step"] > 0 and train["ours"]["gradcache_replay_max_abs_diff"] == 0
    assert "torch_flash: needs CUDA" in train["ours+flash"]["error"]
    # bucketed widths: the same losses as ours, step by step (dropout masks too: max 64)
    assert train["ours+bucket64"]["losses_vs_ours"]["max_abs_diff"] < 1e-4
    rerank = {r["variant"]: r for r in json.loads((out / "rerank.json").read_text())["results"]}
    assert set(rerank) == {"ce", "llm"}
    for family in rerank.values():  # the reranker steps ran (pairs, not texts) and trained
        assert family["s_per_step"] > 0 and family["documents_per_step"] == 4 * 4
        assert len(family["losses"]) == 2 and family["speedup_vs_ours"] == 1.0
    st = json.loads((out / "st.json").read_text())["results"]
    assert st[0]["variant"] == "st" and st[0]["s_per_step"] > 0

    case = json.loads((out / "encode.json").read_text())["cases"][0]
    assert set(case["runs"]) == {"st-fp32", "ours", "ids"}
    assert case["ids_tokens_match"] and case["ids_min_cosine_vs_st_fp32"] > 0.999
    assert case["ids_used_token_cache"]  # the cached path ran, not the fallback
    host = json.loads((out / "host.json").read_text())
    assert host["benchmark"] == "host_ceiling"
