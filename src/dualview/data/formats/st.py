"""sentence-transformers columns: ``anchor``, ``positive``, ``negative_1`` … ``negative_n``.

The anchor is the query joined with its instruction (``"{query} {instruction}"``); negatives
are instruction negatives first, then hard negatives. Reading back gives ``plain`` records
with content-hash document ids (the columns carry text only).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dualview.data.formats.common import build_record, map_rows, query_text, require_str
from dualview.data.schema import Document, Record
from dualview.io.atomic import write_jsonl


def to_row(record: Record, max_negatives: int | None = None) -> dict[str, str]:
    row = {"anchor": query_text(record), "positive": record.positives[0].text}
    negatives = record.negatives()[:max_negatives]
    for i, doc in enumerate(negatives, start=1):
        row[f"negative_{i}"] = doc.text
    return row


def write(records: Iterable[Record], path: str | Path) -> int:
    return write_jsonl(path, (to_row(r) for r in records))


def read(path: str | Path) -> Iterator[Record]:
    def convert(row: dict[str, Any], line: int) -> Iterator[Record]:
        anchor = require_str(row, "anchor", path, line)
        positive = Document.from_text(require_str(row, "positive", path, line))
        negative_keys = sorted(
            (k for k in row if k.startswith("negative") and row[k] is not None),
            key=lambda k: int(k.rpartition("_")[2]) if k.rpartition("_")[2].isdigit() else 0,
        )
        seen = {positive.id}
        negatives = []
        for key in negative_keys:
            doc = Document.from_text(require_str(row, key, path, line))
            if doc.id not in seen:
                seen.add(doc.id)
                negatives.append(doc)
        yield build_record(
            path,
            line,
            id=f"st-{line}",
            view="plain",
            query=anchor,
            positives=[positive],
            hard_negatives=negatives,
        )

    return map_rows(path, convert)
