"""Parquet export of records for trainers, written in row groups (never all in memory)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dualview.data.formats.common import build_record, map_rows
from dualview.data.schema import Record
from dualview.io.atomic import atomic_path

_DOC = pa.struct([("id", pa.string()), ("title", pa.string()), ("text", pa.string())])
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("parent_id", pa.string()),
        ("view", pa.string()),
        ("query", pa.string()),
        ("instruction", pa.string()),
        ("positives", pa.list_(_DOC)),
        ("instruction_negatives", pa.list_(_DOC)),
        ("hard_negatives", pa.list_(_DOC)),
        ("meta", pa.string()),  # JSON text: free-form provenance
    ]
)


def _row(record: Record) -> dict:
    data = record.model_dump(mode="json")
    data["meta"] = json.dumps(data["meta"], ensure_ascii=False)
    return data


def write(records: Iterable[Record], path: str | Path, batch_size: int = 2048) -> int:
    """Write records to ``path`` atomically (temp file + rename); returns the row count."""
    path = Path(path)
    count = 0
    buffer: list[dict] = []
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, SCHEMA) as writer:
        for record in records:
            buffer.append(_row(record))
            if len(buffer) >= batch_size:
                writer.write_table(pa.Table.from_pylist(buffer, schema=SCHEMA))
                count += len(buffer)
                buffer = []
        if buffer or count == 0:
            writer.write_table(pa.Table.from_pylist(buffer, schema=SCHEMA))
            count += len(buffer)
    return count


def read(path: str | Path) -> Iterator[Record]:
    """Stream records back from Parquet written by `write`: a file, a folder of files,
    or any other ``datasets`` source with these columns (`.source`)."""

    def convert(row: dict, line: int) -> Iterator[Record]:
        meta = row.get("meta")
        row["meta"] = json.loads(meta) if isinstance(meta, str) and meta else {}
        yield build_record(path, line, **row)

    return map_rows(path, convert)
