"""tevatron train JSONL: ``{"query_id", "query", "positive_passages", "negative_passages"}``.

Reading gives ``plain`` records (tevatron has no separate instruction; an instruction, if
any, is already inside ``query``). Writing joins query and instruction and puts instruction
negatives first among ``negative_passages``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dualview.data.formats.common import (
    build_record,
    dedupe_documents,
    map_rows,
    passages,
    query_text,
    require_str,
)
from dualview.data.schema import Document, Record
from dualview.io.atomic import write_jsonl


def read(path: str | Path) -> Iterator[Record]:
    def convert(row: dict[str, Any], line: int) -> Iterator[Record]:
        query = require_str(row, "query", path, line)
        positives = passages(row, "positive_passages", path, line)
        seen = {d.id for d in positives}
        negatives = dedupe_documents(passages(row, "negative_passages", path, line), seen)
        yield build_record(
            path,
            line,
            id=str(row.get("query_id") or f"tevatron-{line}"),
            view="plain",
            query=query,
            positives=positives,
            hard_negatives=negatives,
        )

    return map_rows(path, convert)


def _passage(doc: Document) -> dict[str, str]:
    return {"docid": doc.id, "title": doc.title, "text": doc.text}


def to_row(record: Record) -> dict[str, Any]:
    return {
        "query_id": record.id,
        "query": query_text(record),
        "positive_passages": [_passage(d) for d in record.positives],
        "negative_passages": [_passage(d) for d in record.negatives()],
    }


def write(records: Iterable[Record], path: str | Path) -> int:
    return write_jsonl(path, (to_row(r) for r in records))
