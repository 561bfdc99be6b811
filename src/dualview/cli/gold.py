"""``dualview data gold-build`` and ``dualview data gold-check``: the hand-written gold set."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dualview.cli.data import data_app
from dualview.data import gold
from dualview.data.gold_check import CheckConfig, check_instances
from dualview.data.gold_lexical import lexical_pairwise
from dualview.errors import DataError
from dualview.io.paths import check_outputs

console = Console(stderr=True)

SourceDir = Annotated[
    Path, typer.Option("--source", help="Folder of authoring files <domain>.jsonl.")
]


def register(app: typer.Typer) -> None:
    """Add the gold commands to the ``data`` command group (registered by ``cli.data``)."""
    data_app.command("gold-build")(gold_build)
    data_app.command("gold-check")(gold_check)


def gold_build(
    source: SourceDir = gold.SOURCE_DIR,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for train/test/counts/CARD.md.")
    ] = gold.GOLD_DIR,
    n_hard: Annotated[int, typer.Option(help="Hard negatives per record (>= 2).")] = (
        gold.DEFAULT_N_HARD
    ),
    test_fraction: Annotated[float, typer.Option(help="Test share per domain.")] = (
        gold.DEFAULT_TEST_FRACTION
    ),
) -> None:
    """Validate the gold sources and write train.jsonl, test.jsonl, counts.json, CARD.md counts
    the leave-domains-out test sets (folds/ldo-K) and the validation set (val)."""
    check_outputs([out], [source], replaced=False)  # by default the sources lie in OUT/source
    result = gold.build(source, out, n_hard=n_hard, test_fraction=test_fraction)
    from dualview.eval.export import write_fold_benchmarks, write_validation_benchmark

    for folder in write_fold_benchmarks(out / "folds", out):
        console.print(f"wrote leave-domains-out test set: {folder}")
    val = write_validation_benchmark(out / "val", out)
    if val is not None:
        console.print(f"wrote the validation set (select on it only): {val}")
    for split, info in result.counts["splits"].items():
        console.print(f"{split}: {info['instances']} instances, {info['records']} records")
    for name, path in result.paths.items():
        console.print(f"wrote {name}: {path}")


def gold_check(
    source: SourceDir = gold.SOURCE_DIR,
    max_shingle_jaccard: float = CheckConfig().max_shingle_jaccard,
    max_char_ratio: float = CheckConfig().max_char_ratio,
    max_leak_df: Annotated[
        float, typer.Option(help="A word is rare if at most this share of passages has it.")
    ] = CheckConfig().max_leak_df,
    max_reversal_ratio: float = CheckConfig().max_reversal_ratio,
    max_query_jaccard: float = CheckConfig().max_query_jaccard,
    lexical: Annotated[
        bool, typer.Option("--lexical", help="Also print the BM25 pair-accuracy baseline.")
    ] = False,
    semantic: Annotated[
        str | None,
        typer.Option(
            help="Also flag extra hard negatives as close to the query as P+/N* under this "
            "encoder (e.g. embedded:minilm)."
        ),
    ] = None,
    n_hard: Annotated[int, typer.Option(help="Hard negatives per record, as built.")] = (
        gold.DEFAULT_N_HARD
    ),
) -> None:
    """Flag P+/N* near-duplicates, instruction leaks and non-reversals; exit 1 if any."""
    config = CheckConfig(
        max_shingle_jaccard=max_shingle_jaccard,
        max_char_ratio=max_char_ratio,
        max_leak_df=max_leak_df,
        max_reversal_ratio=max_reversal_ratio,
        max_query_jaccard=max_query_jaccard,
    )
    located = gold.load_instances(gold.source_files(source))
    if not located:
        raise DataError(source, None, "file", "no gold instances found")
    findings = check_instances(located, config)
    if semantic:
        from dualview.data.gold_semantic import suspect_extras
        from dualview.retrieval.encode import Encoder

        findings += suspect_extras(located, Encoder(semantic, show_progress=False), n_hard)
    for finding in findings:
        typer.echo(str(finding))
    flagged = len({f.instance for f in findings})
    console.print(f"{len(located)} instances checked, {len(findings)} finding(s) in {flagged}")
    if lexical:
        _print_lexical([li.instance for li in located])
    if findings:
        raise typer.Exit(1)


def _print_lexical(instances: list[gold.GoldInstance]) -> None:
    table = Table(title="BM25 pair accuracy (chance for 'both' ~0.25)")
    for column in ("group", "n", "orig P+>N*", "dv N*>P+", "both"):
        table.add_column(column)
    for group, acc in lexical_pairwise(instances).items():
        rates = acc.rates()
        table.add_row(group, str(acc.n), *(f"{rates[k]:.2f}" for k in ("orig", "dv", "both")))
    Console().print(table)
