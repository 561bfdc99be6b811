"""Promptriever training rows (``samaya-ai/msmarco-w-instructions`` layout).

A row: ``query_id`` (``"<qid>-instruct"`` for rows with an instruction), ``query`` (query and
instruction joined), ``only_query``, ``only_instruction``, ``has_instruction``,
``positive_passages`` / ``negative_passages`` (``docid``, ``title``, ``text``) and
``new_negatives``: the instruction negatives, each a passage with an ``explanation``.

Instruct rows become ``orig`` records (query and instruction split apart, ``new_negatives`` as
instruction negatives, ``negative_passages`` as hard negatives); the other rows become
``plain`` records. ``meta.counterpart_id`` links an instruct row to its non-instruct row and
back (the id with and without the ``-instruct`` suffix).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dualview.data.formats.common import (
    build_record,
    dedupe_documents,
    map_rows,
    passages,
    require_str,
)
from dualview.data.schema import Record
from dualview.errors import DataError

INSTRUCT_SUFFIX = "-instruct"


def _has_instruction(row: dict[str, Any], query_id: str) -> bool:
    flag = row.get("has_instruction")
    if flag is None:
        return query_id.endswith(INSTRUCT_SUFFIX)
    return bool(flag)


def _explanations(row: dict[str, Any], ids: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for doc_id, passage in zip(ids, row.get("new_negatives") or [], strict=False):
        if isinstance(passage, dict) and passage.get("explanation"):
            out[doc_id] = str(passage["explanation"])
    return out


def convert_row(row: dict[str, Any], path: str | Path, line: int) -> Record:
    query_id = str(row.get("query_id") or "")
    if not query_id:
        raise DataError(path, line, "query_id", "missing")
    positives = passages(row, "positive_passages", path, line)
    seen = {d.id for d in positives}
    if _has_instruction(row, query_id):
        query = require_str(row, "only_query", path, line)
        instruction = require_str(row, "only_instruction", path, line)
        instruction_negatives = dedupe_documents(passages(row, "new_negatives", path, line), seen)
        hard_negatives = dedupe_documents(passages(row, "negative_passages", path, line), seen)
        meta: dict[str, Any] = {
            "source": "promptriever",
            "counterpart_id": query_id.removesuffix(INSTRUCT_SUFFIX),
        }
        explanations = _explanations(row, [d.id for d in instruction_negatives])
        if explanations:
            meta["instruction_negative_explanations"] = explanations
        return build_record(
            path,
            line,
            id=query_id,
            view="orig",
            query=query,
            instruction=instruction,
            positives=positives,
            instruction_negatives=instruction_negatives,
            hard_negatives=hard_negatives,
            meta=meta,
        )
    query = row.get("only_query") or require_str(row, "query", path, line)
    return build_record(
        path,
        line,
        id=query_id,
        view="plain",
        query=query,
        positives=positives,
        hard_negatives=dedupe_documents(passages(row, "negative_passages", path, line), seen),
        meta={"source": "promptriever", "counterpart_id": query_id + INSTRUCT_SUFFIX},
    )


def read(path: str | Path) -> Iterator[Record]:
    return map_rows(path, lambda row, line: iter([convert_row(row, path, line)]))
