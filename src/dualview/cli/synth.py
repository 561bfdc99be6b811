"""``dualview seed | reverse | poison | verify IN -o OUT`` and ``dualview synth-merge``.

Each command is named after its LLM task, one per task registered in `dualview.synth.jobs.TASKS`
(a plugin's task too); ``synth`` is the old name of ``reverse`` (`dualview.cli.vocabulary`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualview.cli import options
from dualview.config import flag_overrides
from dualview.errors import ConfigError, warn_once
from dualview.io.paths import check_outputs
from dualview.synth.estimate import finish
from dualview.synth.job_stats import JobStats
from dualview.synth.jobs import TASKS, estimate_job, load_job, run_job
from dualview.synth.merge import merge_shards
from dualview.synth.runner import result_files

console = Console(stderr=True)


def _command(task_name: str):
    def run(
        source: Annotated[Path, typer.Argument(help="Input records (or BEIR folder with --from).")],
        out: Annotated[
            Path,
            typer.Option(
                "--out",
                "-o",
                help="Output JSONL (also OUT.dropped.jsonl, OUT.stats.json, OUT.cache.jsonl).",
            ),
        ],
        config: Annotated[Path | None, typer.Option("--config", help="Job YAML.")] = None,
        limit: options.Limit = None,
        backend: options.LlmBackend = None,
        model: options.Model = None,
        base_url: options.BaseUrl = None,
        api_key_env: options.ApiKeyEnv = None,
        concurrency: options.Concurrency = None,
        rpm: Annotated[float | None, typer.Option(help="Requests per minute limit.")] = None,
        tpm: Annotated[float | None, typer.Option(help="Tokens per minute limit.")] = None,
        shard: Annotated[str | None, typer.Option(help="i/n: run one of n input blocks.")] = None,
        cache: options.LlmCache = None,
        from_format: Annotated[str, typer.Option("--from", help="Input format.")] = "dualview",
        engine: options.Engine = None,
        ray_address: options.RayAddress = None,
        overrides: options.Overrides = None,
        estimate: options.Estimate = False,
        price: options.PricePerMtok = None,
        tokens_per_s: options.ServerTokensPerS = None,
    ) -> None:
        flags = {
            "backend.kind": backend,
            "backend.model": model,
            "backend.base_url": base_url or None,
            "backend.api_key_env": api_key_env,
            "runner.concurrency": concurrency,
            "runner.requests_per_minute": rpm,
            "runner.tokens_per_minute": tpm,
            "runner.shard": shard,
            "runner.cache": str(cache) if cache else None,
            "runner.engine": engine,
            "runner.ray_address": ray_address,
        }
        items = flag_overrides(flags)
        job = load_job(task_name, config, items + list(overrides or []))
        if estimate:
            cost = estimate_job(task_name, job, source, from_format, limit=limit)
            figures = finish(cost, price, tokens_per_s)
            typer.echo("\n".join(figures.lines()))
            return
        stats = run_job(task_name, job, source, out, from_format, read=[config], limit=limit)
        _report(stats, out)

    run.__doc__ = _help(task_name)
    return run


def _help(task_name: str) -> str:
    """The task's line for ``--help``; a plugin's task that cannot be loaded still gets its
    command (running it prints why it cannot load)."""
    try:
        return TASKS.get(task_name).help
    except ConfigError:
        return f"The synthesis task {task_name} (a plugin's; it cannot be loaded now)."


def _report(stats: JobStats, out: Path) -> None:
    outcomes = " ".join(f"{k}={v}" for k, v in stats.outcomes.items())
    console.print(f"{stats.records_out} record(s) -> {out}  ({outcomes})", markup=False)
    if stats.summary:
        console.print(json.dumps(stats.summary), markup=False)
    if not stats.complete:
        console.print("[yellow]some units failed with backend errors: rerun to retry them")


def merge(
    shards: Annotated[list[Path], typer.Argument(help="The OUT file of every shard run.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Merged output JSONL.")],
) -> None:
    """Check that every shard is complete and consistent, then concatenate in input order."""
    check_outputs(result_files(out), [f for shard in shards for f in result_files(shard)])
    stats = merge_shards(out, list(shards))
    console.print(f"merged {stats.shards} shard(s): {stats.records_out} record(s) -> {out}")


def register(app: typer.Typer) -> None:
    """``synth-merge``, then one command per registered task (command name = task name),
    except a task whose name a command registered before is taken by (one warning)."""
    app.command(name="synth", help=_help("reverse"), hidden=True)(_command("reverse"))  # old name
    app.command(name="synth-merge")(merge)
    taken = {info.name for info in [*app.registered_commands, *app.registered_groups]}
    for task_name in TASKS.names():
        if task_name in taken:
            warn_once(f"warning: synthesis task {task_name!r} has no command: the name is taken")
            continue
        app.command(name=task_name, help=_help(task_name))(_command(task_name))
