"""``dualview bench-synth``: reversal and judge quality of an LLM backend on the gold set."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualview.cli import options
from dualview.config import apply_overrides, flag_overrides, load_config, validate_config
from dualview.errors import ConfigError
from dualview.io.paths import check_outputs
from dualview.synth.bench import BenchConfig, SynthBench

console = Console(stderr=True)


def _shots(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--shots {text!r}: expected numbers separated by commas") from None


def bench_synth(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for results, caches and inputs.")
    ],
    config: Annotated[Path | None, typer.Option("--config", help="Benchmark YAML.")] = None,
    backend: options.LlmBackend = None,
    model: options.Model = None,
    base_url: options.BaseUrl = None,
    api_key_env: options.ApiKeyEnv = None,
    judge_backend: Annotated[
        str | None, typer.Option(help="Judge backend kind (default: the synthesis backend).")
    ] = None,
    judge_model: Annotated[str | None, typer.Option(help="Judge model.")] = None,
    judge_base_url: Annotated[str | None, typer.Option(help="Judge base URL.")] = None,
    judge_api_key_env: Annotated[
        str | None, typer.Option(help="NAME of the env variable with the judge's API key.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Gold instances (round-robin).")] = None,
    shots: Annotated[str | None, typer.Option(help="Few-shot settings, e.g. 0,1,3.")] = None,
    split: Annotated[str | None, typer.Option(help="Gold split: train | test.")] = None,
    gold_dir: Annotated[
        Path | None, typer.Option(help="Built gold splits (default: the packaged set).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the few-shot choice.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Reversal answer tokens.")] = None,
    judge_max_tokens: Annotated[int | None, typer.Option(help="Judge answer tokens.")] = None,
    distractors: Annotated[int | None, typer.Option(help="Judge distractor passages.")] = None,
    no_judge: Annotated[
        bool,
        typer.Option(
            "--no-judge",
            help="Writer only: no judge check or verdicts (the report says 'not judged').",
        ),
    ] = False,
    concurrency: options.Concurrency = None,
    engine: options.Engine = None,
    ray_address: options.RayAddress = None,
    overrides: options.Overrides = None,
) -> None:
    """Reverse gold instances zero-/few-shot, judge the reversals, and check the judge against
    the gold labels (--no-judge: only reverse); writes OUT/bench.json and OUT/bench.md (rerun
    to resume)."""
    flags = {
        "backend.kind": backend,
        "backend.model": model,
        "backend.base_url": base_url or None,
        "backend.api_key_env": api_key_env,
        "limit": limit,
        "shots": _shots(shots) if shots is not None else None,
        "split": split,
        "gold_dir": str(gold_dir) if gold_dir else None,
        "seed": seed,
        "sampling.max_tokens": max_tokens,
        "judge_sampling.max_tokens": judge_max_tokens,
        "verify.distractors": distractors,
        "judge": False if no_judge else None,
        "runner.concurrency": concurrency,
        "runner.engine": engine,
        "runner.ray_address": ray_address,
    }
    judge = {
        "kind": judge_backend,
        "model": judge_model,
        "base_url": judge_base_url,
        "api_key_env": judge_api_key_env,
    }
    if any(v is not None for v in judge.values()):
        flags.update({f"judge_backend.{k}": v for k, v in judge.items()})
    items = flag_overrides(flags)
    items += list(overrides or [])
    settings = (
        load_config(BenchConfig, config, items)
        if config is not None
        else validate_config(BenchConfig, apply_overrides({}, items), "command line")
    )
    check_outputs([out], [config, settings.gold_dir], replaced=False)
    report = SynthBench(settings, out).run()
    typer.echo((out / "bench.md").read_text(encoding="utf-8"))
    if not all(m["complete"] for m in report["shots"].values()):
        console.print("[yellow]some units failed with backend errors: rerun to retry them")


def register(app: typer.Typer) -> None:
    app.command(name="bench-synth")(bench_synth)
