"""``dualview init DIR``: a ready experiment folder (configs and data) for a first run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualview.demo.starter import write_starter


def register(app: typer.Typer) -> None:
    app.command("init")(init)


def init(
    folder: Annotated[Path, typer.Argument(help="The folder to write (new or empty).")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty folder: the starter's files replace files of the "
            "same name (each is listed); nothing else is touched.",
        ),
    ] = False,
) -> None:
    """Write a ready experiment folder: the first-run experiment, its training config and
    the data they read, with paths inside the folder."""
    result = write_starter(folder, force=force)
    for rel in result.overwritten:
        typer.echo(f"overwrote {folder / rel}", err=True)
    typer.echo(f"wrote {len(result.written)} files to {folder}; next:", err=True)
    typer.echo(f"cd {folder}\ndualview run {result.experiment}")
