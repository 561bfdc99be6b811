"""``dualview data gold-build`` and ``dualview data gold-check``: the hand-written gold set."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualview.cli.data import data_app
from dualview.data import gold

console = Console(stderr=True)

SourceDir = Annotated[
    Path, typer.Option("--source", help="Folder of authoring files <domain>.jsonl.")
]


def register(app: typer.Typer) -> None:
    """Add the gold commands to the ``data`` command group (registered by ``cli.data``)."""
    data_app.command("gold-build")(gold_build)


def gold_build(
    source: SourceDir = gold.SOURCE_DIR,
    out: Annotated[
        Path, typer.Option(help="Folder for train/test/counts/CARD.md.")
    ] = gold.GOLD_DIR,
    n_hard: Annotated[int, typer.Option(help="Hard negatives per record (>= 2).")] = (
        gold.DEFAULT_N_HARD
    ),
    test_fraction: Annotated[float, typer.Option(help="Test share per domain.")] = (
        gold.DEFAULT_TEST_FRACTION
    ),
) -> None:
    """Validate the gold sources and write train.jsonl, test.jsonl, counts.json, CARD.md counts."""
    result = gold.build(source, out, n_hard=n_hard, test_fraction=test_fraction)
    for split, info in result.counts["splits"].items():
        console.print(f"{split}: {info['instances']} instances, {info['records']} records")
    for name, path in result.paths.items():
        console.print(f"wrote {name}: {path}")
