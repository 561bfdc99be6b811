"""``benchmarks/gold_dv_of_kept.py``: the gold dual views of exactly the instances an LLM
arm's judge kept, beside every original of the split (issue 36 item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dualview.data.gold_folds import load_gold_source
from dualview.data.gold_pairs import gold_pairs
from dualview.data.jsonl import iter_records
from dualview.io.atomic import write_jsonl

SCRIPT = "benchmarks/gold_dv_of_kept.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def test_the_source_holds_every_orig_and_the_gold_dv_of_the_kept_only(tmp_path: Path) -> None:
    pairs = gold_pairs(load_gold_source("fit"))
    kept = [(o, dv) for o, dv in pairs[3:30:9]]  # three instances the "judge" kept
    llm = [
        dv.model_copy(update={"id": f"{o.id}-dv", "instruction": "an LLM's reversal"})
        for o, dv in kept
    ]
    write_jsonl(
        tmp_path / "kept.jsonl", [r for (o, _), d in zip(kept, llm, strict=True) for r in (o, d)]
    )
    done = run(str(tmp_path / "kept.jsonl"), str(tmp_path / "src.jsonl"))
    assert done.returncode == 0, done.stderr
    out = list(iter_records(tmp_path / "src.jsonl"))
    origs = [r for r in load_gold_source("fit") if r.view == "orig"]
    assert [r.id for r in out if r.view == "orig"] == [o.id for o in origs]
    dvs = [r for r in out if r.view == "dv"]
    # the gold (hand-written) dual views, not the LLM's, of just the kept instances
    assert [r.id for r in dvs] == [dv.id for _, dv in kept]
    assert [r.instruction for r in dvs] == [dv.instruction for _, dv in kept]
    assert json.loads(done.stdout) == {"out": str(tmp_path / "src.jsonl"), "orig": 124, "dv": 3}


def test_a_kept_record_of_another_split_is_a_located_error(tmp_path: Path) -> None:
    _, dv = gold_pairs(load_gold_source("fit"))[0]
    stray = dv.model_copy(update={"id": "x-dv", "parent_id": "gold-nowhere-001-orig"})
    write_jsonl(tmp_path / "kept.jsonl", [stray])
    done = run(str(tmp_path / "kept.jsonl"), str(tmp_path / "src.jsonl"))
    assert done.returncode == 2
    assert "kept.jsonl" in done.stderr and "gold-nowhere-001-orig" in done.stderr
    assert not (tmp_path / "src.jsonl").exists()
