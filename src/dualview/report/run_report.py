"""Reports of experiment run folders (``dualview report RUN_DIR``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from dualview.errors import DataError, DualviewError
from dualview.io.files import read_json_file
from dualview.report import ReportFiles, ReportOptions, write_report
from dualview.report.collect import collect_rows, eval_folder_rows, is_eval_folder
from dualview.report.mteb_results import mteb_model_folders, mteb_rows
from dualview.report.table import ConfigResult, aggregate
from dualview.run_folder import (
    CONFIGURATIONS_FILE,
    STAGES_FILE,
    is_run_dir,
    manifest_path,
    read_stage_index,
)


def rows_of_eval_stage(eval_stage: Path) -> list[ConfigResult]:
    """Report rows of one eval stage folder (``configurations.json`` and ``eval/``)."""
    config_path = eval_stage / CONFIGURATIONS_FILE
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
    """The eval stage folder of a run, from the run's stage index."""
    index = read_stage_index(run_dir)
    if "eval" not in index:
        raise DualviewError(f"{run_dir / STAGES_FILE}: the run has no eval stage")
    return run_dir / index["eval"]


def joined_rows(rows: list[ConfigResult], extra: list[ConfigResult]) -> list[ConfigResult]:
    """``rows`` and the rows of ``extra`` whose names ``rows`` lacks (e.g. a second run's
    trained arm; its ``base`` row, the same untrained model, is left out)."""
    names = {row.name for row in rows}
    return rows + [row for row in extra if row.name not in names]


def report_runs(
    run_dirs: list[Path],
    out_dir: str | Path | None = None,
    options: ReportOptions | None = None,
    seeds: bool = False,
    join: list[Path] | None = None,
) -> ReportFiles:
    """Tables and plots for one run folder (default output ``RUN_DIR/report``), or for
    several runs of the same experiment (seeds): mean ± standard deviation per metric;
    paired significance and error analysis per ``options`` (seeds pooled by query). Given
    any folder that is not a run folder (a `dualview eval` or mteb result folder), each
    folder's rows are arms of one report instead (`report_arms`), unless ``seeds`` says
    the folders are seeds of the same arms (`report_seed_folders`).

    ``join``: one run folder per run folder, in the same order (the same seed of a second
    experiment on the same evaluation sets): its arms join that run's (`joined_rows`), so
    that arms of two experiments are compared query by query, seeds pooled."""
    if not run_dirs:
        raise DualviewError("report: give at least one run folder")
    if join and (seeds or len(join) != len(run_dirs) or not all(map(is_run_dir, run_dirs + join))):
        raise DualviewError(
            f"report --join: give one run folder per run folder ({len(run_dirs)}), in the same "
            f"order, without --seeds; got {len(join)}, and every folder must be a run folder"
        )
    if join and out_dir is None:
        raise DualviewError("report --join: give --out (the report is of two experiments)")
    if seeds:
        return report_seed_folders([Path(d) for d in run_dirs], out_dir, options)
    if not all(is_run_dir(d) for d in run_dirs):
        return report_arms([Path(d) for d in run_dirs], out_dir, options)
    runs = [rows_of_eval_stage(find_eval_stage(Path(d))) for d in run_dirs]
    for i, other in enumerate(join or []):
        runs[i] = joined_rows(runs[i], rows_of_eval_stage(find_eval_stage(Path(other))))
    if len(run_dirs) == 1:
        rows, title = runs[0], Path(run_dirs[0]).name
        default_out = Path(run_dirs[0]) / "report"
    else:
        rows, title = aggregate(runs), " + ".join(folder_labels([Path(d) for d in run_dirs]))
        if out_dir is None:
            raise DualviewError("report: several run folders need --out")
        default_out = Path(out_dir)
    if join:
        title += " with " + " + ".join(folder_labels([Path(d) for d in join]))
    return write_report(rows, Path(out_dir or default_out), title=title, options=options)


def report_seed_folders(
    folders: list[Path], out_dir: str | Path | None, options: ReportOptions | None = None
) -> ReportFiles:
    """One report of several folders (run, eval or mteb result folders) that are seeds of
    the same arms: each row is the mean ± sd over the folders of the rows of that name,
    per-query values pooled (as several run folders are). Every folder must hold the same
    row names (e.g. ``dualview eval`` of each seed's models under one set of names)."""
    if len(folders) < 2:
        raise DualviewError("report --seeds: give at least two folders (one per seed)")
    if out_dir is None:
        raise DualviewError("report --seeds: several folders need --out")
    runs = [folder_rows(folder) for folder in folders]
    names = Counter(row.name for row in runs[0])
    for folder, rows in zip(folders[1:], runs[1:], strict=True):
        other = Counter(row.name for row in rows)
        if other != names:
            odd = sorted((names - other) + (other - names))
            raise DualviewError(
                f"{folder}: report --seeds: its arms differ from {folders[0]}'s ({odd[0]!r} "
                "is not in both, or not as often); seeds must name their arms alike"
            )
    title = " + ".join(folder_labels(folders))
    return write_report(aggregate(runs), Path(out_dir), title=title, options=options)


def folder_rows(folder: Path) -> list[ConfigResult]:
    """The rows one report argument gives: a run folder's configurations, a `dualview eval`
    result folder's models, or an mteb result folder's models; else one located error."""
    if is_run_dir(folder):
        return rows_of_eval_stage(find_eval_stage(folder))
    if not folder.is_dir():
        raise DualviewError(f"{folder}: no such folder")
    if is_eval_folder(folder):
        return eval_folder_rows(folder)
    if mteb_model_folders(folder):
        return mteb_rows(folder)
    raise DualviewError(
        f"{folder}: not a dualview run folder ({STAGES_FILE}), eval result folder (summary.json, "
        "or a model's <benchmark>.json results) or mteb result folder (model_meta.json)"
    )


def folder_labels(folders: list[Path]) -> list[str]:
    """Each folder as the fewest trailing path parts that tell it from the others, for a
    report's title: ``s1/val`` and ``s2/val``, not ``val`` twice (the whole path when two are
    the same folder)."""
    parts = [folder.absolute().parts for folder in folders]
    labels = [str(folder) for folder in folders]
    for k in range(1, max(map(len, parts), default=0) + 1):
        labels = [str(Path(*p[-k:])) for p in parts]
        if len(set(labels)) == len(labels):
            break
    return labels


def distinct_names(rows_by_folder: list[tuple[Path, list[ConfigResult]]]) -> list[ConfigResult]:
    """The rows of every folder, a name that several rows share followed by its folder
    (``embedded:minilm (eval-a)``), and by a number if that is still shared."""
    counts = Counter(row.name for _, rows in rows_by_folder for row in rows)
    out: list[ConfigResult] = []
    for folder, rows in rows_by_folder:
        for row in rows:
            name = row.name if counts[row.name] == 1 else f"{row.name} ({folder})"
            taken = {r.name for r in out}
            unique = name
            for k in range(2, len(taken) + 2):
                if unique not in taken:
                    break
                unique = f"{name} #{k}"
            out.append(replace(row, name=unique))
    return out


def against_first(names: list[str]) -> list[tuple[str, str]]:
    """Every arm against the first (the control of a model-vs-model report)."""
    return [(name, names[0]) for name in names[1:]]


def report_arms(
    folders: list[Path], out_dir: str | Path | None, options: ReportOptions | None = None
) -> ReportFiles:
    """One report whose arms are the rows of each folder (`folder_rows`): eval and mteb
    result folders, with run folders among them. Unless ``options`` say otherwise, every
    arm is compared with the first (significance and flipped queries)."""
    rows_by_folder = [(folder, folder_rows(folder)) for folder in folders]
    if out_dir is None:
        raise DualviewError("report: eval and mteb result folders need --out")
    rows = distinct_names(rows_by_folder)
    options = options or ReportOptions()
    pairs = against_first([row.name for row in rows])
    options = replace(
        options,
        comparisons=pairs if options.comparisons is None else options.comparisons,
        error_pairs=pairs if options.error_pairs is None else options.error_pairs,
    )
    title = " vs ".join(folder_labels(folders))
    return write_report(rows, Path(out_dir), title=title, options=options)
