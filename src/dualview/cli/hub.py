"""``dualview push`` and ``dualview model-card``: Hub-ready artifacts (`dualview.hub`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualview.io.paths import check_outputs

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("push")(push)
    app.command("model-card")(model_card)


def push(
    folder: Annotated[Path, typer.Argument(help="A Hub dataset export or a saved model folder.")],
    repo_id: Annotated[str, typer.Argument(help="Hub repository, e.g. user/my-dv-data.")],
    repo_type: Annotated[
        str | None, typer.Option(help="dataset | model (default: guessed from the folder).")
    ] = None,
    token_env: Annotated[
        str, typer.Option(help="NAME of the env variable holding the Hub token (never logged).")
    ] = "HF_TOKEN",
    private: Annotated[bool, typer.Option(help="Create the repository as private.")] = False,
) -> None:
    """Upload FOLDER to the Hugging Face Hub (HF_ENDPOINT selects another Hub server)."""
    from dualview.hub.push import push as push_folder

    result = push_folder(folder, repo_id, repo_type, token_env=token_env, private=private)
    console.print(f"pushed {folder} to {result.repo_type} {result.url} (commit {result.commit})")


def model_card(
    model: Annotated[Path, typer.Argument(help="A model folder saved by dualview train.")],
    eval_paths: Annotated[
        list[Path] | None,
        typer.Option("--eval", help="dualview eval result JSONs or folders of this model."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Model name in the card.")] = None,
    license_id: Annotated[str, typer.Option("--license", help="License id.")] = "apache-2.0",
    allow_other_model_results: Annotated[
        bool,
        typer.Option(
            "--allow-other-model-results",
            help="Show results whose model fingerprint is not MODEL's (refused otherwise), "
            "marked as another model's and left out of the model-index.",
        ),
    ] = False,
) -> None:
    """(Re)write MODEL/README.md, a sentence-transformers card with a model-index.

    Each --eval result must be MODEL's own (its recorded model fingerprint is MODEL's)."""
    from dualview.hub.model_card import write_model_card

    check_outputs([model / "README.md"], list(eval_paths or []))
    path = write_model_card(
        model,
        eval_paths,
        name=name,
        license_id=license_id,
        allow_other_model_results=allow_other_model_results,
    )
    console.print(f"wrote {path}")
