"""End to end: `dualview run` with a stub LLM server, killed mid-training and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dualview.data.gold import load_gold
from dualview.eval.export import export_paired
from dualview.pipeline.build import build_pipeline
from dualview.pipeline.experiment import load_experiment
from dualview.pipeline.stages import read_done
from dualview.synth.testing import StubServer
from tests.helpers import pin_parser_edit, run_cli


def _experiment(tmp_path: Path, base_url: str) -> Path:
    eval_dir = tmp_path / "paired"
    export_paired(load_gold("test")[:8], eval_dir)
    config = {
        "name": "e2e",
        "run_dir": str(tmp_path / "run"),
        "seed": 3,
        "instructions": {"path": "gold:train", "views": ["orig"], "limit": 16},
        "synthesis": {
            "limit": 6,
            "job": {
                "backend": {"kind": "openai", "model": "stub", "base_url": base_url},
                "runner": {"concurrency": 4},
            },
        },
        "mixes": [
            {"name": "Ins-orig", "preset": "ins-orig", "size": "auto", "max_size": 8},
            {"name": "Ins-DV", "preset": "ins-dv", "size": "auto", "max_size": 8},
        ],
        "negatives": {"total": 6},
        "training": {
            "config": {
                "model": {"query_max_length": 32, "document_max_length": 64},
                "data": {"train_file": "unused"},
                "output_dir": "unused",
                "batch_size": 2,
                "epochs": 1,
                "checkpoint_every": 1,
            }
        },
        "evaluation": {"benchmarks": [f"paired={eval_dir}"]},
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _start_run(path: Path) -> subprocess.Popen:
    env = {**os.environ, "DUALVIEW_NO_PROGRESS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "dualview", "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )


def _wait_for_checkpoint(run_dir: Path, proc: subprocess.Popen, timeout: float = 300) -> Path:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = sorted(run_dir.glob("train-Ins-orig-*/checkpoints/*"))
        if found:
            return found[0]
        if proc.poll() is not None:
            pytest.fail(f"run ended before a checkpoint: {proc.stdout.read().decode()[-3000:]}")
        time.sleep(0.2)
    pytest.fail("no checkpoint appeared in time")


@pytest.mark.slow
def test_run_killed_in_training_resumes_without_redoing_synthesis(tmp_path):
    with StubServer() as server:
        path = _experiment(tmp_path, server.base_url)
        run_dir = tmp_path / "run"
        proc = _start_run(path)
        _wait_for_checkpoint(run_dir, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        requests_before = server.requests
        (synth_dir,) = run_dir.glob("synth-*")
        synth_done = read_done(synth_dir)
        assert synth_done, "synthesis finished before training started"
        plan = build_pipeline(load_experiment(path)).plan()
        status = {p.stage.name: p.status for p in plan}
        assert status["synth"] == "cached" and status["train-Ins-orig"] == "partial"

        result = run_cli("run", str(path))
        assert result.returncode == 0, result.stderr[-3000:]
        assert server.requests == requests_before  # no LLM call was redone
        assert read_done(synth_dir) == synth_done
    (train_dir,) = run_dir.glob("train-Ins-orig-*")
    assert read_done(train_dir)["resumed"] is True
    # a finished stage keeps its model, not the checkpoints it resumed from
    assert (train_dir / "model").is_dir() and not (train_dir / "checkpoints").exists()
    (mix_dir,) = run_dir.glob("mix-Ins-DV-*")
    manifest = json.loads((mix_dir / "train.jsonl.manifest.json").read_text())
    assert manifest["counts"]["orig"] == manifest["counts"]["dv"] == 4
    report = (next(run_dir.glob("report-*")) / "report.md").read_text()
    for label in ("base", "Ins-orig", "Ins-DV"):
        assert f"| {label} |" in report
    assert "paired pairwise accuracy" in report
    # a second run changes nothing
    again = run_cli("run", str(path))
    assert again.returncode == 0 and again.stderr.count("cached") >= 7


def test_a_parser_upgrade_reruns_the_llm_stage_from_cached_answers(tmp_path, monkeypatch):
    from dualview.pipeline.stages import Pipeline
    from dualview.synth.reverse import ReverseTask

    with StubServer() as server:
        exp = load_experiment(_experiment(tmp_path, server.base_url))
        full = build_pipeline(exp)
        first = Pipeline(full.run_dir, full.stages[:2]).run()  # data + synth only
        asked = server.requests
        assert asked == 6 and (exp.resolved_run_dir() / "llm-cache/reverse.cache.jsonl").exists()
        pin_parser_edit(monkeypatch, ReverseTask)
        upgraded = build_pipeline(exp)
        assert [p.status for p in upgraded.plan()[:2]] == ["cached", "pending"]
        second = Pipeline(upgraded.run_dir, upgraded.stages[:2]).run()
        assert server.requests == asked  # re-judged from the cached answers
    assert second["synth"] != first["synth"]
    stats = read_done(second["synth"])["stats"]
    assert stats["counts"]["replayed_answers"] == 6 and stats["outcomes"]["ok"] == 6
    assert (second["synth"] / "dv.jsonl").read_text() == (first["synth"] / "dv.jsonl").read_text()


def test_a_run_reusing_another_starts_from_its_llm_answers(tmp_path, monkeypatch):
    from dualview.pipeline.stages import Pipeline
    from dualview.synth.reverse import ReverseTask

    with StubServer() as server:
        exp = load_experiment(_experiment(tmp_path, server.base_url))
        full = build_pipeline(exp)
        Pipeline(full.run_dir, full.stages[:2]).run()
        asked = server.requests
        # a second run (another seed) after a parser upgrade: its synth stage is new, and its
        # LLM cache starts as a copy of the first run's, so nothing is asked again
        pin_parser_edit(monkeypatch, ReverseTask)
        second = exp.model_copy(update={"run_dir": tmp_path / "run2", "seed": 4})
        upgraded = build_pipeline(second, reuse_from=[exp.resolved_run_dir()])
        assert [p.status for p in upgraded.plan()[:2]] == ["reusable", "pending"]
        out = Pipeline(upgraded.run_dir, upgraded.stages[:2], [exp.resolved_run_dir()]).run()
        assert server.requests == asked
    assert read_done(out["synth"])["stats"]["counts"]["replayed_answers"] == 6
    assert (tmp_path / "run2" / "llm-cache" / "reverse.cache.jsonl").is_file()
