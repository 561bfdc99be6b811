"""``dualview run SWEEP --dry-run`` shows what will really run: a stage several arms share
runs once (the others copy it), cached stages are skipped, and the time is estimated from
the stage timings recorded in the sweep's run folders."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from rich.console import Console

from dualview.pipeline.experiment import Experiment
from dualview.pipeline.stages import DONE_FILE, Pipeline, Stage
from dualview.pipeline.sweep import grid_table, load_sweep, run_sweep


def _write(tmp_path: Path, policies: list[str], seeds: list[int]) -> Path:
    config = {
        "name": "study",
        "run_dir": str(tmp_path / "sweep"),
        "instructions": {"path": "gold:train", "views": ["orig", "dv"], "limit": 8},
        "synthesis": {"enabled": False},
        "mixes": [{"name": "Ins-DV", "preset": "ins-dv", "size": 4}],
        "training": {
            "config": {"model": {"query_max_length": 16}, "data": {"train_file": "x"}},
            "overrides": {"max_steps": 2},
        },
        "evaluation": {"benchmarks": ["phenomena"]},
        "sweep": {
            "parameters": {"training.overrides.data.view_policy": policies},
            "seeds": seeds,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def build(exp: Experiment, reuse_from: list[Path] | None) -> Pipeline:
    """Stand-in stages: data (the same in every arm run), train and eval (per arm run)."""
    settings = exp.training.model_dump(mode="json")
    stages = [
        Stage("data", lambda out, up: {}),
        Stage("train", lambda out, up: {}, {"t": settings, "seed": exp.seed}, after=["data"]),
        Stage("eval", lambda out, up: {}, after=["train"]),
    ]
    return Pipeline(exp.resolved_run_dir(), stages, reuse_from)


def _rows(sweep_file: Path) -> tuple[dict[tuple[str, str], dict[str, str]], str]:
    """The dry run's grid: (arm, seed) -> column -> cell, and the whole printed text."""
    sweep = load_sweep(sweep_file)
    assert sweep is not None
    console = Console(record=True, width=250)
    console.print(grid_table(sweep, build))
    text = console.export_text()
    lines = text.splitlines()
    header = next([c.strip() for c in line.split("┃")[1:-1]] for line in lines if "┃" in line)
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if "│" in line]
    rows = [dict(zip(header, row, strict=True)) for row in cells]
    return {(r["arm"], r["seed"]): r for r in rows}, text


def _record(sweep_dir: Path, runs: str, stage: str, seconds: float) -> None:
    """Set the recorded time of the finished ``stage`` folders of the ``runs`` (a glob)."""
    for marker in sweep_dir.glob(f"{runs}/{stage}-*/{DONE_FILE}"):
        done = json.loads(marker.read_text())
        marker.write_text(json.dumps({**done, "seconds": seconds}))


def test_a_fresh_sweep_runs_its_shared_stage_once(tmp_path: Path) -> None:
    rows, text = _rows(_write(tmp_path, ["together", "separate"], [1, 2]))
    first, *others = rows.values()
    assert (first["to run"], first["to copy"]) == ("3", "0")  # data, train, eval
    assert all((r["to run"], r["to copy"]) == ("2", "1") for r in others)  # data copied
    assert all(r["est. time"] == "no timing recorded" for r in rows.values())
    assert "will run 9 stages and resume 0; 3 shared stages copied, 0 cached" in text
    assert "estimated time: no timing recorded" in text
    assert not (tmp_path / "sweep").exists()


def test_the_estimate_comes_from_recorded_stage_timings(tmp_path: Path) -> None:
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    sweep = load_sweep(_write(tmp_path, ["together", "separate"], [1]))
    assert sweep is not None
    run_sweep(sweep, quiet, build=build)
    _record(tmp_path / "sweep", "*/seed=*", "eval", 30.0)
    _record(tmp_path / "sweep", "view_policy=together/seed=*", "train", 100.0)
    _record(tmp_path / "sweep", "view_policy=separate/seed=*", "train", 200.0)
    rows, text = _rows(_write(tmp_path, ["together", "separate", "random"], [1, 2]))
    # the runs already done: every stage cached, nothing to run
    for arm in ("view_policy=together", "view_policy=separate"):
        assert rows[(arm, "1")]["cached"] == "3" and rows[(arm, "1")]["est. time"] == "-"
    # a new seed: data copied; train timed from its own arm's runs, eval from every arm's
    assert rows[("view_policy=together", "2")]["est. time"] == "0:02:10"
    assert rows[("view_policy=separate", "2")]["est. time"] == "0:03:50"
    # a new arm: the mean over the arms that ran (150 + 30 s)
    random = rows[("view_policy=random", "1")]
    assert (random["to copy"], random["to run"], random["est. time"]) == ("1", "2", "0:03:00")
    assert "will run 8 stages and resume 0; 4 shared stages copied, 6 cached" in text
    assert "estimated time: 0:12:00" in text  # 130 + 230 + 2 x 180 s
