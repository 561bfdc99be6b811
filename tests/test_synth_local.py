"""End to end with the embedded local LLM through the CLI (slow: loads the 0.5B GGUF model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualview.data.jsonl import iter_records
from dualview.io.atomic import write_jsonl

FIXTURE = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"


def dualview(*args: str) -> subprocess.CompletedProcess:
    code = "from dualview.cli import main; main()"
    env = {**os.environ, "DUALVIEW_NO_PROGRESS": "1"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=900
    )


@pytest.mark.slow
def test_embedded_model_reverses_records_through_the_cli(tmp_path: Path) -> None:
    source = tmp_path / "orig.jsonl"
    originals = list(iter_records(FIXTURE))[:3]
    write_jsonl(source, originals)
    out = tmp_path / "dv.jsonl"
    args = ["synth", str(source), str(out), "--backend", "local", "--concurrency", "1",
            "--set", "sampling.max_tokens=80"]  # fmt: skip
    first = dualview(*args)
    assert first.returncode == 0, first.stderr
    stats = json.loads(out.with_name("dv.jsonl.stats.json").read_text())
    assert stats["model"].startswith("local:") and stats["units"] == 3 and stats["complete"]
    assert sum(stats["outcomes"].values()) == 3 and stats["outcomes"]["error"] == 0
    assert stats["llm_calls"] == 3 and stats["tokens_out"] > 0
    # Whatever the small model wrote: valid dv records, or a dropped line with its reason.
    parents = {r.id: r for r in originals}
    produced = list(iter_records(out))
    for record in produced:
        parent = parents[record.parent_id]
        assert record.view == "dv" and record.instruction != parent.instruction
        assert record.positives[0].id == record.meta["n_star_id"]
    dropped = [json.loads(line) for line in out.with_name("dv.jsonl.dropped.jsonl").open()]
    assert len(produced) + len(dropped) == 3
    assert all(d["reason"] and d["raw"] for d in dropped)
    # A rerun with the same settings is answered from the cache: no model call at all.
    before = out.read_bytes()
    second = dualview(*args)
    assert second.returncode == 0, second.stderr
    again = json.loads(out.with_name("dv.jsonl.stats.json").read_text())
    assert again["this_run_units"] == 0 and out.read_bytes() == before
