"""``dualview eval``: evaluate one or more models on instruction-following benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dualview.cli.options import Device, Devices, Precision, split_devices
from dualview.errors import ConfigError
from dualview.eval.benchmarks import BENCHMARKS
from dualview.eval.benchmarks.base import FIRST_STAGES
from dualview.eval.layout import display_value
from dualview.eval.run import EvalSettings, Summary, evaluate
from dualview.eval.two_stage import RerankSettings
from dualview.models.config import check_query_template

console = Console()


def register(app: typer.Typer) -> None:
    app.command(name="eval")(eval_command)


def print_summary(summary: Summary) -> None:
    table = Table(title="dualview eval (IR measures ×100)")
    table.add_column("benchmark")
    table.add_column("metric")
    for model in summary.models:
        table.add_column(model, justify="right")
    for bench, metric, cells in summary.rows():
        shown = ["-" if v is None else f"{display_value(metric, v):.2f}" for v in cells]
        table.add_row(bench, metric, *shown)
    console.print(table)


def eval_command(
    benchmarks: Annotated[
        list[str],
        typer.Option(
            "--benchmarks",
            "-b",
            help=f"KIND[:SUBSET,...][=PATH], repeatable; KIND: {', '.join(sorted(BENCHMARKS))}. "
            "Without =PATH the data is fetched from the Hugging Face Hub.",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    models: Annotated[
        list[str] | None,
        typer.Argument(
            help="Models: a folder, a Hub name, one of our checkpoints, embedded:minilm. "
            "With --reranker: the first stages (none with a BM25 or candidates --first-stage)."
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            metavar="N",
            help="Evaluate only the first N queries (pairs) of each benchmark set (a quick try).",
        ),
    ] = None,
    skip: Annotated[
        int,
        typer.Option(
            "--skip",
            min=0,
            metavar="N",
            help="Leave out the first N queries (pairs) of each set, before --limit: "
            "--skip 100 --limit 200 is a validation slice disjoint from a --limit 100 run.",
        ),
    ] = 0,
    batch_size: Annotated[int, typer.Option(help="Texts per forward pass.")] = 32,
    device: Device = None,
    query_template: Annotated[
        str, typer.Option(help="How query and instruction are joined.")
    ] = "{query} {instruction}",
    force_template: Annotated[
        bool,
        typer.Option(help="Use --query-template even where upstream puts the instruction first."),
    ] = False,
    query_prompt: Annotated[str | None, typer.Option(help="Literal prompt before queries.")] = None,
    doc_prompt: Annotated[str | None, typer.Option(help="Literal prompt before documents.")] = None,
    backend: Annotated[
        str, typer.Option("--search-backend", help="Search backend: auto, torch, faiss.")
    ] = "auto",
    cache: Annotated[
        bool,
        typer.Option(
            "--embedding-cache/--no-embedding-cache",
            help="Use the on-disk embedding and reranker score caches.",
        ),
    ] = True,
    precision: Precision = "auto",
    devices: Devices = None,
    reranker: Annotated[
        list[str] | None,
        typer.Option(
            "--reranker",
            help="A saved reranker folder (repeatable): reranks the first stage's top k; "
            "results are named RERANKER@FIRST_STAGE.",
        ),
    ] = None,
    first_stage: Annotated[
        str,
        typer.Option(
            help=f"First stage, one of {', '.join(FIRST_STAGES)}: the MODELS, BM25 (bm25: "
            "bm25s, stemmed; bm25-builtin: no stemming), or only the benchmarks' own candidate "
            "lists. FollowIR always reranks its top_ranked.",
        ),
    ] = "model",
    top_k: Annotated[
        int, typer.Option(help="Documents per query the reranker rescores.", min=1)
    ] = 20,
    reranker_precision: Annotated[
        str,
        typer.Option(
            help="The rerankers' weights: auto (bf16 on CUDA, fp32 on CPU) | fp32 | fp16 | "
            "bf16 (several times faster than fp32 for an LLM reranker on a CPU with bf16 "
            "instructions). Part of the reranker's fingerprint: cached scores never mix.",
        ),
    ] = "auto",
    interpolate: Annotated[
        list[float] | None,
        typer.Option(
            "--interpolate",
            metavar="W",
            help="Rank the top k by W x reranker + (1 - W) x first stage, each min-max "
            "normalised per query (repeatable: one column RERANKER~W@FIRST_STAGE per W; 1 is "
            "the reranker alone). Choose W on a validation set (-b gold-val), then report "
            "it on the others; the reranker's scores come from its cache after the first W.",
        ),
    ] = None,
) -> None:
    """Evaluate MODELS on the --benchmarks; write one JSON per benchmark and model to --out.

    With --reranker, each reranker rescores the top --top-k of each first stage."""
    try:
        check_query_template(query_template)
    except ValueError as exc:
        raise ConfigError(f"--query-template: {exc}") from None
    settings = EvalSettings(
        query_template=query_template,
        force_template=force_template,
        query_prompt=query_prompt,
        doc_prompt=doc_prompt,
        backend=backend,
        batch_size=batch_size,
        limit=limit,
        skip=skip,
    )
    rerank = RerankSettings(
        rerankers=list(reranker or []),
        first_stage=first_stage,
        top_k=top_k,
        weights=list(interpolate or [1.0]),
        precision=reranker_precision,
    )
    summary = evaluate(
        list(models or []),
        benchmarks,
        out,
        settings=settings,
        device=device,
        cache=cache,
        precision=precision or "auto",
        devices=split_devices(devices),
        rerank=rerank,
    )
    print_summary(summary)
    console.print(f"results: {out}/ (summary.md, summary.json, one JSON per model and benchmark)")
