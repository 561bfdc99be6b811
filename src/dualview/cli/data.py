"""``dualview data``: convert between formats, validate, and describe datasets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dualview.cli.vocabulary import VocabularyGroup
from dualview.data import formats
from dualview.data.jsonl import RejectLog
from dualview.data.stats import Tokenizer, compute_stats, hf_token_counter, whitespace_tokens
from dualview.io.paths import check_outputs
from dualview.models.pretrained import from_pretrained
from dualview.progress import track

data_app = typer.Typer(
    cls=VocabularyGroup,
    rich_markup_mode=None,
    help="Convert, validate and describe datasets.",
    no_args_is_help=True,
)
console = Console(stderr=True)

SkipInvalid = Annotated[
    bool, typer.Option("--skip-invalid", help="Write bad lines to a rejects file and go on.")
]
Rejects = Annotated[
    Path | None,
    typer.Option(help="Rejects file for --skip-invalid (default: OUT/FILE + .rejects.jsonl)."),
]
InFormat = Annotated[
    str, typer.Option("--from", help=f"Input format: {', '.join(sorted(formats.READERS))}.")
]


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")


def _reader_options(fmt: str, skip_invalid: bool, rejects: RejectLog) -> dict:
    # Only the native reader validates line by line; adapters fail on the first bad row.
    if fmt == "dualview":
        return {"skip_invalid": skip_invalid, "rejects": rejects}
    return {}


def _report_rejects(rejects: RejectLog) -> None:
    if rejects.count:
        console.print(f"[yellow]{rejects.count} invalid line(s) skipped -> {rejects.path}")


@data_app.command()
def convert(
    source: Annotated[Path, typer.Argument(help="Input file or folder (BEIR).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output file.")],
    from_format: InFormat = "dualview",
    to_format: Annotated[
        str, typer.Option("--to", help=f"Output format: {', '.join(sorted(formats.WRITERS))}.")
    ] = "dualview",
    skip_invalid: SkipInvalid = False,
    rejects_path: Rejects = None,
) -> None:
    """Convert SOURCE (in --from format) to OUT (in --to format), atomically."""
    reader = formats.get_reader(from_format)
    writer = formats.get_writer(to_format)
    rejects = RejectLog(rejects_path or out.with_name(out.name + ".rejects.jsonl"))
    check_outputs([out, rejects.path if skip_invalid else None], [source])
    records = reader(source, **_reader_options(from_format, skip_invalid, rejects))
    try:
        count = writer(track(records, description="converting"), out)
    finally:
        rejects.close()
    _report_rejects(rejects)
    console.print(f"wrote {count} record(s) to {out}")


@data_app.command()
def validate(
    source: Annotated[Path, typer.Argument(help="File (or BEIR folder) to validate.")],
    from_format: InFormat = "dualview",
    skip_invalid: SkipInvalid = False,
    rejects_path: Rejects = None,
) -> None:
    """Check every line against the record schema; exit 2 at the first error."""
    reader = formats.get_reader(from_format)
    rejects = RejectLog(rejects_path or source.with_name(source.name + ".rejects.jsonl"))
    check_outputs([rejects.path if skip_invalid else None], [source])
    try:
        valid = sum(
            1 for _ in reader(source, **_reader_options(from_format, skip_invalid, rejects))
        )
    finally:
        rejects.close()
    _report_rejects(rejects)
    console.print(f"{source}: {valid} valid record(s), {rejects.count} invalid")
    if rejects.count:
        raise typer.Exit(1)


def _token_counter(name: str | None) -> Tokenizer:
    """Whitespace tokens, or the tokens of the Hugging Face tokenizer ``name`` (a folder or a
    Hub id): one ``--tokenizer: cannot load model ...`` error when it does not load."""
    if not name:
        return whitespace_tokens
    from transformers import AutoTokenizer  # heavy: only when --tokenizer is given

    return hf_token_counter(from_pretrained(AutoTokenizer.from_pretrained, name, "--tokenizer"))


@data_app.command()
def stats(
    source: Annotated[Path, typer.Argument(help="File (or BEIR folder) to describe.")],
    from_format: InFormat = "dualview",
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Hugging Face tokenizer for token lengths (default: whitespace)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Records per view, instruction negatives per record, duplicates, length percentiles."""
    count_tokens = _token_counter(tokenizer)
    # Statistics count repeated ids instead of stopping at the first.
    options = {"unique_ids": False} if from_format == "dualview" else {}
    records = formats.get_reader(from_format)(source, **options)
    result = compute_stats(track(records, description="reading"), count_tokens).to_dict()
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    table = Table(title=f"{source} ({tokenizer or 'whitespace'} tokens)")
    table.add_column("statistic")
    table.add_column("value")
    table.add_row("records", f"{result['records']:,}")
    for view, n in result["views"].items():
        table.add_row(f"view {view}", f"{n:,}")
    table.add_row(
        "instruction negatives / record", _hist(result["instruction_negatives_per_record"])
    )
    table.add_row("hard negatives / record", _hist(result["hard_negatives_per_record"]))
    table.add_row("duplicate record ids", str(result["duplicate_record_ids"]))
    for part, pct in result["length_percentiles"].items():
        if pct:
            table.add_row(f"{part} length", "  ".join(f"{k}={v:g}" for k, v in pct.items()))
    Console().print(table)


def _hist(hist: dict) -> str:
    return "  ".join(f"{k}:{v}" for k, v in hist.items()) or "-"


@data_app.command("split-beir")
def split_beir_command(
    source: Annotated[Path, typer.Argument(help="BEIR folder to split by query.")],
    first: Annotated[Path, typer.Argument(help="Folder for the first N queries.")],
    rest: Annotated[Path, typer.Argument(help="Folder for the remaining queries.")],
    n_first: Annotated[int, typer.Option("--size", help="Queries in the first folder.")],
    seed: Annotated[
        int | None, typer.Option(help="Shuffle queries with this seed (default: qrels order).")
    ] = None,
) -> None:
    """Split a BEIR folder into two by query (same corpus): e.g. seed data vs held-out."""
    from dualview.data.split import split_beir

    check_outputs([first, rest], [source], replaced=False)  # each gets files, not replaced
    n1, n2 = split_beir(source, first, rest, n_first, seed=seed)
    console.print(f"{first}: {n1} queries; {rest}: {n2} queries")
