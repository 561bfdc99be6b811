"""Command-line options shared by several commands (same name, type and help everywhere)."""

from __future__ import annotations

from typing import Annotated

import typer

Backend = Annotated[str | None, typer.Option(help="openai | local | vllm")]
Model = Annotated[str | None, typer.Option(help="Model name or local path.")]
BaseUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible base URL.")]
ApiKeyEnv = Annotated[
    str | None, typer.Option(help="NAME of the env variable holding the API key.")
]
Concurrency = Annotated[int | None, typer.Option(help="Units in flight.")]
Overrides = Annotated[
    list[str] | None, typer.Option("--set", help="Config override key.path=value.")
]
