"""Run an experiment with a readable plan and live status (used by ``run`` and ``demo``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dualview.lock import folder_lock
from dualview.pipeline.build import build_pipeline
from dualview.pipeline.estimate import estimate_experiment
from dualview.pipeline.experiment import Experiment
from dualview.pipeline.stages import Pipeline, PlannedStage, read_done
from dualview.synth.estimate import Estimate

STATUS_STYLE = {
    "cached": "green",
    "partial": "yellow",
    "pending": "cyan",
    "reusable": "green",
    "done": "green",
}
NOTE = {"cached": "skip", "partial": "resume", "reusable": "copy", "pending": "run"}


def plan_table(pipeline: Pipeline) -> Table:
    table = Table(title=f"plan for {pipeline.run_dir}")
    table.add_column("stage")
    table.add_column("status")
    table.add_column("folder")
    table.add_column("what it does")
    for item in pipeline.plan():
        status = item.status
        note = NOTE[status]
        table.add_row(
            item.stage.name,
            f"[{STATUS_STYLE[status]}]{status}[/] ({note})",
            item.out_dir.name,
            item.stage.description,
        )
    return table


def run_experiment(
    exp: Experiment,
    console: Console | None = None,
    dry_run: bool = False,
    reuse_from: list[Path] | None = None,
    build: Callable[[Experiment, list[Path] | None], Pipeline] = build_pipeline,
    costs: Callable[[list[Estimate]], None] | None = None,
) -> dict[str, Path]:
    """Print the plan, then (unless ``dry_run``) run every stage that is not cached.

    ``reuse_from``: other run folders whose finished stages with the same key are copied
    instead of rerun (e.g. the synthesis of a seed sweep's first run). ``build``: what turns
    the experiment into stages (tests pass a stand-in). ``costs``: on a dry run, receives
    the estimate of every LLM stage (`dualview.pipeline.estimate`).
    """
    console = console or Console(stderr=True)
    pipeline = build(exp, reuse_from)
    console.print(plan_table(pipeline))
    if dry_run:
        if costs is not None:
            costs(estimate_experiment(exp, pipeline.stages))
        return {p.stage.name: p.out_dir for p in pipeline.plan()}

    def on_stage(item: PlannedStage, status: str) -> None:
        if status == "done":
            seconds = read_done(item.out_dir).get("seconds")
            console.print(f"[green]✓[/] {item.stage.name} finished in {seconds} s")
        elif status == "cached":
            console.print(f"[green]✓[/] {item.stage.name} cached ({item.out_dir.name})")
        elif status == "reused":
            console.print(f"[green]✓[/] {item.stage.name} copied from {item.reusable}")
        else:
            word = "resuming" if status == "partial" else "running"
            console.rule(f"{word} {item.stage.name}: {item.stage.description}")

    with folder_lock(pipeline.run_dir):  # one writer per run folder
        return pipeline.run(on_stage)
