"""Helpers shared by the format adapters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from dualview.data.formats.source import iter_rows
from dualview.data.jsonl import validation_error_to_data_error
from dualview.data.schema import Document, Record
from dualview.errors import DataError

T = TypeVar("T")


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The first of ``keys`` with a value (a Parquet struct has every key, some null)."""
    return next((row[key] for key in keys if row.get(key) is not None), None)


def passage_to_document(passage: Any, path: str | Path, line: int, field: str) -> Document:
    """Upstream passage dict (``docid``/``_id``/``id``, ``title``, ``text``/``passage``)."""
    if isinstance(passage, str):
        passage = {"text": passage}
    if not isinstance(passage, dict):
        raise DataError(
            path, line, field, f"expected a passage object, got {type(passage).__name__}"
        )
    text = _first(passage, ("text", "passage"))
    if not isinstance(text, str) or not text.strip():
        raise DataError(path, line, f"{field}.text", "missing or empty passage text")
    raw_id = _first(passage, ("docid", "_id", "id"))
    return Document.from_text(
        text=text, title=passage.get("title") or "", id=str(raw_id) if raw_id is not None else None
    )


def passages(row: dict[str, Any], key: str, path: str | Path, line: int) -> list[Document]:
    """The list under ``key`` as documents (missing key = empty list)."""
    value = row.get(key) or []
    if not isinstance(value, list):
        raise DataError(path, line, key, "expected a list of passages")
    return [passage_to_document(p, path, line, f"{key}[{i}]") for i, p in enumerate(value)]


def require_str(row: dict[str, Any], key: str, path: str | Path, line: int) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(path, line, key, "missing or empty string")
    return value


def build_record(path: str | Path, line: int, **fields: Any) -> Record:
    """Construct a record, turning validation errors into located `DataError`."""
    try:
        return Record(**fields)
    except ValidationError as exc:
        raise validation_error_to_data_error(exc, path, line) from None


def dedupe_documents(docs: list[Document], exclude: set[str]) -> list[Document]:
    """Drop documents whose id is in ``exclude`` or already seen (upstream data repeats)."""
    out: list[Document] = []
    for doc in docs:
        if doc.id not in exclude:
            exclude.add(doc.id)
            out.append(doc)
    return out


def map_rows(
    path: str | Path, convert: Callable[[dict[str, Any], int], Iterator[T]]
) -> Iterator[T]:
    """Stream a JSONL file, or a ``datasets`` source (`.source`), through
    ``convert(row, line_number)``; a dataset source's rows are numbered from 1."""
    for line_number, row in iter_rows(path):
        yield from convert(row, line_number)


def join_query_instruction(
    query: str, instruction: str, template: str = "{query} {instruction}"
) -> str:
    """``template`` filled with query and instruction; the bare query when there is none."""
    if not instruction.strip():
        return query
    return template.format(query=query, instruction=instruction).strip()


def query_text(record: Record, template: str = "{query} {instruction}") -> str:
    """Query joined with its instruction (mteb/Promptriever style); bare query when none."""
    return join_query_instruction(record.query, record.instruction, template)
