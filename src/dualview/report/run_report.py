"""Reports of experiment run folders (``dualview report RUN_DIR``)."""

from __future__ import annotations

from pathlib import Path

from dualview.errors import DataError, DualviewError
from dualview.io.files import read_json_file
from dualview.report import ReportFiles, ReportOptions, write_report
from dualview.report.collect import collect_rows
from dualview.report.table import ConfigResult, aggregate

CONFIGURATIONS = "configurations.json"


def manifest_path_text(path: Path, run_dir: Path) -> str:
    """How a run manifest stores ``path``: relative to the run folder when inside it (the
    run folder can be moved, and read from any folder), else absolute."""
    try:
        return str(Path(path).relative_to(run_dir))
    except ValueError:
        return str(Path(path).absolute())


def manifest_path(text: str, run_dir: Path) -> Path:
    """A path a run manifest stores, resolved against the run folder: a path relative to it
    (`manifest_path_text`), or one a run folder made before that stored (relative to the
    folder the run was started from, ``runs/demo/train-<key>/train_log.jsonl``, or
    absolute): the existing one of ``text`` itself when absolute, then ``run_dir`` joined
    with ``text`` and with each shorter tail of it. None existing: ``run_dir / text``."""
    path = Path(text)
    if path.is_absolute() and path.exists():
        return path
    parts = path.parts[1:] if path.is_absolute() else path.parts
    for start in range(len(parts)):
        candidate = run_dir.joinpath(*parts[start:])
        if candidate.exists():
            return candidate
    return path if path.is_absolute() else run_dir / path


def rows_of_eval_stage(eval_stage: Path) -> list[ConfigResult]:
    """Report rows of one eval stage folder (``configurations.json`` and ``eval/``)."""
    config_path = eval_stage / CONFIGURATIONS
    if not config_path.is_file():
        raise DualviewError(f"{config_path}: missing; the eval stage has not run yet")
    configurations = read_json_file(config_path)
    if not isinstance(configurations, dict) or not isinstance(configurations.get("models"), dict):
        raise DataError(config_path, None, "models", "expected an object with a 'models' object")
    loss_logs = configurations.get("loss_logs", {})
    if not isinstance(loss_logs, dict) or not all(isinstance(v, str) for v in loss_logs.values()):
        raise DataError(config_path, None, "loss_logs", "expected an object of path strings")
    run_dir = eval_stage.parent
    return collect_rows(
        eval_stage / "eval",
        configurations["models"],
        {label: manifest_path(text, run_dir) for label, text in loss_logs.items()},
    )


def report_from_eval_stage(
    eval_stage: Path, out_dir: Path, title: str, options: ReportOptions | None = None
) -> ReportFiles:
    """Report of one eval stage folder."""
    return write_report(rows_of_eval_stage(eval_stage), out_dir, title=title, options=options)


def find_eval_stage(run_dir: Path) -> Path:
    """The eval stage folder of a run, from the run's ``stages.json`` index."""
    index_path = run_dir / "stages.json"
    if not index_path.is_file():
        raise DualviewError(f"{run_dir}: not a dualview run folder (no stages.json)")
    index = read_json_file(index_path)
    if not isinstance(index, dict) or not isinstance(index.get("eval"), str):
        raise DualviewError(f"{index_path}: the run has no eval stage")
    return run_dir / index["eval"]


def report_runs(
    run_dirs: list[Path],
    out_dir: str | Path | None = None,
    options: ReportOptions | None = None,
) -> ReportFiles:
    """Tables and plots for one run folder (default output ``RUN_DIR/report``), or for
    several runs of the same experiment (seeds): mean ± standard deviation per metric;
    paired significance and error analysis per ``options`` (seeds pooled by query)."""
    if not run_dirs:
        raise DualviewError("report: give at least one run folder")
    runs = [rows_of_eval_stage(find_eval_stage(Path(d))) for d in run_dirs]
    if len(run_dirs) == 1:
        rows, title = runs[0], Path(run_dirs[0]).name
        default_out = Path(run_dirs[0]) / "report"
    else:
        rows, title = aggregate(runs), " + ".join(Path(d).name for d in run_dirs)
        if out_dir is None:
            raise DualviewError("report: several run folders need --out")
        default_out = Path(out_dir)
    return write_report(rows, Path(out_dir or default_out), title=title, options=options)
