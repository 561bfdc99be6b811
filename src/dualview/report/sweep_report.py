"""One report over a whole sweep (``dualview report SWEEP_DIR``).

A sweep folder (`dualview.pipeline.sweep`) holds one run folder per arm and seed and a
manifest, ``sweep.json`` (`dualview.run_folder.SweepManifest`), naming them. The report:

- rows ``<configuration> [<arm>]`` (each trained mix of each arm; the untrained ``base`` rows
  once, from the first arm that has results), mean ± sd over the arm's seeds;
- paired significance of every row against its control (`control_pairs`), a query's values
  averaged over seeds first, Holm-corrected over all the comparisons of a metric in the
  sweep;
- the error analysis of the same pairs, and the plots of `dualview.report.write_report`;
- with the sweep's ``select`` column (a validation set's, `dualview.eval.selection`): for
  each configuration the arm with the highest mean value of that column (the first in grid
  order on a tie), the chosen rows compared with the chosen control; every other column is
  reported, never selected on. Without it the report says that nothing was chosen.

Runs without results yet (a sweep still running, or killed) are left out and listed.
"""

from __future__ import annotations

from pathlib import Path

from dualview.errors import DualviewError
from dualview.report import ReportFiles, ReportOptions, write_report
from dualview.report.compare import is_base
from dualview.report.run_report import find_eval_stage, rows_of_eval_stage
from dualview.report.table import ConfigResult, aggregate
from dualview.run_folder import SweepArm, SweepManifest, read_sweep_manifest

DEFAULT_CONTROL = "Ins-orig"


def row_name(configuration: str, arm: str) -> str:
    """``Ins-DV-gold [max_steps=40,view_policy=separate]``; a bare name for an unnamed arm."""
    return f"{configuration} [{arm}]" if arm else configuration


def _arm_runs(sweep_dir: Path, arm: SweepArm) -> tuple[list[list[ConfigResult]], list[str]]:
    """Rows of each finished run of ``arm``, and the runs that have no results yet."""
    runs, missing = [], []
    for seed, folder in arm.runs.items():
        run_dir = sweep_dir / folder
        try:
            runs.append(rows_of_eval_stage(find_eval_stage(run_dir)))
        except DualviewError:
            where = "" if seed == "-" else f" seed {seed}"
            missing.append(f"{arm.label or 'default'}{where}")
    return runs, missing


def sweep_rows(
    sweep_dir: str | Path, manifest: SweepManifest
) -> tuple[list[ConfigResult], list[str]]:
    """Rows of the sweep (seeds aggregated per arm) and the runs left out (no results)."""
    folder = Path(sweep_dir)
    rows: list[ConfigResult] = []
    missing: list[str] = []
    base_done = False
    for arm in manifest.arms:
        runs, gaps = _arm_runs(folder, arm)
        missing += gaps
        if not runs:
            continue
        for row in aggregate(runs):
            if is_base(row.name):
                if base_done:
                    continue
            else:
                row.name = row_name(row.name, arm.label)
            rows.append(row)
        base_done = True
    if not rows:
        raise DualviewError(f"{folder}: no run of the sweep has evaluation results yet")
    bases = [r for r in rows if is_base(r.name)]
    return bases + [r for r in rows if not is_base(r.name)], missing


def control_pairs(manifest: SweepManifest, names: list[str]) -> list[tuple[str, str]]:
    """``(row, control row)`` pairs for the sweep's ``control``:

    - a row name (``Ins-orig [max_steps=40]``): every other trained row against it;
    - an arm label (``max_steps=40``): each row against the same configuration in that arm;
    - a configuration name (``Ins-orig``, the default): each row against that configuration
      in its own arm.

    A control that names none of these is an error; one that leaves nothing to compare (a
    sweep of a single configuration) gives no pairs.
    """
    control = manifest.control or DEFAULT_CONTROL
    trained = [n for n in names if not is_base(n)]
    if control in trained:
        return [(n, control) for n in trained if n != control]
    labels = [a.label for a in manifest.arms]
    by_arm = control in labels  # the same configuration in the control arm
    configurations: set[str] = set()
    pairs = []
    for arm in manifest.arms:
        for name in trained:
            prefix = _configuration(name, arm.label)
            if prefix is None:
                continue
            configurations.add(prefix)
            other = row_name(prefix, control) if by_arm else row_name(control, arm.label)
            if other != name and other in names:
                pairs.append((name, other))
    if not by_arm and control not in configurations and manifest.control is not None:
        raise DualviewError(
            f"sweep control {control!r} matches no row, arm or configuration with results "
            f"(rows: {', '.join(names)})"
        )
    return pairs


def _configuration(name: str, label: str) -> str | None:
    """The configuration part of a row name of arm ``label``, or None if another arm's."""
    if not label:
        return name if "[" not in name else None
    suffix = f" [{label}]"
    return name[: -len(suffix)] if name.endswith(suffix) else None


def selected_rows(manifest: SweepManifest, rows: list[ConfigResult]) -> dict[str, ConfigResult]:
    """Configuration -> its row with the highest ``manifest.select`` value (module
    docstring); empty when the sweep selects nothing."""
    metric = manifest.select
    if metric is None:
        return {}
    best: dict[str, ConfigResult] = {}
    for arm in manifest.arms:
        for row in rows:
            configuration = None if is_base(row.name) else _configuration(row.name, arm.label)
            if configuration is None or metric not in row.metrics:
                continue
            if (
                configuration not in best
                or row.metrics[metric] > best[configuration].metrics[metric]
            ):
                best[configuration] = row
    if not best:
        raise DualviewError(f"sweep select {metric!r}: no trained row has this column")
    return best


def selected_pairs(
    manifest: SweepManifest, chosen: dict[str, ConfigResult]
) -> list[tuple[str, str]]:
    """Each chosen row against the chosen row of the control configuration."""
    control = chosen.get(manifest.control or DEFAULT_CONTROL)
    if control is None:
        return []
    return [(row.name, control.name) for row in chosen.values() if row is not control]


def _selection_section(manifest: SweepManifest, chosen: dict[str, ConfigResult]) -> tuple[str, str]:
    if not chosen:
        text = (
            "Nothing in this report was chosen on a validation split (the sweep has no "
            "`select:` column): a bold value is the column's highest, not a choice, and a "
            "setting picked from these tables is picked on the sets they report."
        )
        return "Selection", text
    metric = manifest.select
    lines = [
        f"Each configuration's arm is chosen on `{metric}` only (mean over seeds; the "
        "highest wins, the first in grid order on a tie). Every other column, the gold test "
        "split and the phenomenon set included, is reported, never selected on; the chosen "
        "rows are compared with the chosen control in the significance table.",
        "",
        f"| configuration | chosen row | {metric} |",
        "|---|---|---:|",
        *(f"| {name} | {row.name} | {row.metrics[metric]:.2f} |" for name, row in chosen.items()),
    ]
    return "Selection", "\n".join(lines)


def _setup_section(manifest: SweepManifest, missing: list[str]) -> tuple[str, str]:
    lines = [
        f"Grid ({manifest.method}) over {len(manifest.arms)} arm(s) x "
        f"{len(manifest.seeds) or 1} seed(s) {manifest.seeds or ''}; control: "
        f"`{manifest.control or DEFAULT_CONTROL}`.",
        "",
        "| parameter | values |",
        "|---|---|",
        *(f"| `{k}` | {', '.join(map(str, v))} |" for k, v in manifest.parameters.items()),
    ]
    if missing:
        lines += ["", "Left out (no evaluation results yet): " + "; ".join(missing) + "."]
    return "Sweep", "\n".join(lines)


def report_sweep(
    sweep_dir: str | Path,
    out_dir: str | Path | None = None,
    options: ReportOptions | None = None,
) -> ReportFiles:
    """The whole sweep's report (default output ``SWEEP_DIR/report``)."""
    folder = Path(sweep_dir)
    manifest = read_sweep_manifest(folder)
    rows, missing = sweep_rows(folder, manifest)
    options = options or ReportOptions()
    chosen = selected_rows(manifest, rows)
    pairs = options.comparisons
    if pairs is None:
        pairs = control_pairs(manifest, [r.name for r in rows])
        pairs += [p for p in selected_pairs(manifest, chosen) if p not in pairs]
    resolved = ReportOptions(
        comparisons=pairs,
        error_pairs=pairs if options.error_pairs is None else options.error_pairs,
        n_resamples=options.n_resamples,
        seed=options.seed,
        flip_limit=options.flip_limit,
        sections=[
            _setup_section(manifest, missing),
            _selection_section(manifest, chosen),
            *options.sections,
        ],
        metrics=options.metrics,
    )
    out = Path(out_dir) if out_dir is not None else folder / "report"
    return write_report(rows, out, title=f"sweep {manifest.name}", options=resolved)
