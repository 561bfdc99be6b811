from __future__ import annotations

import filecmp

from dualview.demo import EVAL_DIR, demo_experiment, write_eval_sets
from dualview.pipeline.build import build_pipeline


def test_bundled_eval_sets_match_the_gold_test_split(tmp_path):
    counts = write_eval_sets(tmp_path)
    assert counts["followir"] == counts["paired"] >= 50
    for layout in ("followir", "paired"):
        fresh = sorted(
            p.relative_to(tmp_path) for p in (tmp_path / layout).rglob("*") if p.is_file()
        )
        assert fresh, layout
        for rel in fresh:
            assert filecmp.cmp(tmp_path / rel, EVAL_DIR / rel, shallow=False), (
                f"{EVAL_DIR / rel} is stale: rerun dualview.demo.write_eval_sets()"
            )


def test_demo_plan_has_every_stage(tmp_path):
    full = demo_experiment(run_dir=tmp_path / "full")
    fast = demo_experiment(fast=True, run_dir=tmp_path / "fast")
    assert fast.synthesis.limit < full.synthesis.limit
    names = [p.stage.name for p in build_pipeline(full).plan()]
    assert names == [
        "data", "synth", "mix-Ins-orig", "train-Ins-orig", "mix-Ins-DV", "train-Ins-DV",
        "eval", "report",
    ]  # fmt: skip
    statuses = {p.status for p in build_pipeline(fast).plan()}
    assert statuses == {"pending"}
