"""``dualview train CONFIG.yaml``: train a bi-encoder (thin wrapper over dualview.train)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualview.config import load_config
from dualview.train.config import TrainConfig

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)


def train_cmd(
    config: Annotated[Path, typer.Argument(help="Training config (YAML, TrainConfig).")],
    sets: Annotated[
        list[str] | None, typer.Option("--set", help="Override a config key: a.b=value (repeat).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the latest checkpoint in output_dir.")
    ] = False,
    allow_config_change: Annotated[
        bool,
        typer.Option(
            "--allow-config-change",
            help="With --resume: carry on although the config differs from the checkpoint's "
            "(the differences are recorded in train_log.jsonl and config_changes.json).",
        ),
    ] = False,
    overwrite_output_dir: Annotated[
        bool,
        typer.Option(
            "--overwrite-output-dir",
            help="Start afresh in an output_dir that holds an earlier run: delete its "
            "checkpoints, train_log.jsonl, model and config_changes.json first (without it "
            "such a folder is refused).",
        ),
    ] = False,
) -> None:
    """Train as configured; checkpoints and OUTPUT_DIR/model (sentence-transformers folder)."""
    from dualview.hub.model_card import write_model_card  # heavy imports only when training
    from dualview.train.trainer import train

    train_config = load_config(TrainConfig, config, sets or [])
    result = train(
        train_config,
        resume=resume,
        allow_config_change=allow_config_change,
        overwrite=overwrite_output_dir,
    )
    if result.interrupted:
        console.print(f"stopped at step {result.steps}: checkpoint saved, continue with --resume")
        raise typer.Exit(code=143)
    if result.model_dir is None:  # not the main process
        return
    write_model_card(result.model_dir)  # replaces sentence-transformers' generic README.md
    console.print(
        f"trained {result.steps} step(s); loss {result.first_loss} -> {result.last_loss}; "
        f"model: {result.model_dir}"
    )
