"""Command-line options shared by several commands (same name, type and help everywhere)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualview.synth.estimate import Prices, parse_price, parse_tokens_per_s

LlmBackend = Annotated[
    str | None,
    typer.Option(
        "--llm-backend", help="The LLM's backend kind: local | openai | vllm | a plugin's."
    ),
]
LlmCache = Annotated[
    Path | None,
    typer.Option("--llm-cache", help="LLM answer cache file (default OUT.cache.jsonl)."),
]
Limit = Annotated[
    int | None,
    typer.Option(
        "--limit", min=1, metavar="N", help="Read only the first N input records (a quick try)."
    ),
]
Model = Annotated[str | None, typer.Option(help="Model name or local path.")]
BaseUrl = Annotated[
    list[str] | None,
    typer.Option(help="OpenAI-compatible base URL; repeat for several endpoints of one model."),
]
Engine = Annotated[
    str | None, typer.Option(help="local (default) | ray: Ray Data map_batches, dualview[ray].")
]
RayAddress = Annotated[
    str | None, typer.Option(help="Ray cluster to join (e.g. auto); default: a local one.")
]
ApiKeyEnv = Annotated[
    str | None, typer.Option(help="NAME of the env variable holding the API key.")
]
Concurrency = Annotated[int | None, typer.Option(help="Units in flight.")]
Overrides = Annotated[
    list[str] | None, typer.Option("--set", help="Config override key.path=value.")
]
Precision = Annotated[
    str | None,
    typer.Option(
        help="Encoding precision: auto (bf16 on CUDA, fp32 on CPU) | fp32 (force full "
        "precision) | fp16 | bf16. Part of the model fingerprint: cached vectors never mix."
    ),
]
Device = Annotated[
    str | None, typer.Option(help="One device: cpu, cuda, cuda:1 ... (default: auto).")
]
Devices = Annotated[
    str | None,
    typer.Option(
        help="Encode on several devices at once, one process each: cuda:0,cuda:1 "
        "(replaces --device).",
        metavar="DEVICE,DEVICE",
    ),
]


def split_devices(devices: str | None) -> list[str] | None:
    """``"cuda:0,cuda:1"`` -> ``["cuda:0", "cuda:1"]``; ``None`` or empty -> ``None``."""
    if devices is None:
        return None
    return [d.strip() for d in devices.split(",") if d.strip()] or None


Estimate = Annotated[
    bool,
    typer.Option(
        "--estimate",
        help="Print the LLM calls, prompt/completion tokens and shared-prefix share the job "
        "would use, then stop (nothing sent, nothing written).",
    ),
]
# Both are checked where they are parsed (one located error, exit 2; no nan or inf).
PricePerMtok = Annotated[
    Prices | None,
    typer.Option(
        "--price-per-mtok",
        help="IN,OUT: price per million prompt and completion tokens.",
        parser=parse_price,
        metavar="IN,OUT",
    ),
]
ServerTokensPerS = Annotated[
    float | None,
    typer.Option(
        "--server-tokens-per-s",
        help="Tokens (prompt + completion) the server handles per second: server hours.",
        parser=parse_tokens_per_s,
        metavar="N",
    ),
]
