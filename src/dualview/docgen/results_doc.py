"""Tables in a Markdown document that are generated from committed result files.

A generated table sits between two HTML comments that name its source::

    <!-- table: results/interaction-gold/report.csv -->
    | configuration | ... |
    <!-- end table -->

The path is relative to the document. After it, ``; `` and a comma-separated list keeps
only the metrics whose name starts with one of the items (columns of a report, rows of a
significance table), for a report too wide for the page::

    <!-- table: results/gold-cpu/significance.json; paired p-MRR, phenomena p-MRR -->

The source says how the table is rendered:

- ``report.csv`` (what ``dualview report`` writes): the results table, mean ± sd and the
  best value of each column in bold (`dualview.report.table.markdown_table`);
- ``significance.json``: the paired-significance table
  (`dualview.report.compare.significance_table`);
- the ``bench.json`` of ``dualview bench-synth``: its tables (`dualview.synth.bench`);
- the ``-o/--out`` file of ``dualview review stats``: the review statistics
  (`dualview.review.stats.markdown`);
- an LLM job's ``OUT.stats.json`` (seed, synth, verify, poison): what came through and why
  the rest was dropped (`dualview.synth.job_stats`);
- a folder (the path ends in ``/``) of ``dualview eval`` result files: a results table, a row
  per file (`dualview.report.collect.eval_file_row`).

A JSON file is told by its content (a list of comparisons, or the keys of one of the
tools' objects); any other file is an error naming it.

`stale_tables` lists the blocks whose text differs from what their file renders (the test
of ``docs/results.md`` fails on any); `write_tables` rewrites them. From the shell::

    python -m dualview.docgen.results_doc docs/results.md           # check, exit 1 if stale
    python -m dualview.docgen.results_doc docs/results.md --write   # regenerate the tables
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualview.errors import DataError
from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_input_text, read_json_file
from dualview.report.collect import eval_file_row
from dualview.report.compare import significance_table
from dualview.report.significance import PairedComparison
from dualview.report.table import (
    keep_metrics,
    markdown_table,
    metric_kept,
    parse_prefixes,
    rows_from_csv,
)
from dualview.review.stats import markdown as review_markdown
from dualview.synth.bench import markdown_table as bench_markdown
from dualview.synth.job_stats import is_job_stats, stats_markdown

BLOCK = re.compile(
    r"<!-- table: (?P<source>[^\s;]+)(?:; (?P<only>[^\n]*?))? -->\n(?P<body>.*?)<!-- end table -->",
    re.S,
)


@dataclass(frozen=True)
class TableBlock:
    """One generated table: its source file, the text it holds and its first line."""

    source: Path
    body: str
    line: int
    only: tuple[str, ...] = ()


def render(source: Path, only: tuple[str, ...] = ()) -> str:
    """The Markdown a result file renders to (``only``: metric name prefixes kept, for a
    report table or a significance table)."""
    if source.is_dir():
        return _eval_folder_table(source, only)
    if not source.is_file():
        raise DataError(source, None, "table", "the report file does not exist")
    text = read_input_text(source)
    if source.name.endswith(".csv"):
        try:
            return markdown_table([keep_metrics(row, only) for row in rows_from_csv(text)])
        except ValueError as exc:
            raise DataError(source, 1, "configuration", str(exc)) from None
    if not source.name.endswith(".json"):
        raise DataError(source, None, "table", f"expected a .csv or a .json file; {KINDS}")
    data = read_json_file(source)
    if isinstance(data, list):  # a report's significance.json
        comparisons = [PairedComparison.from_dict(item) for item in data]
        return significance_table([c for c in comparisons if metric_kept(c.metric, only)])
    kind = _json_kind(data)
    if kind is None:
        raise DataError(source, 1, "json", f"not a result file of a known kind; {KINDS}")
    if only:
        raise DataError(source, None, "table", "a metric filter applies to report tables only")
    return kind(data).rstrip() + "\n"


def _eval_folder_table(folder: Path, only: tuple[str, ...]) -> str:
    """A folder of `dualview eval` result files: a row per file, named by the file name up
    to its first dot (``base-query-only.paired.json`` -> ``base-query-only``)."""
    files = sorted(folder.glob("*.json"))
    if not files:
        raise DataError(folder, None, "table", "the folder holds no evaluation .json files")
    rows = [eval_file_row(f.name.split(".")[0], f) for f in files]
    return markdown_table([keep_metrics(row, only) for row in rows])


KINDS = (
    "this tool renders a report's report.csv or significance.json, a bench-synth bench.json, a "
    "`dualview review stats -o` file, an LLM job's OUT.stats.json, or a folder of "
    "`dualview eval` result files"
)


def _json_kind(data: object) -> Callable[[dict[str, Any]], str] | None:
    """The renderer of a JSON object written by one of the tools, told by its keys."""
    if not isinstance(data, dict):
        return None
    if data.get("benchmark") == "bench-synth":
        return bench_markdown
    if {"verdicts", "accuracy", "failure_modes"} <= data.keys():
        return review_markdown
    if is_job_stats(data):
        return stats_markdown
    return None


def table_blocks(document: Path) -> list[TableBlock]:
    """Every generated table of ``document``, in order."""
    text = document.read_text(encoding="utf-8")
    return [
        TableBlock(
            source=document.parent / match["source"],
            body=match["body"],
            line=text.count("\n", 0, match.start()) + 1,
            only=parse_prefixes(match["only"]),
        )
        for match in BLOCK.finditer(text)
    ]


def stale_tables(document: Path) -> list[TableBlock]:
    """The blocks of ``document`` whose text differs from what their file renders."""
    return [
        block for block in table_blocks(document) if block.body != render(block.source, block.only)
    ]


def write_tables(document: Path) -> int:
    """Regenerate every table of ``document`` from its file; return how many changed."""
    text = document.read_text(encoding="utf-8")
    changed = 0

    def regenerate(match: re.Match[str]) -> str:
        nonlocal changed
        body = render(document.parent / match["source"], parse_prefixes(match["only"]))
        changed += body != match["body"]
        return match.group(0)[: match.start("body") - match.start()] + f"{body}<!-- end table -->"

    new = BLOCK.sub(regenerate, text)
    if changed:
        atomic_write_text(document, new)
    return changed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print("usage: python -m dualview.docgen.results_doc DOCUMENT.md [--write]")
        return 2
    document = Path(args[0])
    if "--write" in args[1:]:
        print(f"{document}: {write_tables(document)} table(s) regenerated")
        return 0
    stale = stale_tables(document)
    for block in stale:
        print(f"{document}:{block.line}: table differs from {block.source}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
