"""``dualview run``, ``dualview demo`` and ``dualview report``."""

from __future__ import annotations

import csv
import time
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualview.cli import options
from dualview.errors import DualviewError
from dualview.pipeline.build import build_pipeline
from dualview.pipeline.experiment import load_experiment
from dualview.pipeline.runner import run_experiment
from dualview.pipeline.sweep import load_sweep, run_sweep
from dualview.report.table import BEST_SEPARATOR, parse_prefixes
from dualview.synth.estimate import Estimate, finish

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("demo")(demo)
    app.command("report")(report)


def run(
    experiment: Annotated[Path, typer.Argument(help="Experiment YAML.")],
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the plan and the LLM stages' estimated cost only."),
    ] = False,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override key.path=value.")
    ] = None,
    reuse_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--reuse-from",
            help="Another run folder: its finished stages with the same key are copied, "
            "not rerun (e.g. the LLM stages of a seed sweep's first run).",
        ),
    ] = None,
    allow_config_change: Annotated[
        bool,
        typer.Option(
            "--allow-config-change",
            help="Resume a training stage whose checkpoint holds a different training config "
            "(e.g. new defaults of a newer dualview); the differences go to its log.",
        ),
    ] = False,
    agent: Annotated[
        bool,
        typer.Option(
            "--agent",
            help="Sweeps: one of several processes working through the sweep; skip the arm "
            "runs another process holds. Writes no report (run `dualview report SWEEP_DIR` "
            "when every agent is done).",
        ),
    ] = False,
    price: options.PricePerMtok = None,
    tokens_per_s: options.ServerTokensPerS = None,
) -> None:
    """Run an experiment: every stage cached by its inputs, resumable after a kill. With a
    `sweep:` block, every arm and seed of the grid, then one report of the whole sweep."""
    build = partial(build_pipeline, allow_config_change=allow_config_change)
    sweep = load_sweep(experiment, overrides)
    if sweep is not None:
        if reuse_from:
            raise DualviewError("--reuse-from: not with a sweep (its arms reuse each other)")
        run_sweep(sweep, console, dry_run=dry_run, build=build, agent=agent)
        if agent and not dry_run:
            console.print(f"agent done; when every agent is: dualview report {sweep.sweep_dir}")
        elif not dry_run:
            from dualview.report.sweep_report import report_sweep

            _print_files(report_sweep(sweep.sweep_dir))
        return
    if agent:
        raise DualviewError(f"--agent: {experiment} has no sweep: block")
    exp = load_experiment(experiment, overrides)

    def show_costs(estimates: list[Estimate]) -> None:
        for estimate in estimates:
            typer.echo("\n".join(finish(estimate, price, tokens_per_s).lines()))

    outputs = run_experiment(
        exp, console, dry_run=dry_run, reuse_from=reuse_from, build=build, costs=show_costs
    )
    if not dry_run and "report" in outputs:
        _show_report(outputs["report"])


def demo(
    fast: Annotated[bool, typer.Option("--fast", help="A smaller, quicker version.")] = False,
    run_dir: Annotated[
        Path | None, typer.Option(help="Where the run lives (default runs/demo[-fast]).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan only.")] = False,
) -> None:
    """The whole pipeline on bundled data with embedded models (MiniLM, local 0.5B LLM)."""
    from dualview.demo import demo_experiment

    exp = demo_experiment(fast=fast, run_dir=run_dir)
    started = time.time()
    outputs = run_experiment(exp, console, dry_run=dry_run)
    if not dry_run:
        _show_report(outputs["report"])
        console.print(f"demo finished in {time.time() - started:.0f} s")


def report(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Run folder(s) of `dualview run`; several = seeds; or one sweep folder; "
            "or `dualview eval` / mteb result folders, each model an arm (needs --out)."
        ),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output folder (default RUN_DIR/report).")
    ] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare",
            help="ARM:CONTROL pair for the significance table (repeatable; default: every "
            "arm vs Ins-orig and vs base, or vs the first arm of result folders; 'none' for "
            "no table).",
        ),
    ] = None,
    flips: Annotated[
        list[str] | None,
        typer.Option(
            "--flips",
            help="ARM_A:ARM_B pair for the flipped-query error analysis (repeatable; "
            "default: every arm vs Ins-orig, or vs the first arm of result folders; 'none' "
            "for none).",
        ),
    ] = None,
    resamples: Annotated[
        int, typer.Option(min=100, help="Randomization and bootstrap resamples.")
    ] = 10_000,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            help="Comma-separated metric name prefixes to keep in the tables, comparisons "
            "and figures (e.g. 'paired p-MRR,phenomena'; default: every metric).",
        ),
    ] = None,
    review: Annotated[
        list[Path] | None,
        typer.Option(
            "--review",
            help="Verdict file of `dualview review` to summarize (repeatable; default: "
            "RUN_DIR/review.jsonl when present).",
        ),
    ] = None,
    seeds: Annotated[
        bool,
        typer.Option(
            "--seeds",
            help="The folders are seeds of the same arms (e.g. one `dualview eval` folder "
            "per seed, models named alike): mean ± sd, per-query values pooled.",
        ),
    ] = False,
    join: Annotated[
        list[Path] | None,
        typer.Option(
            "--join",
            help="A run folder whose arms join those of the run folder at the same position "
            "(repeatable, one per run folder, in order: the same seeds of a second experiment "
            "on the same evaluation sets); arms whose names are already there (base) are left "
            "out.",
        ),
    ] = None,
) -> None:
    """Paper-layout tables (Markdown, CSV) and plots (PNG) of a run, or mean ± sd of several,
    with paired significance (bootstrap CI, randomization p, Holm) and error analysis."""
    from dualview.report import ReportOptions
    from dualview.report.run_report import report_runs
    from dualview.report.sweep_report import report_sweep
    from dualview.review.stats import report_sections
    from dualview.run_folder import is_sweep_dir

    options = ReportOptions(
        comparisons=_pairs_option(compare),
        error_pairs=_pairs_option(flips),
        n_resamples=resamples,
        sections=report_sections(review, run_dirs),
        metrics=parse_prefixes(metrics),
        read=list(review or []),
    )
    if len(run_dirs) == 1 and is_sweep_dir(run_dirs[0]) and not join:
        files = report_sweep(run_dirs[0], out, options)
    else:
        files = report_runs(run_dirs, out, options, seeds=seeds, join=join)
    _print_files(files)


def _pairs_option(values: list[str] | None) -> list[tuple[str, str]] | None:
    """``--compare``/``--flips`` values: None = default pairs, ``none`` = no pairs."""
    from dualview.report.compare import parse_pair

    if not values:
        return None
    if [v.lower() for v in values] == ["none"]:
        return []
    return [parse_pair(v) for v in values]


def _print_table(csv_path: Path) -> None:
    """The report's CSV as a terminal table, best value per column in bold. Every cell is
    printed as written (escaped): a sweep's row ``Ins-orig [max_steps=40]`` is not markup."""
    with csv_path.open(newline="") as handle:
        header, *rows = list(csv.reader(handle))
    best = dict(zip(header, rows.pop(), strict=True)) if rows and rows[-1][0] == "best" else {}
    table = Table(title=escape(csv_path.parent.name))
    for column in header:
        first = column == header[0]
        justify = "left" if first else "right"
        # a row name is never cut: two rows cut to one prefix would read the same
        table.add_column(escape(column), justify=justify, overflow="fold" if first else "ellipsis")
    for row in rows:
        cells = [
            f"[bold]{escape(value)}[/]"
            if row[0] in best.get(column, "").split(BEST_SEPARATOR)
            else escape(value)
            for column, value in zip(header, row, strict=True)
        ]
        table.add_row(*cells)
    Console().print(table)


def _show_report(report_dir: Path) -> None:
    if (report_dir / "report.csv").is_file():
        _print_table(report_dir / "report.csv")
        console.print(f"report: {report_dir / 'report.md'}", markup=False)
        for png in sorted(report_dir.glob("*.png")):
            console.print(f"plot:   {png}", markup=False)


def _print_files(files) -> None:
    _show_report(files.markdown.parent)
