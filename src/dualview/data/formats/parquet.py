"""Parquet export of records for trainers, written in row groups (never all in memory)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dualview.data.schema import Record

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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    count = 0
    buffer: list[dict] = []
    with pq.ParquetWriter(tmp, SCHEMA) as writer:
        for record in records:
            buffer.append(_row(record))
            if len(buffer) >= batch_size:
                writer.write_table(pa.Table.from_pylist(buffer, schema=SCHEMA))
                count += len(buffer)
                buffer = []
        if buffer or count == 0:
            writer.write_table(pa.Table.from_pylist(buffer, schema=SCHEMA))
            count += len(buffer)
    os.replace(tmp, path)
    return count


def read(path: str | Path) -> Iterable[Record]:
    """Stream records back from a Parquet file written by :func:`write`."""
    for batch in pq.ParquetFile(path).iter_batches():
        for row in batch.to_pylist():
            row["meta"] = json.loads(row["meta"] or "{}")
            yield Record.model_validate(row)
