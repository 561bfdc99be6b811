"""Reports of experiment run folders (``dualview report RUN_DIR``)."""

from __future__ import annotations

import json
from pathlib import Path

from dualview.errors import DualviewError
from dualview.report import ReportFiles, write_report
from dualview.report.collect import collect_rows

CONFIGURATIONS = "configurations.json"


def report_from_eval_stage(eval_stage: Path, out_dir: Path, title: str) -> ReportFiles:
    """Report of one eval stage folder (its ``configurations.json`` and ``eval/`` results)."""
    config_path = eval_stage / CONFIGURATIONS
    if not config_path.is_file():
        raise DualviewError(f"{config_path}: missing; the eval stage has not run yet")
    configurations = json.loads(config_path.read_text())
    rows = collect_rows(
        eval_stage / "eval",
        configurations["models"],
        {k: Path(v) for k, v in configurations.get("loss_logs", {}).items()},
    )
    return write_report(rows, out_dir, title=title)


def find_eval_stage(run_dir: Path) -> Path:
    """The eval stage folder of a run, from the run's ``stages.json`` index."""
    index_path = run_dir / "stages.json"
    if not index_path.is_file():
        raise DualviewError(f"{run_dir}: not a dualview run folder (no stages.json)")
    index = json.loads(index_path.read_text())
    if "eval" not in index:
        raise DualviewError(f"{index_path}: the run has no eval stage")
    return run_dir / index["eval"]


def report_run(run_dir: str | Path, out_dir: str | Path | None = None) -> ReportFiles:
    """Tables and plots for a run folder, written to ``out_dir`` (default ``RUN_DIR/report``)."""
    run_dir = Path(run_dir)
    return report_from_eval_stage(
        find_eval_stage(run_dir), Path(out_dir or run_dir / "report"), title=run_dir.name
    )
